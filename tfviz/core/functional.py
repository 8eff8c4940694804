"""The stateless pieces of the encoder's forward pass (tfviz.core.model): its maps (linear,
layer_norm, embedding, each also with a leading run axis for the batched training), norms and
activations, the causal mask, rotary positions, and the attention patterns an intervention puts in
a head's place. Functions of their inputs only: no module state, no switches.

Dimensions as in tfviz.core.model: B batch, T tokens, H heads, D = d_model, d_k = D / H.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import COPY_PREFIX, READS_AHEAD


def activation_function(name: str):
    """The function a config's activation names (tfviz.core.config.ACTIVATIONS)."""
    if name == "gelu":
        return F.gelu  # F.gelu's default is the exact erf form, which BERT uses
    if name == "gelu_tanh":
        # The tanh approximation (transformers' "gelu_new"); within 1e-6 of its Python formula.
        return functools.partial(F.gelu, approximate="tanh")
    if name == "silu":
        return F.silu  # SwiGLU's gate (Llama, Qwen2)
    return F.relu


def make_norm(config: ModelConfig) -> nn.Module:
    """The config's norm over d_model: LayerNorm, or RMSNorm (Llama-style)."""
    if config.norm_type == "rms":
        return nn.RMSNorm(config.d_model, eps=config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


@functools.lru_cache(maxsize=16)
def causal_bias(T: int, dtype: torch.dtype, device) -> Tensor:
    """(T, T) 0 where query i may read key j (j <= i), -inf above the diagonal. Made once per
    size and shared by every layer and pass: read only."""
    return torch.full((T, T), float("-inf"), dtype=dtype, device=device).triu(1)


def rotary_angles(
    positions: Tensor, d_k: int, theta: float, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """cos and the signed sin (B, 1, T, d_k) of the rotary angles at positions (B, T): what
    rotate turns q and k by.

    Dimension pair (i, i + d_k/2) turns by position * theta^(-2i/d_k), the split-halves layout
    of Llama-family checkpoints (transformers' rotate_half). The sin is negated on the first
    half, where the pair's second member enters with a minus (rotate).
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k))
    angles = positions.float()[..., None] * inv_freq.to(positions.device)  # (B, T, d_k/2)
    cos, sin = angles.cos(), angles.sin()
    cos = torch.cat((cos, cos), dim=-1)[:, None]  # (B, 1, T, d_k)
    signed_sin = torch.cat((-sin, sin), dim=-1)[:, None]
    return cos.to(dtype), signed_sin.to(dtype)


def rotate(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """x (B, H, T, d_k) turned by the rotary angles (rotary_angles): each pair of dimensions
    (i, i + d_k/2) rotated, x_i cos - x_{i+half} sin and x_{i+half} cos + x_i sin.

    The halves swapped by one roll and the sign carried by signed_sin: three operations where
    negating a half and joining the halves took five, on q and k of every layer.
    """
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, -1), signed_sin)


def heads_apart(concat: Tensor, n_heads: int) -> Tensor:
    """z read back from concat, a view: (..., T, D) -> (..., H, T, d_k), head h's block of
    dimensions h*d_k.. (concat is z.transpose(-3, -2) flattened: the heads side by side)."""
    return concat.unflatten(-1, (n_heads, -1)).transpose(-3, -2)


def linear(x: Tensor, lin: nn.Linear | Tensor, bias: Tensor | None = None) -> Tensor:
    """nn.Linear's map, of a module or of (weight, bias); with stacked weights (R, out, in) and
    bias (R, out), run r's own map on x[r] (R, M, in)."""
    W, b = (lin.weight, lin.bias) if isinstance(lin, nn.Module) else (lin, bias)
    if W.dim() == 2:
        return F.linear(x, W, b)
    return torch.baddbmm(b.unsqueeze(1), x, W.transpose(1, 2))


def layer_norm(x: Tensor, norm: nn.Module) -> Tensor:
    """nn.LayerNorm's map (nn.RMSNorm's, nn.Identity passes x); stacked weights (R, D): run r's
    own on x[r]."""
    if isinstance(norm, nn.RMSNorm):
        if norm.weight.dim() == 1:
            return F.rms_norm(x, norm.normalized_shape, norm.weight, norm.eps)
        return F.rms_norm(x, norm.normalized_shape, eps=norm.eps) * norm.weight.unsqueeze(1)
    if not isinstance(norm, nn.LayerNorm):
        return x
    w, b = norm.weight, norm.bias
    if w.dim() == 1:
        return F.layer_norm(x, norm.normalized_shape, w, b, norm.eps)
    normed = F.layer_norm(x, norm.normalized_shape, eps=norm.eps)
    return torch.addcmul(b.unsqueeze(1), normed, w.unsqueeze(1))


def embedding(index: Tensor, table: Tensor) -> Tensor:
    """Rows of table (V, D) at index; stacked table (R, V, D): run r's rows at index[r] (R, M)."""
    if table.dim() == 2:
        return F.embedding(index, table)
    R, V, D = table.shape
    offsets = torch.arange(R, device=index.device).view(R, 1) * V  # run r's rows of the table
    return F.embedding(index + offsets, table.reshape(R * V, D))


def override_patterns(
    attn: Tensor,
    patterns: tuple[tuple[int, str], ...],
    pad_mask: Tensor | None,
    causal: bool = False,
) -> Tensor:
    """attn (B, H, T, T) with some heads' patterns replaced (tfviz.core.interventions.PATTERNS).

    Each replacement spreads a row over the real keys only, so padding still receives nothing:
    uniform (1/n each), identity (token i reads itself), previous (token i reads i-1; the first
    reads itself), anti_diagonal (token i reads n-1-i), copy:G (head G's own pattern, as computed
    before any replacement).
    """
    B, H, T, _ = attn.shape
    real = (
        torch.ones(B, T, dtype=attn.dtype, device=attn.device)
        if pad_mask is None
        else (~pad_mask).to(attn.dtype)
    )  # (B, T)
    n = real.sum(-1).clamp_min(1.0)  # (B,) real tokens
    i = torch.arange(T, device=attn.device)
    new = attn.clone()
    if causal and any(p in READS_AHEAD for _, p in patterns):
        raise ValueError("a causal model's query cannot read a later token (anti_diagonal)")
    for head, pattern in patterns:
        if pattern.startswith(COPY_PREFIX):
            new[:, head] = attn[:, int(pattern[len(COPY_PREFIX) :])]
            continue
        if pattern == "uniform" and causal:
            # Each query spreads over the real keys at or before it.
            seen = real[:, None, :] * torch.ones(T, T, dtype=attn.dtype, device=attn.device).tril()
            rows = seen / seen.sum(-1, keepdim=True).clamp_min(1.0)  # (B, T, T)
        elif pattern == "uniform":
            rows = real[:, None, :] / n[:, None, None]  # (B, 1, T) -> every query alike
            rows = rows.expand(B, T, T)
        else:
            if pattern == "identity":
                target = i.expand(B, T)
            elif pattern == "previous":
                # A sequence's first real token reads itself: in a left-padded (causal) batch it
                # is not at index 0, and the key before it is padding.
                first = real.argmax(-1, keepdim=True)  # (B, 1) the first real index
                target = torch.maximum(i - 1, first)
            else:  # anti_diagonal, within each sequence's real length
                target = (n[:, None].long() - 1 - i).clamp_min(0)
            rows = F.one_hot(target, T).to(attn.dtype)  # (B, T, T)
        if pad_mask is not None:
            rows = rows * real[:, :, None]  # padded queries read nothing (no output reads them)
        new[:, head] = rows
    return new
