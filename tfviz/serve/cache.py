"""A cache bounded by bytes and by entries, shared by threads: the server's one compute cache
(tfviz.ui.compute), traces and every other value a view asks for under one byte budget.

One trace of a toy model is ~50 KB; one of a 30-layer decoder at 200 word-pieces ~100 MB, at
1,024 pieces over a GB. A cache bounded by its number of entries alone (Streamlit's caches'
max_entries) is sized for one of these and wrong for the others: the server's 16 + 4 entries
for sentence models' traces could hold many GB of a decoder's. This one drops its least recently
used values once their bytes pass a budget.

- The newest value is always kept, even alone over the budget: a view reruns on every click, and
  a text too long for the budget is then traced once, not once per click.
- A value is made once per key however many threads ask at once (a class opening the same page):
  the others wait for it, and get its error if making it failed. A maker stopped by something
  other than an error (Streamlit stops or reruns a script by raising a ScriptControlException, a
  BaseException, in its thread) passes no error on: a waiter then makes the value itself.
- After dropping at least TRIM_BYTES at once (or on shrink), trim() is called: memory freed in
  large amounts stays in malloc's free lists, counted in the process's size, unless handed back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

TRIM_BYTES = 64 << 20  # dropped at once: worth a trim (a trim walks malloc's free memory)


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

    def __init__(self, max_bytes: int, max_entries: int, trim: Callable[[], object] | None = None):
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.trim = trim  # called after a large drop, outside the lock
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
            dropped = self._drop(self.max_bytes, self.max_entries)
        self._dropped(dropped, TRIM_BYTES)

    def _drop(self, max_bytes: int, max_entries: int) -> list[tuple[V, int]]:
        """Drops the least recently used values (under the lock) until within these bounds, the
        newest always kept; returns them, to be released outside the lock."""
        dropped = []
        while len(self._items) > 1 and (self._bytes > max_bytes or len(self._items) > max_entries):
            _, item = self._items.popitem(last=False)
            self._bytes -= item[1]
            dropped.append(item)
        return dropped

    def _dropped(self, dropped: list[tuple[V, int]], trim_from: int) -> None:
        nbytes = sum(n for _, n in dropped)
        dropped.clear()  # the values' last references here: freed now, before the trim
        if self.trim is not None and nbytes >= trim_from and nbytes:
            self.trim()

    def shrink(self, max_bytes: int) -> int:
        """Drops the least recently used values until at most max_bytes are kept (the newest
        stays), then trims; returns the bytes dropped."""
        with self._lock:
            dropped = self._drop(max_bytes, self.max_entries)
        nbytes = sum(n for _, n in dropped)
        self._dropped(dropped, 1)
        return nbytes

    def clear(self) -> None:
        """Drops every value kept (those being made are kept when done)."""
        with self._lock:
            dropped = list(self._items.values())
            self._items.clear()
            self._bytes = 0
        self._dropped(dropped, 1)

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

    def __contains__(self, key: Hashable) -> bool:
        """Whether key's value is kept (asking uses none)."""
        with self._lock:
            return key in self._items

    def waiting(self, key: Hashable) -> int:
        """How many callers wait right now for key's value while another makes it (0 if none
        is being made)."""
        with self._lock:
            pending = self._pending.get(key)
            return 0 if pending is None else pending.waiters

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
