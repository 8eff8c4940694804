"""tfviz.core.buffers: a trace's memory is reused only once nothing can read it any more."""

from __future__ import annotations

import gc
import itertools
import mmap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from tfviz import get_task
from tfviz.core import buffers
from tfviz.core.model import Encoder
from tfviz.core.trace import run_trace

TEXTS = ("abcdefg", "gfedcba", "aaaaaaa", "abcabca", "ggggggg", "bcdefga")
SITES = ("attn", "z", "concat", "attn_out", "resid_mid", "resid_out")


@pytest.fixture
def pool(monkeypatch):
    """An empty free list of its own, and every stack (a toy trace's too) from a map."""
    monkeypatch.setattr(buffers, "_free", [])
    monkeypatch.setattr(buffers, "MIN_BYTES", 0)
    gc.collect()
    return buffers


@pytest.fixture(scope="module")
def task():
    return get_task("reverse")


@pytest.fixture(scope="module")
def model(task) -> Encoder:
    torch.manual_seed(0)
    cfg = task.model_config(d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0)
    return Encoder(cfg).eval().requires_grad_(False)


def arrays(trace) -> dict[str, np.ndarray]:
    return {name: getattr(trace, name) for name in SITES}


def test_a_size_class_holds_the_bytes_in_whole_pages_with_at_most_an_eighth_more():
    for n in [1, 4095, 4096, 4097, 10**6, 2**20, 2**20 + 1, 152 << 20, 3 * 10**8 + 7]:
        c = buffers.size_class(n)
        whole_pages = -(-n // mmap.PAGESIZE) * mmap.PAGESIZE
        assert n <= c <= max(whole_pages, n * 9 / 8), n
        assert c % mmap.PAGESIZE == 0
    # a text one token longer: (L, H, T, T) grows by ~2 / T, mostly into the same class
    same = [buffers.size_class(t * t) == buffers.size_class((t + 1) ** 2) for t in range(200, 300)]
    assert sum(same) > 70


def test_the_sites_of_a_stack_are_aligned_apart_and_of_their_shapes(pool):
    shapes = {"a": (3, 5, 7), "b": (11,), "c": (2, 13)}
    for nbytes in (0, 1 << 30):  # from a map, and from torch's allocator
        pool.MIN_BYTES = nbytes
        sites = pool.stacked_empty(shapes, torch.float32, torch.device("cpu"))
        spans = []
        for name, shape in shapes.items():
            t = sites[name]
            assert t.shape == shape and t.is_contiguous() and t.dtype == torch.float32
            assert t.data_ptr() % buffers.ALIGN == 0
            spans.append((t.data_ptr(), t.data_ptr() + t.nbytes))
        spans.sort()
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
        for i, t in enumerate(sites.values()):  # each written whole, none spilling into another
            t.fill_(i)
        assert all((t == i).all() for i, t in enumerate(sites.values()))


def test_a_trace_nobody_holds_gives_its_memory_to_the_next_one(pool, model, task):
    first = run_trace(model, task, TEXTS[0])
    where = first.attn.ctypes.data
    assert pool.kept_bytes() == 0
    del first
    gc.collect()
    assert pool.kept_bytes() > 0  # its map, back on the free list
    second = run_trace(model, task, TEXTS[1])
    assert second.attn.ctypes.data == where
    assert pool.kept_bytes() == 0
    # and the reused memory holds exactly what fresh memory would
    pool.MIN_BYTES = 1 << 60
    fresh = run_trace(model, task, TEXTS[1])
    for name, values in arrays(fresh).items():
        np.testing.assert_array_equal(getattr(second, name), values, err_msg=name)


def test_a_held_trace_is_never_written_over(pool, model, task):
    """A trace kept (a cache entry, a session's view, one array of it, a torch view of that)
    keeps its map: traces made while it lives take other memory and leave it as it was."""
    held = run_trace(model, task, TEXTS[0])
    copies = {name: a.copy() for name, a in arrays(held).items()}
    one_array = run_trace(model, task, TEXTS[1]).attn_out  # the rest of that trace dropped
    one_copy = one_array.copy()
    a_view = torch.from_numpy(run_trace(model, task, TEXTS[2]).resid_out.copy())
    others = []
    for text in TEXTS * 2:  # some kept, some dropped at once: maps taken and given back
        trace = run_trace(model, task, text)
        if len(others) < 3:
            others.append(trace)
        gc.collect()
    for name, values in copies.items():
        np.testing.assert_array_equal(getattr(held, name), values, err_msg=name)
    np.testing.assert_array_equal(one_array, one_copy)
    assert a_view.shape == one_array.shape
    for other in others:
        for name in SITES:
            assert not np.shares_memory(getattr(other, name), getattr(held, name)), name
            assert not np.shares_memory(getattr(other, name), one_array), name


def test_traces_made_in_threads_at_once_equal_the_ones_made_one_by_one(pool, model, task):
    """The server's sessions trace in threads: no two passes at once are given one map."""
    serial = {text: {k: v.copy() for k, v in arrays(run_trace(model, task, text)).items()}
              for text in TEXTS}  # fmt: skip
    results = []

    def work(offset: int) -> None:
        for i in range(12):
            text = TEXTS[(offset + i) % len(TEXTS)]
            trace = run_trace(model, task, text)
            if i % 3:  # some kept to the end, some dropped: maps go back while others run
                results.append((text, trace))

    with ThreadPoolExecutor(6) as threads:
        list(threads.map(work, range(6)))  # (list: a thread's exception is raised here)
    assert len(results) == 6 * 8
    for text, trace in results:
        for name, values in serial[text].items():
            np.testing.assert_array_equal(getattr(trace, name), values, err_msg=name)


def test_the_free_list_keeps_the_most_recent_maps_up_to_free_bytes(pool, monkeypatch):
    monkeypatch.setattr(pool, "FREE_BYTES", 4 * 2**20)  # put back after: later tests read it
    shapes = [{"s": (n,)} for n in (2**18, 2**18 + 2**16, 2**18 + 2**17, 2**18 + 3 * 2**16)]
    made = [pool.stacked_empty(s, torch.float32, torch.device("cpu")) for s in shapes]
    classes = [buffers.size_class(4 * s["s"][0]) for s in shapes]
    assert len(set(classes)) == 4 and sum(classes) > pool.FREE_BYTES
    for sites in made:
        sites.clear()  # freed in order: the last freed is the most recent
        gc.collect()
        assert pool.kept_bytes() <= pool.FREE_BYTES
    kept = pool.kept_sizes()
    assert kept == classes[-len(kept) :] and len(kept) >= 2


def test_a_small_stack_comes_from_torchs_allocator(monkeypatch):
    monkeypatch.setattr(buffers, "_free", [])
    sites = buffers.stacked_empty({"s": (16,)}, torch.float32, torch.device("cpu"))
    del sites
    gc.collect()
    assert buffers.kept_bytes() == 0
