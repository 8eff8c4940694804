"""Interventions: every switch a forward pass can take, in one validated object.

A model loaded once serves every browser session, so nothing a student switches may touch it:
W_o's mode, ablated heads and head gates are arguments of the forward pass, gathered here. The
object is frozen and hashable (gates aside), so views can use it as a cache key, and a Trace
records the one that produced it, so an analysis reads "which heads were gated" from the trace
instead of reconstructing it.

Validation is in two steps: the types and mode names on construction, the layer and head indices
against a model's config in `resolve`, which the encoder calls once per forward pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral

import torch
from torch import Tensor

from tfviz.core import wo
from tfviz.core.config import ModelConfig

Pair = tuple[int, int]


@dataclass(frozen=True)
class Interventions:
    """W_o mode (all layers or some), heads zeroed before W_o, slices zeroed after it, gates."""

    # a W_o mode of tfviz.core.modes ("learned" | "identity" | "zero" | "block_diagonal" |
    # "rank:K") for every layer, or ((layer, mode), ...) for some layers; a {layer: mode} dict is
    # accepted and stored sorted as pairs.
    w_o: str | tuple[tuple[int, str], ...] = "learned"
    # (layer, head) pairs whose z is zeroed before W_o: the head's term leaves attn_out exactly.
    ablate_heads: tuple[Pair, ...] = ()
    # (layer, head) pairs whose slice of W_o's *output* (dims h*d_k..(h+1)*d_k) is zeroed: the
    # wrong way to remove a head, since after W_o that slice carries every head. For teaching.
    ablate_after_w_o: tuple[Pair, ...] = ()
    # ((layer, order), ...): the heads of a layer enter concat in this order (a permutation of
    # 0..H-1); a {layer: order} dict is accepted. W_o then reads each head with another's columns.
    head_order: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # With head_order: permute W_o's column blocks the same way, which undoes the shuffle exactly.
    permute_w_o: bool = False
    # ((layer, head, pattern), ...): a head's attention pattern replaced by one of PATTERNS, or
    # "copy:G" (head G's pattern in the same layer): the head still reads its own values.
    patterns: tuple[tuple[int, int, str], ...] = ()
    # Optional (L, H) multipliers on each head's z; differentiable, for importance scores. Not
    # part of equality or hashing (a tensor has no value hash).
    head_gates: Tensor | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "w_o", _normalise_w_o(self.w_o))
        for name in ("ablate_heads", "ablate_after_w_o"):
            object.__setattr__(self, name, _pairs(getattr(self, name), name))
        object.__setattr__(self, "head_order", _orders(self.head_order))
        object.__setattr__(self, "patterns", _patterns(self.patterns))
        if not isinstance(self.permute_w_o, bool):
            raise ValueError(f"permute_w_o must be True or False, got {self.permute_w_o!r}")
        if self.head_gates is not None and not isinstance(self.head_gates, Tensor):
            raise ValueError("head_gates must be a tensor of shape (layers, heads) or None")

    @property
    def is_default(self) -> bool:
        """True when the pass is the plain learned model (no switch at all)."""
        return self == NONE and self.head_gates is None

    def w_o_modes(self, n_layers: int) -> list[str]:
        """The W_o mode of each of n_layers layers."""
        if isinstance(self.w_o, str):
            return [self.w_o] * n_layers
        modes = ["learned"] * n_layers
        for layer, mode in self.w_o:
            if not 0 <= layer < n_layers:
                raise ValueError(
                    f"w_o names layer {layer}; this model has layers 0..{n_layers - 1}"
                )
            modes[layer] = mode
        return modes

    def resolve(
        self,
        cfg: ModelConfig,
        device: torch.device | str = "cpu",
        w_o: Sequence[tuple[Tensor, Tensor]] | None = None,
    ) -> Resolved:
        """Check every index against cfg and build the per-layer tensors a forward pass uses.

        w_o: each layer's learned (W_o weight, bias); with them, each layer's switches carry the
        map its mode applies (tfviz.core.wo.effective, built once per weights and mode and shared),
        which the forward pass and its trace both use."""
        modes = self.w_o_modes(cfg.n_layers)
        for mode in modes:
            wo.check_rank(mode, cfg.d_model)
        for name in ("ablate_heads", "ablate_after_w_o"):
            for layer, head in getattr(self, name):
                if not 0 <= layer < cfg.n_layers:
                    raise ValueError(f"{name}: layer {layer} out of range 0..{cfg.n_layers - 1}")
                if not 0 <= head < cfg.n_heads:
                    raise ValueError(f"{name}: head {head} out of range 0..{cfg.n_heads - 1}")
        gates = None
        if self.ablate_heads or self.head_gates is not None:
            gates = torch.ones(cfg.n_layers, cfg.n_heads, device=device)
            for layer, head in self.ablate_heads:
                gates[layer, head] = 0.0
            if self.head_gates is not None:
                if tuple(self.head_gates.shape) != (cfg.n_layers, cfg.n_heads):
                    raise ValueError(
                        f"head_gates must have shape ({cfg.n_layers}, {cfg.n_heads}), "
                        f"got {tuple(self.head_gates.shape)}"
                    )
                gates = gates * self.head_gates
        out_gates = None
        if self.ablate_after_w_o:
            out_gates = torch.ones(cfg.n_layers, cfg.d_model, device=device)
            for layer, head in self.ablate_after_w_o:
                out_gates[layer, head * cfg.d_k : (head + 1) * cfg.d_k] = 0.0
        orders: list[tuple[int, ...] | None] = [None] * cfg.n_layers
        for layer, order in self.head_order:
            if not 0 <= layer < cfg.n_layers:
                raise ValueError(f"head_order: layer {layer} out of range 0..{cfg.n_layers - 1}")
            orders[layer] = wo.check_order(order, cfg.n_heads)
        patterns: list[list[tuple[int, str]]] = [[] for _ in range(cfg.n_layers)]
        for layer, head, pattern in self.patterns:
            if not 0 <= layer < cfg.n_layers:
                raise ValueError(f"patterns: layer {layer} out of range 0..{cfg.n_layers - 1}")
            source = _copied_head(pattern)
            for h in (head,) if source is None else (head, source):
                if not 0 <= h < cfg.n_heads:
                    raise ValueError(f"patterns: head {h} out of range 0..{cfg.n_heads - 1}")
            patterns[layer].append((head, pattern))
        maps: list[tuple[Tensor, Tensor] | tuple[None, None]] = [(None, None)] * cfg.n_layers
        if w_o is not None:
            maps = [
                layer_map(W, b, modes[i], orders[i] if self.permute_w_o else None, cfg.n_heads)
                for i, (W, b) in enumerate(w_o)
            ]
        layers = [
            LayerSwitches(
                mode=modes[i],
                gate=None if gates is None else gates[i],
                out_gate=None if out_gates is None else out_gates[i],
                order=orders[i],
                permute_w_o=self.permute_w_o,
                patterns=tuple(patterns[i]),
                W_o=maps[i][0],
                b_o=maps[i][1],
            )
            for i in range(cfg.n_layers)
        ]
        return Resolved(modes, gates, out_gates, layers)

    def downstream_layers(self, n_layers: int) -> list[int]:
        """Layers whose attention weights these switches can change: those above the first
        touched layer (W_o and ablation act after a layer's own weights are computed)."""
        touched = [layer for layer, _ in self.ablate_heads + self.ablate_after_w_o]
        touched += [layer for layer, _ in self.head_order] + [p[0] for p in self.patterns]
        touched += [i for i, mode in enumerate(self.w_o_modes(n_layers)) if mode != "learned"]
        if self.head_gates is not None:
            touched.append(0)
        return list(range(min(touched) + 1, n_layers)) if touched else []

    @classmethod
    def of(cls, interventions: Interventions | None = None, **switches) -> Interventions:
        """An Interventions from an existing one or from keyword switches, not both."""
        if interventions is None:
            return cls(**switches) if switches else NONE
        if switches:
            raise ValueError(
                f"pass either interventions or switches ({', '.join(sorted(switches))}), not both"
            )
        if not isinstance(interventions, Interventions):
            raise TypeError(
                f"interventions must be Interventions, got {type(interventions).__name__}"
            )
        return interventions


@dataclass(frozen=True)
class Resolved:
    """Interventions checked against one config, as the forward pass consumes them."""

    modes: list[str]  # (L,) W_o mode per layer
    gates: Tensor | None  # (L, H) multiplier of each head's z, or None when no head is touched
    out_gates: Tensor | None  # (L, D) multiplier of attn_out, or None
    layers: list[LayerSwitches]  # what each layer's forward pass takes


@dataclass(frozen=True)
class LayerSwitches:
    """The switches of one layer, as its attention sublayer applies them."""

    mode: str  # W_o mode
    gate: Tensor | None = None  # (H,) multiplier of each head's z, or (B, H, T, 1) per token
    out_gate: Tensor | None = None  # (D,) multiplier of attn_out
    order: tuple[int, ...] | None = None  # the heads' order in concat
    permute_w_o: bool = False  # W_o's column blocks in the same order
    patterns: tuple[tuple[int, str], ...] = ()  # (head, pattern) overrides
    # The map the layer applies to concat (W_o in its mode, columns permuted if asked), nn.Linear
    # layout, and its bias; None where resolve was not given the weights.
    W_o: Tensor | None = None
    b_o: Tensor | None = None


def layer_map(
    W: Tensor, b: Tensor, mode: str, permuted: tuple[int, ...] | None, n_heads: int
) -> tuple[Tensor, Tensor]:
    """The (W, b) one layer applies: its W_o (weight W, bias b) in its mode, with W's column
    blocks in the order `permuted` first when given (Interventions.permute_w_o)."""
    if permuted is not None:
        # A permuted copy lives for this pass only: not worth remembering.
        return wo.effective(wo.permute_columns(W, permuted, n_heads), b, mode, n_heads, False)
    return wo.effective(W, b, mode, n_heads)


def _normalise_w_o(w_o) -> str | tuple[tuple[int, str], ...]:
    if isinstance(w_o, str):
        return wo.check_mode(w_o)
    if isinstance(w_o, Mapping):
        w_o = w_o.items()
    try:
        pairs = sorted(dict(w_o).items())
    except (TypeError, ValueError):
        raise ValueError(
            f"w_o must be one of {wo.W_O_MODES} or a {{layer: mode}} dict, got {w_o!r}"
        ) from None
    for layer, mode in pairs:
        if not isinstance(layer, Integral) or isinstance(layer, bool) or layer < 0:
            raise ValueError(f"w_o names layer {layer!r}; layers are numbered from 0")
        try:
            wo.check_mode(mode)
        except ValueError as e:
            raise ValueError(f"w_o mode for layer {layer}: {e}") from None
    return tuple((int(layer), mode) for layer, mode in pairs)


def _pairs(pairs, what: str) -> tuple[Pair, ...]:
    out = []
    for pair in list(pairs or ()):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"{what} takes (layer, head) pairs, got {pair!r}")
        layer, head = pair
        for name, value in (("layer", layer), ("head", head)):
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{what}: {name} must be a whole number >= 0, got {value!r}")
        out.append((int(layer), int(head)))
    return tuple(dict.fromkeys(out))  # duplicates removed, order kept


def head_name(layer: int, head: int) -> str:
    """'L1H3': how the app names a head."""
    return f"L{layer}H{head}"


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """'L0H0', 'L0H1', ... for every head, layer-major."""
    return [head_name(lay, h) for lay in range(n_layers) for h in range(n_heads)]


def parse_head_name(name: str) -> Pair:
    """(layer, head) from 'L1H3'; ValueError for anything else."""
    try:
        layer, head = name.removeprefix("L").split("H")
        return int(layer), int(head)
    except (AttributeError, ValueError):
        raise ValueError(f"a head is named like 'L0H1', got {name!r}") from None


# Attention patterns a head can be given instead of its own (each row over the real keys only).
PATTERNS = ("uniform", "identity", "previous", "anti_diagonal")
# Patterns that read a later token, which a causal model's query cannot (it is refused there).
READS_AHEAD = frozenset({"anti_diagonal"})
COPY_PREFIX = "copy:"


def _copied_head(pattern: str) -> int | None:
    return int(pattern[len(COPY_PREFIX) :]) if pattern.startswith(COPY_PREFIX) else None


def _orders(orders) -> tuple[tuple[int, tuple[int, ...]], ...]:
    if isinstance(orders, Mapping):
        orders = orders.items()
    out = {}
    for item in list(orders or ()):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError(f"head_order takes (layer, order) pairs, got {item!r}")
        layer, order = item
        if not isinstance(layer, Integral) or isinstance(layer, bool) or layer < 0:
            raise ValueError(f"head_order: layer must be a whole number >= 0, got {layer!r}")
        try:
            out[int(layer)] = tuple(int(h) for h in order)
        except (TypeError, ValueError):
            raise ValueError(f"head_order: an order lists head numbers, got {order!r}") from None
    return tuple(sorted(out.items()))


def _patterns(patterns) -> tuple[tuple[int, int, str], ...]:
    out = {}
    for item in list(patterns or ()):
        if not (isinstance(item, (tuple, list)) and len(item) == 3):
            raise ValueError(f"patterns takes (layer, head, pattern) triples, got {item!r}")
        layer, head, pattern = item
        for name, value in (("layer", layer), ("head", head)):
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
                raise ValueError(f"patterns: {name} must be a whole number >= 0, got {value!r}")
        source = pattern[len(COPY_PREFIX) :] if isinstance(pattern, str) else ""
        copy = source.isascii() and source.isdigit() and pattern.startswith(COPY_PREFIX)
        if pattern not in PATTERNS and not copy:
            raise ValueError(
                f"a pattern is one of {PATTERNS} or 'copy:G' (head G of the same layer), "
                f"got {pattern!r}"
            )
        out[(int(layer), int(head))] = pattern  # the last override of a head wins
    return tuple((layer, head, p) for (layer, head), p in sorted(out.items()))


NONE = Interventions()


def switches(
    w_o: str = "learned", layer: int | None = None, ablate: Iterable = ()
) -> Interventions:
    """The app's three controls as Interventions: a W_o mode for every layer (layer=None) or one
    layer, and heads zeroed before W_o."""
    return Interventions(w_o=w_o if layer is None else {int(layer): w_o}, ablate_heads=ablate)
