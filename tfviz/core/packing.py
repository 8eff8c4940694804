"""Packed tokens: R runs' real tokens side by side, so per-token layers skip the padding.

tfviz.training.ensemble trains R runs of one encoder as one model whose weights carry a leading run
axis. Batches are padded to their longest example, so about half of a (B, T) grid is padding; every
layer but attention treats each token alone, so tfviz.core.model runs those layers on the M slots of
real tokens only, and its attention scatters q, k, v into the padded (R*B, T) grid and gathers z
back (`to_grid`, `from_grid`). Transformer.forward takes a Packing in place of ids for that pass.

Dimensions: R runs, B batch, T tokens, M packed token slots per run, H heads, d_k head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Packing:
    """Each run's real tokens side by side in M slots, and where each slot sits in the padded grid.

    Runs hold different numbers of real tokens: the M - n_r slots past run r's n_r real ones carry
    padded positions of its grid (in order), which attention masks as keys and nothing reads as
    queries, so they change no real token and get zero gradient.
    """

    ids: Tensor  # (R, M) token id in each slot (PAD in the slots past a run's real tokens)
    slot: Tensor  # (R, M) the slot's place b*T + t in its run's (B, T) grid; distinct per run
    seq: Tensor  # (R*M,) the slot's sequence r*B + b in the attention grid
    pos: Tensor  # (R*M,) the slot's position t
    real: Tensor  # (R, M) True for real tokens
    lengths: Tensor  # (R, B) real tokens per example (BOS included)
    pad_mask: Tensor | None  # (R*B, T) the attention grid's padding, True at padding; None: none
    grid: tuple[int, int, int]  # (R, B, T)


def pack(ids: Tensor, pad_mask: Tensor) -> Packing:
    """Packing of (R, B, T) ids with pad_mask True at padding; every example needs a real token."""
    R, B, T = ids.shape
    real = ~pad_mask.reshape(R, B * T)
    lengths = real.view(R, B, T).sum(dim=2)  # (R, B)
    if not bool((lengths > 0).all()):
        raise ValueError("every example needs at least one real (unpadded) token")
    n_real = lengths.sum(dim=1, keepdim=True)  # (R, 1)
    M = int(n_real.max())
    # Each grid position's slot: real ones first, in grid order, then the padded ones; the
    # inverse of that permutation says which position each slot holds.
    rank = torch.where(real, real.cumsum(1), n_real + (~real).cumsum(1)) - 1  # (R, B*T)
    grid_index = torch.arange(B * T, device=ids.device).expand(R, B * T)
    slot = torch.empty_like(rank).scatter_(1, rank, grid_index)[:, :M]  # (R, M)
    seq = (slot // T + torch.arange(R, device=ids.device).view(R, 1) * B).reshape(-1)
    return Packing(
        ids=ids.reshape(R, B * T).gather(1, slot),
        slot=slot,
        seq=seq,
        pos=(slot % T).reshape(-1),
        real=real.gather(1, slot),
        lengths=lengths,
        pad_mask=pad_mask.reshape(R * B, T) if bool(pad_mask.any()) else None,
        grid=(R, B, T),
    )


def pack_targets(packing: Packing, target: Tensor) -> Tensor:
    """Per-token targets (R, B, T) -> (R, M) in slot order (padded positions keep theirs)."""
    R, B, T = packing.grid
    return target.reshape(R, B * T).gather(1, packing.slot)


def unpack(packing: Packing, values: Tensor, fill: float = 0.0) -> Tensor:
    """(R, M, ...) per-slot values -> (R, B, T, ...) on the padded grid, fill at padding."""
    R, B, T = packing.grid
    out = values.new_full((R, B * T, *values.shape[2:]), fill)
    index = packing.slot.view(R, -1, *[1] * (values.dim() - 2)).expand_as(values)
    real = packing.real.view(R, -1, *[1] * (values.dim() - 2))
    return out.scatter(1, index, torch.where(real, values, fill)).view(R, B, T, *values.shape[2:])


def to_grid(packing: Packing, rows: Tensor, n_heads: int) -> Tensor:
    """Slot rows (R, M, H*d_k) -> heads on the attention grid (R*B, H, T, d_k), zeros at padding."""
    R, B, T = packing.grid
    rows = rows.reshape(-1, n_heads, rows.shape[-1] // n_heads)  # (R*M, H, d_k)
    return _ToGrid.apply(rows, (packing.seq, packing.pos), R * B, T)


def from_grid(packing: Packing, z: Tensor) -> Tensor:
    """Heads on the grid z (R*B, H, T, d_k) -> each slot's heads side by side (R, M, H*d_k)."""
    R = packing.grid[0]
    return _FromGrid.apply(z, (packing.seq, packing.pos)).reshape(R, -1, z.shape[1] * z.shape[3])


class _ToGrid(torch.autograd.Function):
    """rows (R*M, H, d_k) -> zeros (R*B, H, T, d_k) with each row at its (seq, pos).

    One pass each way; autograd's own index_put would also clone the zeros.
    """

    @staticmethod
    def forward(ctx, rows: Tensor, grid: tuple[Tensor, Tensor], n_seq: int, T: int) -> Tensor:
        ctx.grid = grid
        out = rows.new_zeros(n_seq, rows.shape[1], T, rows.shape[2])
        out.transpose(1, 2).index_put_(grid, rows)  # (R*B, T, H, d_k) view
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad.transpose(1, 2)[ctx.grid], None, None, None


class _FromGrid(torch.autograd.Function):
    """z (R*B, H, T, d_k) -> the slots' rows (R*M, H, d_k): each slot reads its (seq, pos)."""

    @staticmethod
    def forward(ctx, z: Tensor, grid: tuple[Tensor, Tensor]) -> Tensor:
        ctx.grid, ctx.shape = grid, z.shape
        return z.transpose(1, 2)[grid]

    @staticmethod
    def backward(ctx, grad: Tensor):
        out = grad.new_zeros(ctx.shape)
        out.transpose(1, 2).index_put_(ctx.grid, grad)  # slots are distinct: no accumulation
        return out, None


def pool(packing: Packing, x: Tensor, how: str) -> Tensor:
    """Per-example pooling of slot values x (R, M, D) -> (R, B, D): "mean" of the real tokens,
    "first" (an example's first token is the slot after the previous examples' tokens) or "last"
    (the slot before the next example's first)."""
    R, B, _ = packing.grid
    D = x.shape[-1]
    if how == "mean":
        # Sum each example's real slots (the others into a spare row R*B), divide by its length.
        into = torch.where(packing.real.view(-1), packing.seq, R * B)
        sums = x.new_zeros(R * B + 1, D).index_add(0, into, x.reshape(-1, D))[: R * B]
        return (sums / packing.lengths.reshape(R * B, 1).to(x.dtype)).view(R, B, D)
    ends = packing.lengths.cumsum(dim=1)  # (R, B) one past each example's last slot
    at = ends - 1 if how == "last" else ends - packing.lengths
    return x.gather(1, at.unsqueeze(-1).expand(R, B, D))
