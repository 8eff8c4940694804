"""A cache bounded by bytes and by entries, shared by threads: the server's traces (tfviz.ui.view).

One trace of a toy model is ~50 KB; one of a 30-layer decoder at 200 word-pieces ~100 MB, at
1,024 pieces over a GB. A cache bounded by its number of entries alone (st.cache_resource's
max_entries) is sized for one of these and wrong for the others: the server's 16 + 4 entries
for sentence models' traces could hold many GB of a decoder's. This one drops its least recently
used values once their bytes pass a budget.

- The newest value is always kept, even alone over the budget: a view reruns on every click, and
  a text too long for the budget is then traced once, not once per click.
- A value is made once per key however many threads ask at once (a class opening the same page):
  the others wait for it, and get its error if making it failed. A maker stopped by something
  other than an error (Streamlit stops or reruns a script by raising a ScriptControlException, a
  BaseException, in its thread) passes no error on: a waiter then makes the value itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class _Pending:
    """A value being made by one thread, waited for by the others."""

    def __init__(self):
        self.done = threading.Event()
        self.made = False
        self.value = None
        self.error: Exception | None = None
        self.waiters = 0  # callers waiting for this value


class ByteCache(Generic[V]):
    """Values by key, least recently used dropped first beyond max_bytes or max_entries."""

    def __init__(self, max_bytes: int, max_entries: int):
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V], size: Callable[[V], int]) -> V:
        """The value for key: the kept one, or make()'s (kept, size(value) bytes of it)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
            pending = self._pending.get(key)
            mine = pending is None
            if mine:
                pending = self._pending[key] = _Pending()
            else:
                pending.waiters += 1
        if not mine:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            if pending.made:
                return pending.value
            return self.get(key, make, size)  # its maker was stopped: made here
        try:
            value = make()
        except Exception as e:
            pending.error = e
            raise
        else:
            pending.value, pending.made = value, True
            self._keep(key, value, size(value))
            return value
        finally:
            with self._lock:
                del self._pending[key]
            pending.done.set()

    def _keep(self, key: Hashable, value: V, nbytes: int) -> None:
        with self._lock:
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while len(self._items) > 1 and (
                self._bytes > self.max_bytes or len(self._items) > self.max_entries
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    @property
    def nbytes(self) -> int:
        """The bytes of the values kept."""
        with self._lock:
            return self._bytes

    def keys(self) -> list[Hashable]:
        """The keys kept, least recently used first (reading them uses none)."""
        with self._lock:
            return list(self._items)

    def values(self) -> list[V]:
        """The values kept, least recently used first (reading them uses none)."""
        with self._lock:
            return [value for value, _ in self._items.values()]

    def waiting(self, key: Hashable) -> int:
        """How many callers wait right now for key's value while another makes it (0 if none
        is being made)."""
        with self._lock:
            pending = self._pending.get(key)
            return 0 if pending is None else pending.waiters

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
