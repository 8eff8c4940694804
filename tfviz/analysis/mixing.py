"""6. How W_o mixes heads: the share of each output dimension's weight that reads each head, and
one mixing number per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from tfviz.analysis.base import _w_o_of, normalise_rows
from tfviz.core import wo
from tfviz.core.model import Transformer, layer_modes


def head_shares(W_o: Tensor | np.ndarray, n_heads: int) -> np.ndarray:
    """share[d, h] = ||W_o[d, head h's columns]||^2 / ||W_o[d, :]||^2, shape (D, H) float32.

    W_o in nn.Linear layout (out, in): row d is output dimension d, and columns h*d_k..(h+1)*d_k
    read head h. A zero row (nothing reaches that output) gets shares of 0.
    """
    return normalise_rows(wo.head_energy(W_o, n_heads))  # (D, H)


def mixing_index(shares: np.ndarray) -> float:
    """Mean over output dims of entropy(shares[d]) / log H: 0 = no mixing, 1 = uniform.

    Zero rows are left out; a W_o with no non-zero row, or a single head, mixes nothing (0).
    """
    shares = np.asarray(shares, dtype=np.float64)
    H = shares.shape[-1]
    rows = shares[shares.sum(-1) > 0]
    if H < 2 or len(rows) == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(rows > 0, -rows * np.log(rows), 0.0)
    return float(terms.sum(-1).mean() / math.log(H))


@dataclass(frozen=True)
class WoMixing:
    """How each layer's W_o combines heads."""

    shares: np.ndarray  # (L, D, H): share of output dim d that reads head h
    mixing: np.ndarray  # (L,) mixing_index per layer, 0..1
    head_weight: np.ndarray  # (L, H): share of all of W_o's squared weight that reads head h


def w_o_mixing(model: Transformer, w_o="learned") -> WoMixing:
    """Head shares and the mixing number of every layer's W_o (for the w_o switch given).

    Returns:
        WoMixing with shares (L, D, H), mixing (L,), head_weight (L, H), all float32.
    """
    cfg = model.config
    modes = layer_modes(w_o, cfg.n_layers)
    shares, mixing, weight = [], [], []
    for layer in range(cfg.n_layers):
        energy = wo.head_energy(_w_o_of(model, layer, modes[layer]), cfg.n_heads)  # (D, H)
        shares.append(normalise_rows(energy))
        mixing.append(mixing_index(shares[-1]))
        energy = energy.sum(axis=0)  # (H,)
        weight.append(energy / energy.sum() if energy.sum() > 0 else np.zeros(cfg.n_heads))
    return WoMixing(
        shares=np.stack(shares).astype(np.float32),
        mixing=np.array(mixing, dtype=np.float32),
        head_weight=np.stack(weight).astype(np.float32),
    )
