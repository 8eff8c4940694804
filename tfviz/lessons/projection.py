"""Lesson 2, one big projection then view/transpose equals H per-head projections (seed 004),
measured on a live model: the largest difference between the two ways, for q, k and v."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfviz.core.model import Transformer
from tfviz.lessons.concat import check_layer


@dataclass(frozen=True)
class ProjectionCheck:
    """Seed 004's equivalence measured: big projection + view/transpose vs per-head ones."""

    max_diff: dict[str, float]  # role ("q", "k", "v") -> max |big - separate| over everything
    shape: tuple[int, ...]  # (B, H, T, d_k) of both results
    big_first: np.ndarray  # (d_k,) head 0, first token, from the big projection's W_q
    separate_first: np.ndarray  # (d_k,) the same from head 0's own (d_k, D) projection

    @property
    def exact(self) -> bool:
        """True when both ways agree to the last bit for q, k and v: no rounding showed at all
        (the same products summed in the same order), which a lesson must not call rounding."""
        return all(diff == 0.0 for diff in self.max_diff.values())


@torch.no_grad()
def projection_equivalence(
    model: Transformer, layer: int, ids: Tensor, pad_mask: Tensor | None = None
) -> ProjectionCheck:
    """Compute q, k, v of one layer both ways on live input and measure the difference.

    Big: W(x) with the layer's D x D projection, then .view(B, T, H, d_k).transpose(1, 2), as the
    model does. Separate: for each head h, its own projection with rows h*d_k..(h+1)*d_k of W and
    of the bias, (d_k, D), applied to the same x. x is what the layer's attention reads (its
    input, after the pre-norm LayerNorm for a pre-norm model).

    Args:
        model: a Transformer (not changed).
        layer: 0..L-1.
        ids: (B, T) token ids; pad_mask: (B, T) True at padding, or None.
    Returns:
        ProjectionCheck; the differences are float rounding only (about 1e-7 or exactly 0).
    """
    check_layer(model, layer)
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        raise ValueError("ids must be a 2-d tensor of token ids, shape (batch, tokens)")
    block = model.layers[layer]
    x = model(ids, pad_mask).trace.layers[layer].resid_pre  # (B, T, D)
    if block.pre_norm:
        x = block.norm1(x)
    attn = block.attn
    B, T, D = x.shape
    H, d_k = attn.n_heads, attn.d_k
    diffs, first = {}, None
    for role, lin in (("q", attn.W_q), ("k", attn.W_k), ("v", attn.W_v)):
        big = lin(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        heads = [
            F.linear(x, lin.weight[h * d_k : (h + 1) * d_k], lin.bias[h * d_k : (h + 1) * d_k])
            for h in range(H)
        ]  # H x (B, T, d_k)
        separate = torch.stack(heads, dim=1)  # (B, H, T, d_k)
        diffs[role] = float((big - separate).abs().max())
        if first is None:
            first = (big[0, 0, 0].double().cpu().numpy(), separate[0, 0, 0].double().cpu().numpy())
    return ProjectionCheck(
        max_diff=diffs, shape=(B, H, T, d_k), big_first=first[0], separate_first=first[1]
    )
