"""tfviz.serve.heap: what the server imports after it started is frozen, so that Streamlit's
collection after every run does not walk it (issue 44: a decoder folder's loader imports
torch._dynamo and sympy, about 120,000 objects, and each keystroke then paid 50-150 ms)."""

from __future__ import annotations

import gc
import sys
import types

from tfviz.serve import heap


def test_new_imports_are_frozen_once(monkeypatch):
    monkeypatch.setattr(heap, "_modules_seen", 0)
    assert heap.freeze_new_imports()  # the first call freezes what the process holds
    frozen = gc.get_freeze_count()
    assert not heap.freeze_new_imports()  # nothing imported since: nothing to do
    made_after = [["a list the collector tracks"]]
    assert any(o is made_after for o in gc.get_objects())
    monkeypatch.setitem(sys.modules, "tfviz_heap_test_module", types.ModuleType("imported"))
    assert heap.freeze_new_imports()
    assert gc.get_freeze_count() > frozen
    # Frozen: left out of every collection (and still freed when nothing refers to it).
    assert not any(o is made_after for o in gc.get_objects())
    assert not heap.freeze_new_imports()


def test_a_run_of_the_app_freezes_the_modules_it_imported(fresh_app, monkeypatch):
    """A view opened for the first time imports its modules: the run that did so freezes them
    (app.py, at the end of main_area), so the next runs' collections skip them."""
    from tests.conftest import start_app

    monkeypatch.setattr(heap, "_modules_seen", 0)
    for name in [m for m in sys.modules if m.startswith("tfviz.ui.views.analysis")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh by this run
    start_app(view="Analysis")
    assert "tfviz.ui.views.analysis" in sys.modules
    assert heap._modules_seen == len(sys.modules)


def test_collect_frozen_frees_the_cycles_a_freeze_kept():
    """A freeze takes the session objects alive at the time with the modules; once they are
    garbage, held in a cycle, only collect_frozen (the server gone idle) frees them."""
    import weakref

    class SessionState:  # a session's objects: they refer to each other
        pass

    state = SessionState()
    state.widgets = {"callback_owner": state}
    alive = weakref.ref(state)
    gc.freeze()
    del state
    gc.collect()
    assert alive() is not None  # frozen: its cycle is out of every collection
    heap.collect_frozen()
    assert alive() is None
    assert gc.get_freeze_count() > 0  # what is still alive is frozen again
