"""Keep the server's garbage collection cheap as the process imports more.

Streamlit runs a full gc.collect() after every script run. It walks every object the collector
tracks, and most of them are the libraries' own (functions, classes, their dicts and tuples),
which are never garbage. The app freezes what exists once it has started
(tfviz.ui.models.setup_process): frozen objects are left out of every later collection. But a
server keeps importing after that: a view's modules the first time a student opens it, and
torch._dynamo with sympy (about 120,000 objects) the first time a decoder folder is loaded, since
building a model on the meta device imports them. Each collection then walked them again, after
every keystroke of every session (measured: bench/README.md).

trim_malloc hands memory malloc keeps free back to the system (tfviz.ui.compute, when the server
goes idle or its cache drops a lot at once).

freeze_new_imports freezes again whenever the process has imported modules since it last did.
It does not collect first (a full collection costs as much as the run it would follow, and new
imports leave no cyclic garbage to speak of); objects frozen are still freed by reference
counting, only their cycles are never collected, and it happens a bounded number of times per
process (once per batch of new modules). The run that froze had its session's objects alive
too; collect_frozen frees those of them that have become garbage once the server is idle.
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


def collect_frozen() -> None:
    """Collect what the freezes kept and is garbage now, then freeze what is left.

    A freeze takes every object alive at the time, and a run that imported also had a session's
    own objects alive: its view, the traces it showed, its widgets' callbacks, held in reference
    cycles that only the collector frees. Frozen, they outlived the session (a decoder class left
    hundreds of MB of traces so). Meant for when no session is open (tfviz.ui.compute, when the
    server goes idle): the collection walks the whole heap once, and what it freezes again is the
    libraries' and the models', with no session's objects among them.
    """
    global _modules_seen
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _modules_seen = len(sys.modules)


def trim_malloc() -> bool:
    """Hand memory malloc holds free back to the system (glibc's malloc_trim(0), every arena);
    returns whether it ran (False where malloc is not glibc's).

    Memory a large value used (a trace, a sweep's arrays) stays in malloc's free lists once freed,
    in the process's size though unused, and many threads' arenas keep theirs apart: a server
    after a class held far more than it uses. A trim walks the free memory, so it is called
    after large drops and when the server goes idle, not on every free.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


_trim: list = []  # [malloc_trim or None], looked up once


def _malloc_trim():
    if not _trim:
        function = None
        if sys.platform.startswith("linux"):
            import ctypes
            import platform

            if platform.libc_ver()[0] == "glibc":
                try:
                    function = ctypes.CDLL("libc.so.6").malloc_trim
                    function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
                except (OSError, AttributeError):
                    function = None
        _trim.append(function)
    return _trim[0]
