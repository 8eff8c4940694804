"""One compute-and-cache layer (tfviz.ui.compute): the app's Streamlit cache decorators live in
at most two modules, and what the views compute is kept in one cache with one byte budget,
made once however many sessions ask, dropped by bytes, frozen where shared."""

from __future__ import annotations

import ast
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import wait_until
from tfviz.core import buffers, dissect
from tfviz.serve import cache as cache_module
from tfviz.serve import heap
from tfviz.serve.cache import ByteCache
from tfviz.ui import compute

ROOT = Path(__file__).resolve().parents[2]
DECORATORS = {"cache_data", "cache_resource"}
MOST_MODULES = 2


def cache_decorated(path: Path) -> list[str]:
    """The functions in path decorated with st.cache_data or st.cache_resource (called or not)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Attribute) and target.attr in DECORATORS:
                found.append(node.name)
    return found


def test_the_streamlit_cache_decorators_are_in_at_most_two_modules():
    files = [ROOT / "app.py", *sorted((ROOT / "tfviz").rglob("*.py"))]
    modules = {
        str(path.relative_to(ROOT)): names for path in files if (names := cache_decorated(path))
    }
    assert len(modules) <= MOST_MODULES, modules
    assert set(modules) <= {"tfviz/ui/compute.py", "tfviz/ui/models.py"}, modules


def test_the_count_sees_a_decorator_called_or_not(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import streamlit as st\n@st.cache_data\ndef a(): pass\n"
        "@st.cache_resource(show_spinner=False)\ndef b(): pass\ndef c(): pass\n"
    )
    assert cache_decorated(source) == ["a", "b"]


# ---- the one cache -----------------------------------------------------------------------------


def test_one_budget_holds_every_kind_of_value_and_drops_by_bytes():
    cache = ByteCache(max_bytes=1000, max_entries=100)
    cache.get(("trace", "d", "abc"), lambda: np.zeros(50), size=lambda v: v.nbytes)  # 400 B
    cache.get(("sweep", "d", 1), lambda: {"accuracy": 1.0}, size=lambda v: 100)
    cache.get(("trace", "d", "xyz"), lambda: np.zeros(50), size=lambda v: v.nbytes)
    assert cache.nbytes == 900 and len(cache) == 3
    cache.get(("flow", "d", "abc"), lambda: np.zeros(25), size=lambda v: v.nbytes)  # 200 B
    # the least recently used (the first trace) went, whatever made it
    assert ("trace", "d", "abc") not in cache and cache.nbytes == 700


def test_shrink_keeps_the_newest_and_trims_once():
    trims = []
    cache = ByteCache(max_bytes=10**6, max_entries=100, trim=lambda: trims.append(1))
    for key in "abcd":
        cache.get(key, lambda key=key: key, size=lambda v: 100)
    assert cache.shrink(150) == 300
    assert cache.keys() == ["d"] and cache.nbytes == 100 and trims == [1]


def test_a_large_drop_trims_and_a_small_one_does_not():
    trims = []
    big = cache_module.TRIM_BYTES
    cache = ByteCache(max_bytes=big, max_entries=100, trim=lambda: trims.append(1))
    cache.get("small", lambda: 1, size=lambda v: 10)
    cache.get("small2", lambda: 1, size=lambda v: big - 10)
    assert trims == []
    cache.get("huge", lambda: 1, size=lambda v: big)  # both others go: big bytes at once
    assert cache.keys() == ["huge"] and trims == [1]


def test_the_layer_makes_a_value_once_however_many_sessions_ask(monkeypatch):
    cache = ByteCache(max_bytes=10**6, max_entries=100)
    monkeypatch.setattr(compute, "cache", lambda: cache)
    made = []

    def make():
        made.append(threading.get_ident())
        wait_until(lambda: cache.waiting(("flow", "d")) == 5)
        return {"attention": np.ones(3)}

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda _: compute.cached(("flow", "d"), make), range(6)))
    assert len(made) == 1
    # each session gets its own dict over the one read-only array
    assert len({id(value) for value in got}) == 6
    assert all(value["attention"] is got[0]["attention"] for value in got)
    with pytest.raises(ValueError):
        got[0]["attention"][0] = 2.0
    got[0]["added"] = 1
    assert "added" not in compute.cached(("flow", "d"), make)


def test_values_are_sized_by_their_arrays():
    array = np.zeros((100, 10))
    assert compute.sizeof(array) >= array.nbytes
    assert compute.sizeof({"a": array, "b": [array, array]}) >= 3 * array.nbytes
    assert compute.sizeof(1.5) < 100


def test_a_measure_cache_keeps_its_values_in_the_one_cache(monkeypatch):
    cache = ByteCache(max_bytes=10**6, max_entries=100)
    monkeypatch.setattr(compute, "cache", lambda: cache)
    calls = []

    def measure(key):
        calls.append(key)
        return {"accuracy": float(key)}

    measures = compute.measures("test", "digest", measure)
    assert measures(1) == {"accuracy": 1.0} and measures(1) == {"accuracy": 1.0}
    assert calls == [1] and measures.known(1)
    # the same object is found again by name and digest, and its values in the one cache
    assert compute.measures("test", "digest", measure) is measures
    assert ("test", "digest", 1) in cache
    measures.warm([2, 3])
    wait_until(lambda: measures.known(2) and measures.known(3))
    assert sorted(calls) == [1, 2, 3]


def test_a_measure_cache_with_a_store_measures_each_key_once_under_threads():
    calls = []
    lock = threading.Lock()

    def measure(key):
        with lock:
            calls.append(key)
        return key * 2

    prefix = ("test-threads", object())  # keys of this test's own in the one cache
    measures = dissect.MeasureCache(measure, store=compute.Store(prefix))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(measures, [1, 2, 1, 2, 1, 2, 1, 2]))
    assert got == [2, 4] * 4 and sorted(calls) == [1, 2]


def test_release_drops_the_free_trace_buffers():
    import torch

    block = buffers.stacked_empty({"x": (1 << 19,)}, torch.float32, torch.device("cpu"))
    del block
    assert buffers.kept_bytes() > 0  # freed: kept for the next trace
    assert buffers.release() > 0 and buffers.kept_bytes() == 0


def test_malloc_trim_runs_on_glibc_and_is_skipped_elsewhere():
    import platform
    import sys

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert heap.trim_malloc() is glibc


def test_the_w_o_figure_is_built_once_for_every_session_and_drawn_the_same(fresh_app, monkeypatch):
    """Before/after W_o's map of W_o depends on the weights and the words alone: one figure
    serves every session and every keystroke (at GPT-2's size building it cost ~140 ms of each),
    a switch builds its own, and drawing it never changes it."""
    from tests.conftest import start_app
    from tfviz import plots

    built = []
    real = plots.w_o_matrix

    def counted(*args, **kwargs):
        built.append(kwargs.get("title"))
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "w_o_matrix", counted)

    def w_o_spec(at) -> str:
        (spec,) = [c.proto.spec for c in at.get("plotly_chart") if '"W_o of L0' in c.proto.spec]
        return spec

    first = start_app("Before/after W_o")
    second = start_app("Before/after W_o")
    second.text_input(key="sequence").set_value("jjiihh").run()
    assert len(built) == 1 and w_o_spec(first) == w_o_spec(second)
    second.radio(key="w_o_mode").set_value("identity").run()
    assert len(built) == 2 and w_o_spec(second) != w_o_spec(first)
    first.run()
    assert len(built) == 2 and w_o_spec(first) == w_o_spec(start_app("Before/after W_o"))
