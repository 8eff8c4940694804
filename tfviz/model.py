"""The encoder: attention with named W_q, W_k, W_v, W_o, post- or pre-norm layers, and a trace.

Every intervention the app offers (switching W_o off, zeroing heads) is a forward argument,
never a change to the module, so one loaded model can serve every browser session at once: a
forward pass is a pure function of (weights, ids, switches). With trace=True the pass also returns
what it computed at each named site (TransformerLens' vocabulary: z, pattern=attn, per-head
results); with trace=False it keeps nothing and takes torch's fused attention kernel.

Dimensions everywhere: B batch, T tokens, H heads, D = d_model, d_k = D / H.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfviz.config import ModelConfig

W_O_MODES = ("learned", "identity", "zero")


@dataclass(frozen=True)
class LayerTrace:
    """What one encoder layer computed, detached from autograd (B, H, T, D as in the module doc)."""

    resid_pre: Tensor  # (B, T, D) the layer's input
    v: Tensor  # (B, H, T, d_k) values, per head
    attn: Tensor  # (B, H, T, T) softmax weights, before dropout; a query's row sums to 1
    z: Tensor  # (B, H, T, d_k) each head's output (after any ablation)
    concat: Tensor  # (B, T, D) heads side by side: the input of W_o
    attn_out: Tensor  # (B, T, D) what the attention sublayer adds to the residual stream
    resid_mid: Tensor  # (B, T, D) after attention's add (& norm, post-norm)
    resid_out: Tensor  # (B, T, D) after the feed-forward add (& norm, post-norm)
    w_o_mode: str  # "learned", "identity" or "zero": how attn_out was made from concat
    W_o: Tensor  # (D, D) the map actually applied, nn.Linear layout (out, in)
    b_o: Tensor  # (D,) the bias actually added

    def head_contributions(self) -> Tensor:
        """Per-head terms of the output projection: z_h @ W_o^h, shape (B, H, T, D).

        W_o^h is the block of rows of W_o^T that reads head h's slice of concat, so
        sum over h of the result, plus b_o, equals attn_out (in every w_o mode).
        """
        H, d_k = self.z.shape[1], self.z.shape[-1]
        blocks = self.W_o.T.reshape(H, d_k, -1)  # (H, d_k, D): rows of W_o^T, one block per head
        return torch.einsum("bhtk,hkd->bhtd", self.z, blocks)


@dataclass(frozen=True)
class Trace:
    """The trace of one forward pass: the embedded input and one LayerTrace per layer."""

    embed: Tensor  # (B, T, D) token (or value) embedding + positions
    pad_mask: Tensor | None  # (B, T) True where a position is padding
    layers: list[LayerTrace]


@dataclass(frozen=True)
class EncoderOutput:
    """Logits, and the trace when one was asked for."""

    logits: Tensor  # (B, n_out) pooled tasks, (B, T, n_out) token tasks
    trace: Trace | None


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over H heads; the four projections are named as in the seeds."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        D = config.d_model
        self.n_heads, self.d_k = config.n_heads, config.d_k
        # One big D x D projection per role; seed 004 shows this equals H separate D x d_k ones.
        self.W_q = nn.Linear(D, D)
        self.W_k = nn.Linear(D, D)
        self.W_v = nn.Linear(D, D)
        self.W_o = nn.Linear(D, D)
        self.dropout = config.dropout

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | None,
        w_o: str,
        head_gate: Tensor | None,
        trace: bool,
        out_gate: Tensor | None = None,
    ) -> tuple[Tensor, dict | None]:
        B, T, D = x.shape
        H, d_k = self.n_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_k(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        v = self.W_v(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        p = self.dropout if self.training else 0.0
        attn = None
        if trace:
            scores = (q * (1.0 / math.sqrt(d_k))) @ k.transpose(-2, -1)  # (B, H, T, T)
            if pad_mask is not None:
                scores = scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
            attn = F.softmax(scores, dim=-1)
            if pad_mask is not None:
                attn = attn.nan_to_num(0.0)  # a query with every key padded attends to nothing
            z = F.dropout(attn, p, self.training) @ v  # (B, H, T, d_k)
        else:
            keep = None if pad_mask is None else ~pad_mask[:, None, None, :]  # (B, 1, 1, T)
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
            if pad_mask is not None:
                z = z.nan_to_num(0.0)
        if head_gate is not None:
            z = z * head_gate.view(1, H, 1, 1)  # zero (or scale) heads before they reach W_o
        concat = z.transpose(1, 2).contiguous().view(B, T, D)  # (B, T, D): heads side by side
        if w_o == "learned":
            attn_out = self.W_o(concat)
        elif w_o == "identity":
            attn_out = concat  # W_o switched off: the heads go on unmixed, bias dropped
        else:
            attn_out = torch.zeros_like(concat)
        if out_gate is not None:
            # Zeroing a slice of W_o's output: after W_o that slice mixes every head (a common
            # mistake when "ablating a head"); offered so the app can show the difference.
            attn_out = attn_out * out_gate
        if not trace:
            return attn_out, None
        if w_o == "learned":
            W, b = self.W_o.weight.detach(), self.W_o.bias.detach()
        else:
            W = (
                torch.eye(D, device=x.device, dtype=x.dtype)
                if w_o == "identity"
                else torch.zeros(D, D, device=x.device, dtype=x.dtype)
            )
            b = torch.zeros(D, device=x.device, dtype=x.dtype)
        if out_gate is not None:
            W, b = W * out_gate[:, None], b * out_gate  # the map actually applied
        parts = dict(
            v=v.detach(),
            attn=attn.detach(),
            z=z.detach(),
            concat=concat.detach(),
            attn_out=attn_out.detach(),
            w_o_mode=w_o,
            W_o=W,
            b_o=b,
        )
        return attn_out, parts


class FeedForward(nn.Module):
    """Position-wise feed-forward net: fc2(dropout(relu(fc1(x)))), as in seed 002."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    """Attention -> W_o -> dropout -> residual add -> LayerNorm, then the FFN alike (seed 000)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn = MultiHeadAttention(config)
        self.ff = FeedForward(config)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | None,
        w_o: str,
        head_gate: Tensor | None,
        trace: bool,
        out_gate: Tensor | None = None,
    ) -> tuple[Tensor, LayerTrace | None]:
        resid_pre = x
        if self.pre_norm:
            a, parts = self.attn(self.norm1(x), pad_mask, w_o, head_gate, trace, out_gate)
            x = x + self.dropout(a)
            resid_mid = x
            x = x + self.dropout(self.ff(self.norm2(x)))
        else:
            a, parts = self.attn(x, pad_mask, w_o, head_gate, trace, out_gate)
            x = self.norm1(x + self.dropout(a))
            resid_mid = x
            x = self.norm2(x + self.dropout(self.ff(x)))
        if not trace:
            return x, None
        return x, LayerTrace(
            resid_pre=resid_pre.detach(),
            resid_mid=resid_mid.detach(),
            resid_out=x.detach(),
            **parts,
        )


class Encoder(nn.Module):
    """Embedding + learned positions, encoder layers, a linear head (per token or pooled)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"Encoder needs a ModelConfig, got {type(config).__name__}")
        self.config = config
        D = config.d_model
        # "value" feeds the id itself as a number through Linear(1, D), exactly as seed 002 does.
        self.embed = (
            nn.Embedding(config.vocab_size, D) if config.embed == "token" else nn.Linear(1, D)
        )
        self.pos = nn.Parameter(
            torch.randn(1, config.max_len, D) * 0.02
        )  # learned positions (seed 002)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        # Pre-norm leaves the residual stream unnormalised, so it needs a final LayerNorm.
        self.norm_f = nn.LayerNorm(D) if config.norm == "pre" else nn.Identity()
        self.head = nn.Linear(D, config.n_out)

    @property
    def device(self) -> torch.device:
        return self.pos.device

    def forward(
        self,
        ids: Tensor,
        pad_mask: Tensor | None = None,
        w_o: str | Mapping[int, str] = "learned",
        ablate_heads: Iterable = (),
        trace: bool = True,
        head_gates: Tensor | None = None,
        ablate_after_w_o: Iterable = (),
    ) -> EncoderOutput:
        """Run the encoder.

        Args:
            ids: (B, T) token ids, T <= config.max_len.
            pad_mask: (B, T) bool, True where a position is padding (no key, not pooled).
            w_o: "learned", "identity" (W_o off: concat goes on unchanged, no bias), "zero" (the
                attention sublayer adds nothing), or {layer: mode} to switch some layers only.
            ablate_heads: (layer, head) pairs whose z is zeroed before W_o.
            trace: also return a Trace of every layer (costs memory for the kept tensors only).
            head_gates: optional (L, H) multipliers on each head's z; differentiable, for importance
                scores. Multiplied with the ablation mask.
            ablate_after_w_o: (layer, head) pairs whose slice of W_o's *output* (the dims
                h*d_k..(h+1)*d_k of attn_out) is zeroed: the wrong way to remove a head, since
                after W_o that slice carries every head. For teaching the difference.
        Returns:
            EncoderOutput with logits (B, n_out) for pooled models or (B, T, n_out) per token.
        """
        cfg = self.config
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            raise ValueError("ids must be a 2-d tensor of token ids, shape (batch, tokens)")
        B, T = ids.shape
        if T > cfg.max_len:
            raise ValueError(f"sequence has {T} positions but this model has only {cfg.max_len}")
        if pad_mask is not None and pad_mask.shape != ids.shape:
            raise ValueError(
                f"pad_mask has shape {tuple(pad_mask.shape)} but ids {tuple(ids.shape)}"
            )
        if pad_mask is not None and not pad_mask.any():
            pad_mask = None  # nothing padded: take the unmasked (faster) attention path
        modes = layer_modes(w_o, cfg.n_layers)
        gates = head_gate_matrix(ablate_heads, head_gates, cfg, self.device)
        out_gates = output_slice_gates(ablate_after_w_o, cfg, self.device)

        if cfg.embed == "token":
            x = self.embed(ids)
        else:
            x = self.embed(ids.to(self.pos.dtype).unsqueeze(-1))
        x = x + self.pos[:, :T]  # (B, T, D)
        embed = x
        layer_traces = []
        for i, layer in enumerate(self.layers):
            head_gate = None if gates is None else gates[i]
            out_gate = None if out_gates is None else out_gates[i]
            x, lt = layer(x, pad_mask, modes[i], head_gate, trace, out_gate)
            layer_traces.append(lt)
        x = self.norm_f(x)
        if cfg.pool == "mean":
            if pad_mask is None:
                x = x.mean(dim=1)
            else:
                keep = (~pad_mask).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
                x = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)
        elif cfg.pool == "first":
            x = x[:, 0]
        logits = self.head(x)
        if not trace:
            return EncoderOutput(logits=logits, trace=None)
        return EncoderOutput(
            logits=logits, trace=Trace(embed=embed.detach(), pad_mask=pad_mask, layers=layer_traces)
        )


def layer_modes(w_o: str | Mapping[int, str], n_layers: int) -> list[str]:
    """Expand a w_o switch into one mode per layer, refusing anything unknown."""
    if isinstance(w_o, str):
        if w_o not in W_O_MODES:
            raise ValueError(
                f"w_o must be one of {W_O_MODES} or a {{layer: mode}} dict, got {w_o!r}"
            )
        return [w_o] * n_layers
    if not isinstance(w_o, Mapping):
        raise ValueError(f"w_o must be one of {W_O_MODES} or a {{layer: mode}} dict, got {w_o!r}")
    modes = ["learned"] * n_layers
    for layer, mode in w_o.items():
        if not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"w_o names layer {layer!r}; this model has layers 0..{n_layers - 1}")
        if mode not in W_O_MODES:
            raise ValueError(f"w_o mode for layer {layer} must be one of {W_O_MODES}, got {mode!r}")
        modes[layer] = mode
    return modes


def head_gate_matrix(
    ablate_heads: Iterable, head_gates: Tensor | None, cfg: ModelConfig, device: torch.device
) -> Tensor | None:
    """(L, H) multipliers for each head's z, or None when no head is touched (the common case)."""
    pairs = head_pairs(ablate_heads, cfg, "ablate_heads")
    if not pairs and head_gates is None:
        return None
    gates = torch.ones(cfg.n_layers, cfg.n_heads, device=device)
    for layer, head in pairs:
        gates[layer, head] = 0.0
    if head_gates is not None:
        if tuple(head_gates.shape) != (cfg.n_layers, cfg.n_heads):
            raise ValueError(f"head_gates must have shape ({cfg.n_layers}, {cfg.n_heads})")
        gates = gates * head_gates
    return gates


def output_slice_gates(pairs: Iterable, cfg: ModelConfig, device: torch.device) -> Tensor | None:
    """(L, D) multipliers on attn_out that zero head-sized slices after W_o, or None."""
    pairs = head_pairs(pairs, cfg, "ablate_after_w_o")
    if not pairs:
        return None
    gates = torch.ones(cfg.n_layers, cfg.d_model, device=device)
    for layer, head in pairs:
        gates[layer, head * cfg.d_k : (head + 1) * cfg.d_k] = 0.0
    return gates


def head_pairs(pairs: Iterable, cfg: ModelConfig, what: str) -> list[tuple[int, int]]:
    """Validated (layer, head) pairs."""
    out = []
    for pair in list(pairs or ()):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"{what} takes (layer, head) pairs, got {pair!r}")
        layer, head = pair
        if not (isinstance(layer, int) and 0 <= layer < cfg.n_layers):
            raise ValueError(f"ablated layer {layer!r} out of range 0..{cfg.n_layers - 1}")
        if not (isinstance(head, int) and 0 <= head < cfg.n_heads):
            raise ValueError(f"ablated head {head!r} out of range 0..{cfg.n_heads - 1}")
        out.append((layer, head))
    return out
