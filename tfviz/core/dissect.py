"""Taking W_o apart: one measure swept over W_o's modes, W_o's spectrum, and the head shuffle.

"W_o off" swaps the learned W_o for the identity, which removes two things at once: each head's
own linear map (the diagonal blocks) and the mixing across heads (the off-diagonal blocks). The
modes of tfviz.core.wo separate them: block-diagonal keeps the first and drops the second, rank-k
keeps W_o's k strongest directions. `sweep_modes` measures a model under each of them (any measure:
a toy task's accuracy, a sentence pair's similarity), in every layer or one, for one chart.

`permutation_check` makes the other point of seed 000 exact: shuffling the heads' order in concat
changes the output, unless W_o's column blocks are shuffled the same way, when nothing changes,
because concat @ W_o^T only pairs each head's slice with the columns that read it.

The parsers turn what a student types (a rank, a head order) into values or a ValueError whose
message can be shown as it is. Nothing here changes a model: every mode is a forward argument.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from tfviz.core import modes, wo
from tfviz.core.interventions import Interventions
from tfviz.core.trace import TraceArrays

# The whole-matrix modes compared with rank-k, from "all of W_o" to "nothing of it".
WHOLE_MODES = (modes.LEARNED, modes.BLOCK_DIAGONAL, modes.IDENTITY, modes.ZERO)
RANK_POINTS = 16  # rank-k values swept at most: enough for the curve's shape, cheap for D = 384


def rank_mode(k: int) -> str:
    """The W_o mode that keeps k singular directions: "rank:k"."""
    return f"{wo.RANK_PREFIX}{int(k)}"


def rank_grid(d_model: int, points: int = RANK_POINTS, extra: Iterable[int] = ()) -> list[int]:
    """Ranks to sweep for a D-dimensional W_o: 1..D, every one when D <= points, otherwise
    `points` spaced geometrically (the curve changes fastest at small k), always with 1 and D,
    plus any `extra` ranks in 1..D, sorted and without repeats."""
    if d_model < 1 or points < 2:
        raise ValueError(f"need d_model >= 1 and points >= 2, got {d_model} and {points}")
    if d_model <= points:
        grid = set(range(1, d_model + 1))
    else:
        grid = {int(round(k)) for k in np.geomspace(1, d_model, points)}
    grid |= {k for k in extra if 1 <= k <= d_model}
    return sorted(grid)


def parse_rank(text: object, d_model: int) -> int:
    """k from what was typed in a rank box: a whole number 1..d_model; ValueError otherwise.

    Accepts "5", " 5 " and 5.0; refuses "", "2.5", "nan", "inf", "1e400", "abc" and out-of-range
    values with a message that names the range.
    """
    what = f"k is a whole number from 1 to {d_model} (W_o has {d_model} singular directions)"
    if isinstance(text, bool):
        raise ValueError(f"{what}, got {text!r}")
    if isinstance(text, str):
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"{what}, got {text.strip()[:20]!r}") from None
    elif isinstance(text, (int, float)):
        value = float(text)
    else:
        raise ValueError(f"{what}, got {type(text).__name__}")
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{what}, got {value:g}")
    k = int(value)
    if not 1 <= k <= d_model:
        raise ValueError(f"{what}, got {k}")
    return k


def parse_order(text: object, n_heads: int) -> tuple[int, ...]:
    """A head order from text like "2,0,1,3" (commas and/or spaces); ValueError saying what is
    wrong (not numbers, a head missing or repeated, a head out of range) otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"type a head order such as {example_order(n_heads)}")
    items = [item for item in text.replace(",", " ").split() if item]
    if not items:
        raise ValueError(f"type a head order such as {example_order(n_heads)}")
    if not all(item.isascii() and item.isdigit() for item in items):
        raise ValueError(
            f"a head order lists head numbers 0..{n_heads - 1} separated by commas, "
            f"e.g. {example_order(n_heads)}; got {text.strip()[:40]!r}"
        )
    return wo.check_order([int(item) for item in items], n_heads)


def example_order(n_heads: int) -> str:
    """A valid order to show as an example: the heads reversed ("3,2,1,0")."""
    return ",".join(str(h) for h in reversed(range(n_heads)))


def shuffled_order(n_heads: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A random order of the heads that moves at least one head (when there are two or more)."""
    if n_heads < 2:
        return tuple(range(n_heads))
    while True:
        order = tuple(int(h) for h in rng.permutation(n_heads))
        if order != tuple(range(n_heads)):
            return order


# ---- one measure over every mode -------------------------------------------------------------


@dataclass(frozen=True)
class ModeSweep:
    """A measure of one model under each W_o mode, in every layer (layer None) or one layer."""

    layer: int | None
    whole: dict[str, float]  # WHOLE_MODES -> value
    ranks: list[int]  # k swept, ascending
    rank_values: list[float]  # the value with W_o of rank k, one per rank

    def at_rank(self, k: int) -> float:
        """The value at rank k (one of self.ranks)."""
        if k not in self.ranks:
            raise ValueError(f"rank {k} was not swept; swept: {self.ranks}")
        return self.rank_values[self.ranks.index(k)]


def mode_switches(mode: str, layer: int | None = None) -> Interventions:
    """A W_o mode in every layer (layer None) or in one layer, nothing else switched."""
    return Interventions(w_o=mode if layer is None else {int(layer): mode})


def sweep_switches(
    d_model: int, layer: int | None = None, ranks: Sequence[int] | None = None
) -> list[Interventions]:
    """Every switch sweep_modes measures, in its order: WHOLE_MODES, then rank k for each k of
    `ranks` (default rank_grid(D)), in every layer (layer None) or one layer."""
    ranks = rank_grid(d_model) if ranks is None else sorted(set(int(k) for k in ranks))
    for k in ranks:
        wo.check_rank(rank_mode(k), d_model)
    return [mode_switches(mode, layer) for mode in (*WHOLE_MODES, *map(rank_mode, ranks))]


def sweep_modes(
    measure: Callable[[Interventions], float],
    d_model: int,
    layer: int | None = None,
    ranks: Sequence[int] | None = None,
) -> ModeSweep:
    """measure(Interventions) for every whole-matrix mode and every rank in `ranks`.

    Args:
        measure: the number to compare, e.g. a task's accuracy on fixed examples or the cosine
            similarity of two sentences, under the given switches. Called once per mode.
        d_model: D, the largest rank.
        layer: switch W_o in this layer only; None: in every layer.
        ranks: the k to sweep (default rank_grid(D)); each must be in 1..D.
    """
    ranks = rank_grid(d_model) if ranks is None else sorted(set(int(k) for k in ranks))
    values = [float(measure(iv)) for iv in sweep_switches(d_model, layer, ranks)]
    whole = dict(zip(WHOLE_MODES, values, strict=False))
    rank_values = values[len(WHOLE_MODES) :]
    return ModeSweep(layer=layer, whole=whole, ranks=list(ranks), rank_values=rank_values)


class Store(Protocol):
    """Where a MeasureCache may keep its values instead (the app's one byte-bounded cache,
    tfviz.ui.compute): make() is called once per key however many threads ask at once."""

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any: ...

    def __contains__(self, key: Hashable) -> bool: ...


class MeasureCache:
    """A measure of one model under switches, remembered for every session of the server, and
    filled ahead of need in one background thread.

    The mode sweep of one layer scope measures the model ~20 times (long enough to notice on a
    toy model); warm() measures the other scopes while the student reads the first, so a
    switch of scope is a lookup. Thread-safe: a value being measured (in the background or for
    another session) is waited for, not measured twice. measure(key) must be a pure function of
    key (the shared model is read, never changed), and key hashable.
    """

    def __init__(
        self, measure: Callable[[Hashable], Any], max_entries: int = 512, store: Store | None = None
    ):
        self._measure = measure
        self.max_entries = max_entries
        self.store = store  # where the values are kept, if not here (max_entries unused then)
        self._values: dict[Hashable, Any] = {}
        self._busy: dict[Hashable, threading.Event] = {}  # key -> set when its value is in
        self._pending: list[Hashable] = []  # what warm() still has to measure, in order
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, key: Hashable) -> Any:
        """The value for key: remembered, awaited if being measured, or measured now."""
        if self.store is not None:  # the store waits for a value being measured, too
            return self.store.get(key, lambda: self._measure(key))
        while True:
            with self._lock:
                if key in self._values:
                    return self._values[key]
                busy = self._busy.get(key)
                if busy is None:
                    busy = self._busy[key] = threading.Event()
                    break
            busy.wait()  # measured elsewhere; if that failed, the loop measures it here
        try:
            value = self._measure(key)
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.max_entries:  # the oldest go first
                    self._values.pop(next(iter(self._values)))
            return value
        finally:
            with self._lock:
                self._busy.pop(key, None)
            busy.set()

    def known(self, key: Hashable) -> bool:
        if self.store is not None:
            return key in self.store
        with self._lock:
            return key in self._values

    def warm(self, keys: Iterable[Hashable]) -> None:
        """Measure, in one background thread, each key not known yet (those already waiting
        keep their place; later calls add to the same thread's list)."""
        with self._lock:
            waiting = set(self._pending)
            for key in keys:
                if not self._known(key) and key not in waiting:
                    self._pending.append(key)
                    waiting.add(key)
            if not self._pending or self._worker is not None:
                return
            self._worker = threading.Thread(target=self._fill, name="tfviz-warm", daemon=True)
            self._worker.start()

    def _known(self, key: Hashable) -> bool:  # under the lock
        return key in self._values if self.store is None else key in self.store

    def _fill(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._worker = None
                    return
                key = self._pending.pop(0)
            try:
                self(key)
            except Exception:  # noqa: BLE001 - asked for in the page, it raises there with its message
                continue


def singular_values(model) -> np.ndarray:
    """(L, D) float64: each layer's learned W_o's singular values, largest first.

    By Eckart-Young, rank-k W_o is off from the learned one by exactly the dropped values:
    ||W - W_k||_2 = sigma_{k+1}, ||W - W_k||_F = sqrt(sum of the squares of the rest).
    """
    with torch.no_grad():
        mats = [layer.attn.W_o.weight.detach().to("cpu", torch.float64) for layer in model.layers]
        return torch.linalg.svdvals(torch.stack(mats)).numpy()


# ---- the head shuffle ------------------------------------------------------------------------


def permuted(layer: int, order: Sequence[int], with_w_o: bool) -> Interventions:
    """The heads of one layer enter concat in `order`; with_w_o: W_o's column blocks follow."""
    return Interventions(head_order={int(layer): tuple(order)}, permute_w_o=with_w_o)


@dataclass(frozen=True)
class PermutationCheck:
    """How far two shuffled passes are from the plain one (max absolute differences)."""

    layer: int
    order: tuple[int, ...]
    shuffled_attn_out: float  # concat shuffled, W_o as learned: attn_out of the layer moves
    matched_attn_out: float  # W_o's columns shuffled alike: float rounding only (~1e-7)
    shuffled_output: float  # the same for the last layer's output (what the model answers from)
    matched_output: float

    @property
    def identical(self) -> bool:
        """True when the matched shuffle left the output equal to float32 rounding."""
        return max(self.matched_attn_out, self.matched_output) <= 1e-5


def permutation_check(
    base: TraceArrays, shuffled: TraceArrays, matched: TraceArrays
) -> PermutationCheck:
    """Compare a plain pass with the two shuffles of permuted() (same sequence, one layer)."""
    orders = dict(shuffled.interventions.head_order)
    if len(orders) != 1 or dict(matched.interventions.head_order) != orders:
        raise ValueError("both shuffled passes must reorder the same one layer in the same way")
    if shuffled.interventions.permute_w_o or not matched.interventions.permute_w_o:
        raise ValueError("the first shuffled pass keeps W_o, the second permutes its columns")
    if not (base.text == shuffled.text == matched.text):
        raise ValueError("the three passes must read the same sequence")
    ((layer, order),) = orders.items()

    def gap(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max(initial=0.0))

    return PermutationCheck(
        layer=layer,
        order=tuple(order),
        shuffled_attn_out=gap(shuffled.attn_out[layer], base.attn_out[layer]),
        matched_attn_out=gap(matched.attn_out[layer], base.attn_out[layer]),
        shuffled_output=gap(shuffled.resid_out[-1], base.resid_out[-1]),
        matched_output=gap(matched.resid_out[-1], base.resid_out[-1]),
    )
