"""The output projection W_o, written once: its modes, its per-head blocks, its per-head terms.

Every other module (the forward pass, training with W_o fixed, the trace snapshot, the analyses)
asks this one for "which map does this mode apply" and "which part of W_o reads head h", so the
algebra of seed 000 lives in a single place:

    attn_out = concat @ W_o^T + b_o = sum_h z_h @ W_O^h + b_o,

where concat = [z_0 | z_1 | ... | z_{H-1}] (heads side by side, before W_o) and W_O^h (d_k, D) is
the block of rows of W_o^T that reads head h's slice of concat. Because every W_O^h spans all D
output dimensions, every output dimension draws on every head: that is the mixing that mere
concatenation (W_o = identity) lacks.

Weights follow nn.Linear's layout (out, in); per-head blocks use the row-vector convention of the
papers (z_h @ W_O^h). Functions accept torch tensors or numpy arrays and return the same kind.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

# "learned": the trained map. "identity": W_o switched off, concat goes on unmixed and without
# bias. "zero": the attention sublayer adds nothing to the residual stream.
W_O_MODES = ("learned", "identity", "zero")

Array = Tensor | np.ndarray


def check_mode(mode: object) -> str:
    """mode itself if it names a W_o mode; ValueError saying which are allowed otherwise."""
    if not isinstance(mode, str) or mode not in W_O_MODES:
        raise ValueError(f"w_o must be one of {W_O_MODES}, got {mode!r}")
    return mode


def effective(W: Array, b: Array, mode: str) -> tuple[Array, Array]:
    """(W, b) a layer applies in a mode: the learned ones, or the identity / zeros, no bias.

    Args:
        W: (D, D) the layer's learned W_o, nn.Linear layout (out, in).
        b: (D,) its bias.
        mode: one of W_O_MODES.
    Returns:
        (W_eff (D, D), b_eff (D,)), of W's kind, dtype and device.
    """
    check_mode(mode)
    if mode == "learned":
        return W, b
    if isinstance(W, Tensor):
        eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
        return (eye if mode == "identity" else torch.zeros_like(W)), torch.zeros_like(b)
    eye = np.eye(W.shape[0], dtype=W.dtype)
    return (eye if mode == "identity" else np.zeros_like(W)), np.zeros_like(b)


def apply(concat: Tensor, W: Tensor, b: Tensor, mode: str) -> Tensor:
    """attn_out from concat (..., D) in a mode; the identity returns concat itself (exactly)."""
    if mode == "learned":
        return torch.nn.functional.linear(concat, W, b)
    if mode == "identity":
        return concat
    if mode == "zero":
        return torch.zeros_like(concat)
    check_mode(mode)
    raise AssertionError("unreachable")


def head_blocks(W_o: Array, n_heads: int) -> Array:
    """W_O^h for every head, shape (H, d_k, D): block h reads head h's slice of concat.

    W_o is (D, D) in nn.Linear layout, so column block h (inputs h*d_k..(h+1)*d_k) reads head h;
    transposed, those columns become the rows of W_O^h (row-vector convention: z_h @ W_O^h).
    """
    D_out, D_in = W_o.shape
    if D_in % n_heads:
        raise ValueError(f"W_o has {D_in} input columns, not divisible into {n_heads} heads")
    return W_o.T.reshape(n_heads, D_in // n_heads, D_out)  # (H, d_k, D)


def head_block(W_o: Array, head: int, n_heads: int) -> Array:
    """W_O^h of one head, shape (d_k, D)."""
    return head_blocks(W_o, n_heads)[head]


def head_contributions(z: Array, W_o: Array) -> Array:
    """Per-head terms z_h @ W_O^h: z (..., H, T, d_k) and W_o (D, D) -> (..., H, T, D).

    Their sum over heads, plus b_o, is attn_out exactly (up to float rounding), in every mode.
    """
    blocks = head_blocks(W_o, z.shape[-3])  # (H, d_k, D)
    einsum = torch.einsum if isinstance(z, Tensor) else np.einsum
    return einsum("...htk,hkd->...htd", z, blocks)


def head_energy(W_o: Array, n_heads: int) -> np.ndarray:
    """(D, H) float64: squared weight by which output dimension d reads head h.

    The raw material of "how much does W_o mix heads": a row with energy in one column only is
    an output dimension fed by a single head.
    """
    W = W_o.detach().cpu().numpy() if isinstance(W_o, Tensor) else np.asarray(W_o)
    blocks = head_blocks(W.astype(np.float64), n_heads)  # (H, d_k, D)
    return (blocks**2).sum(axis=1).T  # (D, H)


def fixed_weights(mode: str, D: int) -> tuple[Tensor, Tensor]:
    """The (W, b) a model trained with W_o fixed in this mode stores as its W_o (CPU float32)."""
    W, b = effective(torch.empty(D, D), torch.empty(D), mode)
    if mode == "learned":
        raise ValueError("a learned W_o is not fixed: train it instead")
    return W, b
