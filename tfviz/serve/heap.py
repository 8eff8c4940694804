"""Keep the server's garbage collection cheap as the process imports more.

Streamlit runs a full gc.collect() after every script run. It walks every object the collector
tracks, and most of them are the libraries' own (functions, classes, their dicts and tuples),
which are never garbage. The app freezes what exists once it has started (app.setup_process):
frozen objects are left out of every later collection. But a server keeps importing after that:
a view's modules the first time a student opens it, and torch._dynamo with sympy (about 120,000
objects) the first time a decoder folder is loaded, since building a model on the meta device
imports them. Each collection then walked them again, after every keystroke of every session
(measured: bench/README.md).

freeze_new_imports freezes again whenever the process has imported modules since it last did.
It does not collect first (a full collection costs as much as the run it would follow, and new
imports leave no cyclic garbage to speak of); objects frozen are still freed by reference
counting, only their cycles are never collected, and it happens a bounded number of times per
process (once per batch of new modules).
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_seen = 0  # len(sys.modules) at the last freeze


def freeze_new_imports() -> bool:
    """Freeze every object the collector tracks if modules were imported since the last call
    that froze (the first call always freezes); returns whether it froze."""
    global _modules_seen
    if len(sys.modules) == _modules_seen:
        return False
    with _lock:
        if len(sys.modules) == _modules_seen:
            return False
        gc.freeze()
        _modules_seen = len(sys.modules)
        return True
