"""tfviz.serve.cache.ByteCache, the server's one compute cache: bounded by bytes and entries,
the newest kept, a value made once however many threads ask; and the app keeps its traces
there (tfviz.ui.compute)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import start_app, wait_until
from tfviz.serve.cache import ByteCache


def kept(cache: ByteCache) -> list:
    return cache.keys()


def test_the_least_recently_used_go_first_once_the_bytes_pass_the_budget():
    cache = ByteCache(max_bytes=100, max_entries=10)
    for key in "abc":
        cache.get(key, lambda key=key: key * 2, size=lambda v: 40)
    assert kept(cache) == ["b", "c"] and cache.nbytes == 80  # a, the oldest, went at 120 bytes
    assert cache.get("b", lambda: pytest.fail("b is kept: not made again"), size=len) == "bb"
    cache.get("d", lambda: "dd", size=lambda v: 40)
    assert kept(cache) == ["b", "d"]  # b was read after c: c went


def test_the_entries_are_bounded_too():
    cache = ByteCache(max_bytes=10**9, max_entries=3)
    for n in range(5):
        cache.get(n, lambda n=n: n, size=lambda v: 1)
    assert kept(cache) == [2, 3, 4] and cache.nbytes == 3 and len(cache) == 3


def test_the_newest_is_kept_even_alone_over_the_budget():
    cache = ByteCache(max_bytes=100, max_entries=10)
    cache.get("small", lambda: 1, size=lambda v: 10)
    made = []
    for _ in range(3):  # asked again and again (a view's reruns): made once
        cache.get("huge", lambda: made.append(1) or "v", size=lambda v: 1000)
    assert kept(cache) == ["huge"] and made == [1] and cache.nbytes == 1000


def test_many_threads_asking_for_one_key_at_once_make_it_once():
    cache = ByteCache(max_bytes=10**6, max_entries=10)
    calls = []

    def make():
        calls.append(threading.get_ident())
        wait_until(lambda: cache.waiting("k") == 7)  # every other thread asks while it is made
        return object()

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: cache.get("k", make, size=lambda v: 1), range(8)))
    assert len(calls) == 1
    assert all(v is got[0] for v in got)


def asked_while_failing(cache: ByteCache, exception: BaseException, waiters: int, made: str):
    """One thread's maker raises exception once `waiters` threads wait for the same key (their own
    maker returns made). The first's future and the waiters'."""
    started = threading.Event()

    def fail():
        started.set()
        wait_until(lambda: cache.waiting("k") == waiters)
        raise exception

    with ThreadPoolExecutor(waiters + 1) as pool:
        first = pool.submit(cache.get, "k", fail, len)
        started.wait()
        others = [pool.submit(cache.get, "k", lambda: made, len) for _ in range(waiters)]
    return first, others


def test_a_failure_reaches_every_waiter_and_is_not_kept():
    cache = ByteCache(max_bytes=10**6, max_entries=10)
    first, waiters = asked_while_failing(cache, ValueError("not allowed"), 3, "made")
    for future in [first, *waiters]:
        with pytest.raises(ValueError, match="not allowed"):
            future.result()
    assert len(cache) == 0
    assert cache.get("k", lambda: "made", size=len) == "made"  # asked again: made anew


class Stopped(BaseException):
    """What Streamlit raises in a script's thread to stop its run: not an error of the value."""


def test_a_maker_stopped_without_an_error_leaves_the_value_to_a_waiter():
    cache = ByteCache(max_bytes=10**6, max_entries=10)
    first, (waiter,) = asked_while_failing(cache, Stopped(), 1, "made by the waiter")
    with pytest.raises(Stopped):
        first.result()
    assert waiter.result() == "made by the waiter"
    assert kept(cache) == ["k"]


@pytest.mark.usefixtures("fresh_app")
def test_the_app_keeps_every_sessions_traces_in_the_one_cache():
    from tfviz.core.trace import TraceArrays
    from tfviz.ui import compute

    at = start_app()
    cache = compute.cache()
    traces = [value for value in cache.values() if isinstance(value, TraceArrays)]
    assert len(traces) >= 1
    assert cache.nbytes == sum(compute.sizeof(v) for v in cache.values()) <= compute.CACHE_BYTES
    assert all(not trace.attn.flags.writeable for trace in traces)  # shared: read-only
    # another session's identical page reads the same trace object, not a new one
    other = start_app()
    assert len(compute.cache()) == len(cache) and not other.exception and not at.exception
