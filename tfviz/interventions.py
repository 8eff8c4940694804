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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Integral

import torch
from torch import Tensor

from tfviz import wo
from tfviz.config import ModelConfig

Pair = tuple[int, int]


@dataclass(frozen=True)
class Interventions:
    """W_o mode (all layers or some), heads zeroed before W_o, slices zeroed after it, gates."""

    # "learned" | "identity" | "zero" for every layer, or ((layer, mode), ...) for some layers;
    # a {layer: mode} dict is accepted and stored sorted as pairs.
    w_o: str | tuple[tuple[int, str], ...] = "learned"
    # (layer, head) pairs whose z is zeroed before W_o: the head's term leaves attn_out exactly.
    ablate_heads: tuple[Pair, ...] = ()
    # (layer, head) pairs whose slice of W_o's *output* (dims h*d_k..(h+1)*d_k) is zeroed: the
    # wrong way to remove a head, since after W_o that slice carries every head. For teaching.
    ablate_after_w_o: tuple[Pair, ...] = ()
    # Optional (L, H) multipliers on each head's z; differentiable, for importance scores. Not
    # part of equality or hashing (a tensor has no value hash).
    head_gates: Tensor | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "w_o", _normalise_w_o(self.w_o))
        for name in ("ablate_heads", "ablate_after_w_o"):
            object.__setattr__(self, name, _pairs(getattr(self, name), name))
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

    def resolve(self, cfg: ModelConfig, device: torch.device | str = "cpu") -> Resolved:
        """Check every index against cfg and build the per-layer tensors a forward pass uses."""
        modes = self.w_o_modes(cfg.n_layers)
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
        return Resolved(modes, gates, out_gates)

    def downstream_layers(self, n_layers: int) -> list[int]:
        """Layers whose attention weights these switches can change: those above the first
        touched layer (W_o and ablation act after a layer's own weights are computed)."""
        touched = [layer for layer, _ in self.ablate_heads + self.ablate_after_w_o]
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
        except ValueError:
            raise ValueError(
                f"w_o mode for layer {layer} must be one of {wo.W_O_MODES}, got {mode!r}"
            ) from None
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


NONE = Interventions()


def switches(
    w_o: str = "learned", layer: int | None = None, ablate: Iterable = ()
) -> Interventions:
    """The app's three controls as Interventions: a W_o mode for every layer (layer=None) or one
    layer, and heads zeroed before W_o."""
    return Interventions(w_o=w_o if layer is None else {int(layer): w_o}, ablate_heads=ablate)


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
