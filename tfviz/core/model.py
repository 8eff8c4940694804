"""The Transformer, encoder or decoder: attention with named W_q, W_k, W_v, W_o, post- or
pre-norm layers, and a trace; parameter_shapes, its weights' table from the config alone.

Every intervention the app offers (switching W_o off, zeroing heads) is a forward argument,
never a change to the module, so one loaded model can serve every browser session at once: a
forward pass is a pure function of (weights, ids, switches). With trace=True the pass also returns
what it computed at each named site (TransformerLens' vocabulary: z, pattern=attn, per-head
results); with trace=False it keeps nothing and takes torch's fused attention kernel.

The same module runs the small models trained here and a pretrained BERT-style encoder
(tfviz.hf.pretrained): the config's activation, norm_eps, type_vocab_size, embed_norm and n_out=0
(no head) switch on exactly what BERT has and these models lack, so every switch and every trace
site works on both.

The same code also trains R runs of one config at once (tfviz.training.ensemble): given weights with
a leading run axis (torch.func.functional_call) and a tfviz.core.packing.Packing in place of ids,
every layer runs on the runs' real tokens side by side, so the batched training and this encoder
cannot drift apart. The helpers `linear`, `layer_norm` and `embedding` (tfviz.core.functional) take
either kind of weights.

Dimensions everywhere: B batch, T tokens, H heads, D = d_model, d_k = D / H; R runs and M packed
token slots per run when packed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfviz.core import wo
from tfviz.core.buffers import stacked_empty
from tfviz.core.config import ModelConfig

# The forward's stateless pieces, importable from here as before the split.
from tfviz.core.functional import (
    activation_function,
    causal_bias,
    embedding,
    heads_apart,
    layer_norm,
    linear,
    make_norm,
    override_patterns,
    rotary_angles,
    rotate,
)
from tfviz.core.interventions import Interventions, LayerSwitches, layer_map
from tfviz.core.packing import Packing, from_grid, pool, to_grid

W_O_MODES = wo.W_O_MODES  # re-exported: the switch's modes, named in tfviz.core.modes


@dataclass(frozen=True)
class LayerTrace:
    """What one encoder layer computed, detached from autograd (B, H, T, D as in the module doc)."""

    resid_pre: Tensor  # (B, T, D) the layer's input
    values: Tensor  # (B, n_kv, T, d_k) values, per key/value head (H of them without GQA)
    attn: Tensor  # (B, H, T, T) softmax weights, before dropout; a query's row sums to 1
    z: Tensor  # (B, H, T, d_k) each head's output (after any ablation)
    concat: Tensor  # (B, T, D) heads side by side: the input of W_o
    attn_out: Tensor  # (B, T, D) what the attention sublayer adds to the residual stream
    resid_mid: Tensor  # (B, T, D) after attention's add (& norm, post-norm)
    resid_out: Tensor  # (B, T, D) after the feed-forward add (& norm, post-norm)
    w_o_mode: str  # how attn_out was made from concat: one of tfviz.core.wo's modes
    W_o: Tensor  # (D, D) the map actually applied, nn.Linear layout (out, in)
    b_o: Tensor  # (D,) the bias actually added
    head_gate: Tensor | None  # (H,) the multiplier each head's z carried; None: all 1

    @property
    def v(self) -> Tensor:
        """(B, H, T, d_k) values per query head: a key/value head's repeated for the query heads
        that share it (made when read: a traced pass does not pay for it)."""
        H = self.attn.shape[1]
        if self.values.shape[1] == H:
            return self.values
        return self.values.repeat_interleave(H // self.values.shape[1], dim=1)

    def head_contributions(self) -> Tensor:
        """Per-head terms of the output projection: z_h @ W_O^h, shape (B, H, T, D).

        Their sum over h, plus b_o, equals attn_out (in every w_o mode): see tfviz.core.wo.
        """
        return wo.head_contributions(self.z, self.W_o)


@dataclass(frozen=True)
class Trace:
    """The trace of one forward pass: the embedded input and one LayerTrace per layer."""

    # (B, T, D) layer 0's input: token (or value) embedding + positions (+ types, then the
    # embedding LayerNorm, when the config has them)
    embed: Tensor
    pad_mask: Tensor | None  # (B, T) True where a position is padding
    layers: list[LayerTrace]
    interventions: Interventions  # the switches this pass ran with
    # Each of STACKED's sites for every layer in one (L, B, ...) tensor; the layers' tensors are
    # views of these, so that a trace's arrays are read without a copy (tfviz.core.trace).
    stacked: dict[str, Tensor]


# The per-layer sites a trace keeps side by side in one tensor each (see keep_stacked).
# z is not among them: it is concat's view, the heads apart (keep_stacked).
STACKED = ("attn", "concat", "attn_out", "resid_mid", "resid_out")


@dataclass(frozen=True)
class EncoderOutput:
    """Logits, and the trace when one was asked for."""

    # (B, n_out) pooled tasks, (B, T, n_out) token tasks; with no head (n_out=0) the final
    # hidden states instead: (B, D) pooled, (B, T, D) per token.
    logits: Tensor
    trace: Trace | None


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over H heads; the four projections are named as in the seeds."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        D = config.d_model
        self.n_heads, self.d_k = config.n_heads, config.d_k
        self.n_kv = config.kv_heads
        self.causal = config.causal
        # One big D x D projection per role; seed 004 shows this equals H separate D x d_k ones.
        # With grouped-query attention W_k and W_v make only n_kv heads (n_kv * d_k outputs).
        self.W_q = nn.Linear(D, D)
        self.W_k = nn.Linear(D, self.n_kv * self.d_k)
        self.W_v = nn.Linear(D, self.n_kv * self.d_k)
        self.W_o = nn.Linear(D, D)
        self.dropout = config.dropout

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | Packing | None,
        sw: LayerSwitches,
        trace: bool,
        rotary: tuple[Tensor, Tensor] | None = None,
        into: dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, dict | None]:
        """attn_out = concat_h(softmax(q_h k_h^T / sqrt(d_k) + mask) v_h) W_o^T + b_o, under the
        layer's switches; with trace, also the parts a LayerTrace keeps.

        pad_mask: (B, T) True at padding; or a Packing of R runs' batches, x then (R, M, D).
        into: this layer's slices of the trace's stacked sites (run_layers), where a traced
        pass writes its softmax weights, concat and attn_out as it makes them (written_to)."""
        packed = pad_mask if isinstance(pad_mask, Packing) else None
        if packed is not None:
            pad_mask = packed.pad_mask  # (R*B, T): the padding of the grid the heads go on
        q = self.split_heads(linear(x, self.W_q), packed)  # (B, H, T, d_k)
        k = self.split_heads(linear(x, self.W_k), packed)  # (B, n_kv, T, d_k)
        v = self.split_heads(linear(x, self.W_v), packed)  # (B, n_kv, T, d_k)
        if rotary is not None:
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        p = self.dropout if self.training else 0.0
        attn = None
        # Packed runs take the plain path too: for small heads (d_k 8, T ~ 17) torch's fused CPU
        # kernel spends far more time per (sequence, head), above all backward, than two matmuls.
        if trace or sw.patterns or packed is not None:
            scores = self.scaled_scores(q, k)  # (B, H, T, T)
            self.mask_scores(scores, pad_mask)
            # (a packing's examples all have a key: no row of it is all -inf)
            no_key = pad_mask is not None and packed is None
            attn = softmax_into(scores, into, no_key)  # (B, H, T, T), written in the trace
            if sw.patterns:
                attn = override_patterns(attn, sw.patterns, pad_mask, self.causal)
            z = self.weighted_values(F.dropout(attn, p) if p else attn, v)  # (B, H, T, d_k)
        else:
            z = self.fused_attention(q, k, v, pad_mask, p)
        z = switched_heads(z, sw)
        concat = concat_heads(z, packed, into)  # (B, T, D), packed (R, M, D)
        attn_out = self.project_out(concat, sw, into)  # (B, T, D), packed (R, M, D)
        if not trace:
            return attn_out, None
        return attn_out, self.traced_parts(sw, v, attn, z, concat, attn_out)

    def split_heads(self, t: Tensor, packed: Packing | None) -> Tensor:
        """A projection's rows (B, T, n * d_k) -> heads (B, n, T, d_k), n = H or n_kv; packed,
        slot rows (R, M, n * d_k) -> heads on the (R*B, T) grid of all runs' batches."""
        if packed is None:
            B, T, _ = t.shape
            return t.view(B, T, -1, self.d_k).transpose(1, 2)
        return to_grid(packed, t, t.shape[-1] // self.d_k)

    # Grouped-query attention: each key/value head serves group = H / n_kv consecutive query
    # heads. Their rows are stacked, (B, H, T, X) -> (B, n_kv, group * T, X), so that one matmul
    # serves them all and k and v are never repeated (a plain reshape when n_kv = H).
    def scaled_scores(self, q: Tensor, k: Tensor) -> Tensor:
        """q k^T / sqrt(d_k): (B, H, T, T), each query head against its key/value head's keys."""
        B, H, T, d_k = q.shape
        scaled = (q * (1.0 / math.sqrt(d_k))).reshape(B, self.n_kv, H // self.n_kv * T, d_k)
        return (scaled @ k.transpose(-2, -1)).view(B, H, T, T)

    def weighted_values(self, attn: Tensor, v: Tensor) -> Tensor:
        """attn @ v: (B, H, T, d_k), each query head's weights over its key/value head's values."""
        B, H, T, _ = attn.shape
        z = attn.reshape(B, self.n_kv, H // self.n_kv * T, T) @ v
        return z.view(B, H, T, v.shape[-1])

    def mask_scores(self, scores: Tensor, pad_mask: Tensor | None) -> None:
        """-inf added in place at padded keys and, causal, at keys after the query.

        Added in place: the product's own buffer, still in cache, and no second (B, H, T, T)
        array (matmul's backward reads q and k, not scores). And added, not filled: x + 0 is x,
        the same scores as a masked fill, and backward costs nothing, where a fill masks the
        gradient again.
        """
        if pad_mask is not None:
            key_bias = torch.zeros(pad_mask.shape, dtype=scores.dtype, device=scores.device)
            scores.add_(key_bias.masked_fill_(pad_mask, float("-inf"))[:, None, None])
        if self.causal:
            scores.add_(causal_bias(scores.shape[-1], scores.dtype, scores.device))

    def fused_attention(
        self, q: Tensor, k: Tensor, v: Tensor, pad_mask: Tensor | None, p: float
    ) -> Tensor:
        """z (B, H, T, d_k) from torch's fused kernel: an untraced pass keeps no weights."""
        group = self.n_heads // self.n_kv
        if group > 1:  # the fused kernel takes H heads of keys and values
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        keep = None if pad_mask is None else ~pad_mask[:, None, None, :]  # (B, 1, 1, T)
        if self.causal and keep is not None:
            T = q.shape[2]
            keep = keep & torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=keep, dropout_p=p, is_causal=self.causal and keep is None
        )
        # a query with every key padded attends to nothing
        return z if pad_mask is None else z.nan_to_num(0.0)

    def project_out(self, concat: Tensor, sw: LayerSwitches, into: dict | None) -> Tensor:
        """attn_out: concat through W_o as the switches say, made in the trace's buffer where a
        traced pass has one.

        The map is resolved once per pass (Interventions.resolve) and remembered across passes;
        identity and zero skip the matmul so that "W_o off" passes concat on exactly.
        """
        if sw.mode == "identity":
            attn_out = concat
        elif sw.mode == "zero":
            attn_out = torch.zeros_like(concat)
        else:
            W, b = self.applied(sw)
            out = written_to(into, "attn_out", concat, W, b)
            if out is None:
                attn_out = linear(concat, W, b)
            else:  # nn.Linear's own product (addmm), made in the trace's buffer
                D = concat.shape[-1]
                torch.addmm(b, concat.view(-1, D), W.t(), out=out.view(-1, D))
                attn_out = out
        if sw.out_gate is not None:
            # Zeroing a slice of W_o's output: after W_o that slice mixes every head (a common
            # mistake when "ablating a head"); offered so the app can show the difference.
            attn_out = attn_out * sw.out_gate
        return attn_out

    def traced_parts(
        self,
        sw: LayerSwitches,
        v: Tensor,
        attn: Tensor,
        z: Tensor,
        concat: Tensor,
        attn_out: Tensor,
    ) -> dict:
        """What a LayerTrace keeps of this sublayer, detached, with the map actually applied."""
        W, b = (t.detach() for t in self.applied(sw))
        if sw.out_gate is not None:
            W, b = W * sw.out_gate[:, None], b * sw.out_gate  # the map actually applied
        return dict(
            values=v.detach(),
            attn=attn.detach(),
            z=z.detach(),
            concat=concat.detach(),
            attn_out=attn_out.detach(),
            w_o_mode=sw.mode,
            W_o=W,
            b_o=b,
            head_gate=None if sw.gate is None else sw.gate.detach(),
        )

    def per_head(self, weight: Tensor) -> Tensor:
        """A W_q, W_k or W_v weight with H * d_k rows, head h's at h*d_k..: W_k's and W_v's
        key/value heads repeated for the query heads that share them (grouped-query attention;
        the weight itself otherwise)."""
        if weight.shape[0] == self.n_heads * self.d_k:
            return weight
        kv = weight.reshape(self.n_kv, self.d_k, -1).repeat_interleave(self.n_heads // self.n_kv, 0)
        return kv.reshape(self.n_heads * self.d_k, -1)

    def applied(self, sw: LayerSwitches) -> tuple[Tensor, Tensor]:
        """The (W, b) this layer applies to concat under its switches: resolved with the pass
        (Interventions.resolve), or from its own W_o for switches made without the weights."""
        if sw.W_o is not None:
            return sw.W_o, sw.b_o
        permuted = sw.order if sw.permute_w_o else None
        return layer_map(self.W_o.weight, self.W_o.bias, sw.mode, permuted, self.n_heads)


class FeedForward(nn.Module):
    """Position-wise feed-forward net: fc2(dropout(act(fc1(x)))), act = ReLU (seed 002) or GELU;
    gated (SwiGLU, Llama): fc2(dropout(act(fc1(x)) * up(x))), fc1 being the gate."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        if config.mlp == "gated":
            self.up = nn.Linear(config.d_model, config.d_ff)
        self.gated = config.mlp == "gated"
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.act = activation_function(config.activation)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.act(linear(x, self.fc1))
        if self.gated:
            hidden = hidden * linear(x, self.up)
        return linear(dropped(hidden, self.dropout), self.fc2)


class EncoderLayer(nn.Module):
    """Attention -> W_o -> dropout -> residual add -> LayerNorm, then the FFN alike (seed 000)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn = MultiHeadAttention(config)
        self.norm1 = make_norm(config)
        # Without a feed-forward net (config.ffn False) the layer ends after attention's add.
        # (Registered after norm1 since then: model.parameters() lists attn, norm1, ff, norm2,
        # the order the bundled atlas was trained in; the weights' names are unchanged.)
        if config.ffn:
            self.ff = FeedForward(config)
            self.norm2 = make_norm(config)
        self.has_ffn = config.ffn
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | Packing | None,
        sw: LayerSwitches,
        trace: bool,
        rotary: tuple[Tensor, Tensor] | None = None,
        into: dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, LayerTrace | None]:
        resid_pre = x
        if self.pre_norm:
            a, parts = self.attn(layer_norm(x, self.norm1), pad_mask, sw, trace, rotary, into)
            x = residual_add(x, dropped(a, self.dropout), written_to(into, "resid_mid", x, a))
            resid_mid = x
            if self.has_ffn:
                f = dropped(self.ff(layer_norm(x, self.norm2)), self.dropout)
                x = residual_add(x, f, written_to(into, "resid_out", x, f))
        else:
            a, parts = self.attn(x, pad_mask, sw, trace, rotary, into)
            x = layer_norm(x + dropped(a, self.dropout), self.norm1)
            resid_mid = x
            if self.has_ffn:
                x = layer_norm(x + dropped(self.ff(x), self.dropout), self.norm2)
        if not trace:
            return x, None
        return x, LayerTrace(
            resid_pre=resid_pre.detach(),
            resid_mid=resid_mid.detach(),
            resid_out=x.detach(),
            **parts,
        )


class Transformer(nn.Module):
    """The one model: it runs encoders and decoders (config.causal). Embedding + learned or
    rotary positions (+ token types, + LayerNorm), post- or pre-norm layers, a linear head (per
    token or pooled) or none."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"Transformer needs a ModelConfig, got {type(config).__name__}")
        self.config = config
        D = config.d_model
        # "value" feeds the id itself as a number through Linear(1, D), exactly as seed 002 does.
        self.embed = (
            nn.Embedding(config.vocab_size, D) if config.embed == "token" else nn.Linear(1, D)
        )
        if config.positions == "learned":  # (rotary positions turn q and k instead)
            self.pos = nn.Parameter(torch.randn(1, config.max_len, D) * 0.02)  # (seed 002)
        # BERT's segment embedding (sentence A / B) and the LayerNorm over the embedding sum.
        # Absent unless asked for, so the state dict of every model trained here is unchanged.
        if config.type_vocab_size:
            self.type_embed = nn.Embedding(config.type_vocab_size, D)
        if config.embed_norm:
            self.embed_norm = nn.LayerNorm(D, eps=config.norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        # Pre-norm leaves the residual stream unnormalised, so it needs a final LayerNorm.
        self.norm_f = make_norm(config) if config.norm == "pre" else nn.Identity()
        # n_out=0: no head; a pretrained encoder's output is its hidden states.
        self.head = nn.Linear(D, config.n_out) if config.n_out else nn.Identity()
        if config.tie_head:
            # One matrix embeds a token and reads it out (GPT-2, most small Llama-style models).
            self.head.weight = self.embed.weight
            nn.init.zeros_(self.head.bias)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def positions_of(self, pad_mask: Tensor | None) -> Tensor | None:
        """(B, T) each token's position, or None where it is its index (0..T-1) in every row.

        A causal model's batch is padded on the left, as transformers pads decoders, so that
        every sequence's next token sits in the last column; its positions then count real
        tokens only (padding takes position 0), so that a sequence reads the same alone or in
        a batch.
        """
        if not self.config.causal or pad_mask is None:
            return None
        return ((~pad_mask).long().cumsum(-1) - 1).clamp_min(0)

    def forward(
        self,
        ids: Tensor | Packing,
        pad_mask: Tensor | None = None,
        interventions: Interventions | None = None,
        *,
        trace: bool = True,
        token_types: Tensor | None = None,
        head: bool = True,
        **switches,
    ) -> EncoderOutput:
        """Run the encoder.

        Args:
            ids: (B, T) token ids, T <= config.max_len; or a Packing of R runs' batches, with
                weights that carry a leading run axis (tfviz.training.ensemble), no pad_mask and no
                trace.
            pad_mask: (B, T) bool, True where a position is padding (no key, not pooled).
            interventions: the switches of this pass (tfviz.core.interventions.Interventions): W_o
                mode per layer, heads ablated before W_o, slices zeroed after it, head gates.
            trace: also return a Trace of every layer (costs memory for the kept tensors only).
            token_types: (B, T) segment ids for a model with type_vocab_size > 0; None: all 0
                (one sentence).
            head: False: the final hidden states in place of the logits, for a caller that
                applies the head itself (a vocabulary's worth: tfviz.core.trace.head_top_next).
            **switches: shorthand for interventions=Interventions(**switches), e.g.
                model(ids, w_o="identity", ablate_heads=[(0, 1)]).
        Returns:
            EncoderOutput with logits (B, n_out) for pooled models or (B, T, n_out) per token
            (D in place of n_out when the model has no head); packed: (R, B, n_out) pooled,
            (R, M, n_out) per token in slot order (tfviz.core.packing.unpack puts them on the grid).
        """
        if isinstance(ids, Packing):
            return self._packed(ids, pad_mask, interventions, trace, token_types, switches)
        self.check_inputs(ids, pad_mask, token_types)
        if pad_mask is not None and not pad_mask.any():
            pad_mask = None  # nothing padded: take the unmasked (faster) attention path
        iv = Interventions.of(interventions, **switches)
        embed, rotary = self.embed_input(ids, pad_mask, token_types)  # (B, T, D)
        x, layer_traces, stacked = self.run_layers(embed, pad_mask, iv, trace, rotary)
        x = self.pooled(x, pad_mask)
        logits = linear(x, self.head) if self.config.n_out and head else x
        if not trace:
            return EncoderOutput(logits=logits, trace=None)
        return EncoderOutput(
            logits=logits,
            trace=Trace(
                embed=embed.detach(),
                pad_mask=pad_mask,
                layers=layer_traces,
                interventions=iv,
                stacked=stacked,
            ),
        )

    def check_inputs(
        self, ids: Tensor, pad_mask: Tensor | None, token_types: Tensor | None
    ) -> None:
        """ValueError unless ids, pad_mask and token_types are what forward takes."""
        cfg = self.config
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            raise ValueError("ids must be a 2-d tensor of token ids, shape (batch, tokens)")
        T = ids.shape[1]
        if T > cfg.max_len:
            raise ValueError(f"sequence has {T} positions but this model has only {cfg.max_len}")
        if pad_mask is not None and pad_mask.shape != ids.shape:
            raise ValueError(
                f"pad_mask has shape {tuple(pad_mask.shape)} but ids {tuple(ids.shape)}"
            )
        if token_types is not None and (
            not cfg.type_vocab_size
            or token_types.shape != ids.shape
            or token_types.min() < 0
            or token_types.max() >= cfg.type_vocab_size
        ):
            raise ValueError(
                "token_types needs a model with token-type embeddings, the shape of ids and "
                f"values in 0..{cfg.type_vocab_size - 1}"
            )

    def embed_input(
        self, ids: Tensor, pad_mask: Tensor | None, token_types: Tensor | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """Layer 0's input (B, T, D): token embedding + learned positions (+ token types, then
        the embedding LayerNorm); and the rotary angles (None with learned positions)."""
        cfg = self.config
        B, T = ids.shape
        positions = self.positions_of(pad_mask)
        x = self.embed_ids(ids)  # (B, T, D)
        rotary = None
        if cfg.positions == "learned":
            x = x + (self.pos[:, :T] if positions is None else self.pos[0, positions])
        else:
            at = torch.arange(T, device=ids.device).expand(B, T) if positions is None else positions
            rotary = rotary_angles(at, cfg.d_k, cfg.rope_theta, x.dtype)
        if cfg.type_vocab_size:
            # One sentence is segment 0 throughout: add row 0 without building an ids tensor.
            x = x + (
                self.type_embed.weight[0] if token_types is None else self.type_embed(token_types)
            )
        if cfg.embed_norm:
            x = self.embed_norm(x)
        return x, rotary

    def pooled(self, x: Tensor, pad_mask: Tensor | None) -> Tensor:
        """The final hidden states (B, T, D) pooled as the config says: (B, D); per token
        (pool "none"), x itself."""
        how = self.config.pool
        if how == "mean":
            if pad_mask is None:
                return x.mean(dim=1)
            keep = (~pad_mask).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
            return (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)
        if how == "first":
            return x[:, 0]
        if how == "last":  # the last real token, wherever the padding is
            B, T, _ = x.shape
            at = torch.arange(T, device=x.device).expand(B, T)
            last = at if pad_mask is None else at.masked_fill(pad_mask, -1)
            return x[torch.arange(B, device=x.device), last.argmax(-1)]
        return x

    def embed_ids(self, ids: Tensor) -> Tensor:
        """The embedding of ids (..., ) -> (..., D); packed: run r's ids (R, M) in its own table."""
        if self.config.embed == "value":  # the id as a number through Linear(1, D) (seed 002)
            return linear(ids.to(self.embed.weight.dtype).unsqueeze(-1), self.embed)
        rows = embedding(ids, self.embed.weight)
        # A decoder's untied embedding may be kept in its stored half precision (only indexed:
        # tfviz.hf.decoder_weights); the rows read join the stream in the layers' dtype.
        return rows.to(self.layers[0].attn.W_q.weight.dtype)

    def run_layers(
        self,
        x: Tensor,
        pad_mask: Tensor | Packing | None,
        iv: Interventions,
        trace: bool,
        rotary: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, list[LayerTrace | None], dict[str, Tensor]]:
        """Every encoder layer under the pass's switches, then the final norm (pre-norm); with
        trace, each layer's LayerTrace and the stacked sites its tensors are views of."""
        plan = iv.resolve(
            self.config,
            self.device,
            [(lay.attn.W_o.weight, lay.attn.W_o.bias) for lay in self.layers],
        )
        layer_traces, stacked = [], {}
        if trace and not isinstance(pad_mask, Packing):
            (B, T, D), H, L = x.shape, self.config.n_heads, len(self.layers)
            shapes = {name: (L, B, H, T, T) if name == "attn" else (L, B, T, D) for name in STACKED}
            stacked = stacked_empty(shapes, x.dtype, x.device)
        for i, (layer, sw) in enumerate(zip(self.layers, plan.layers, strict=True)):
            into = {name: t[i] for name, t in stacked.items()} if stacked else None
            x, lt = layer(x, pad_mask, sw, trace, rotary, into)
            if lt is not None:
                lt = keep_stacked(stacked, i, lt)
            layer_traces.append(lt)
        return layer_norm(x, self.norm_f), layer_traces, stacked

    def _packed(self, packing, pad_mask, interventions, trace, token_types, switches):
        """forward() for R runs' packed batches: every layer on the real tokens only."""
        cfg = self.config
        if pad_mask is not None or trace or token_types is not None:
            raise ValueError("a packed pass takes its padding from the Packing and keeps no trace")
        if cfg.type_vocab_size or cfg.embed_norm or cfg.positions != "learned":
            raise ValueError(
                "a packed pass runs models with learned positions, without token types or "
                "embedding norm"
            )
        R, M = packing.ids.shape
        at = packing.pos
        grid = self.positions_of(packing.pad_mask)  # (R*B, T) or None
        if grid is not None:  # causal: positions count real tokens, as in forward
            at = grid[packing.seq, packing.pos]
        positions = self.pos.view(R, cfg.max_len, cfg.d_model)  # each run's own table
        x = self.embed_ids(packing.ids) + embedding(at.view(R, M), positions)
        iv = Interventions.of(interventions, **switches)
        x, _, _ = self.run_layers(x, packing, iv, trace=False)  # (R, M, D)
        if cfg.pool != "none":
            x = pool(packing, x, cfg.pool)  # (R, B, D)
        return EncoderOutput(logits=linear(x, self.head) if cfg.n_out else x, trace=None)


# The model's name before it ran decoders too, kept for saved code and old imports.
Encoder = Transformer


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every entry of Transformer(config).state_dict() and its shape, from the config alone:
    nothing is built (no module, no meta device). Both loaders check a checkpoint against it
    (tfviz.hf.weights, tfviz.hf.decoder_weights); tests/core/test_model.py checks it against real
    Transformers. A tied head's weight is listed, as state_dict lists it."""
    V, D, F, KV = config.vocab_size, config.d_model, config.d_ff, config.kv_heads * config.d_k
    norm = ("weight", "bias") if config.norm_type == "layer" else ("weight",)
    shapes: dict[str, tuple[int, ...]] = {}

    def linear(name: str, n_in: int, n_out: int) -> None:
        shapes[f"{name}.weight"], shapes[f"{name}.bias"] = (n_out, n_in), (n_out,)

    if config.positions == "learned":
        shapes["pos"] = (1, config.max_len, D)
    if config.embed == "token":
        shapes["embed.weight"] = (V, D)
    else:  # the id itself as a number, through Linear(1, D)
        linear("embed", 1, D)
    if config.type_vocab_size:
        shapes["type_embed.weight"] = (config.type_vocab_size, D)
    if config.embed_norm:  # always a LayerNorm (BERT's)
        shapes["embed_norm.weight"] = shapes["embed_norm.bias"] = (D,)
    for i in range(config.n_layers):
        at = f"layers.{i}."
        for role, out in (("W_q", D), ("W_k", KV), ("W_v", KV), ("W_o", D)):
            linear(f"{at}attn.{role}", D, out)
        norms = ("norm1", "norm2") if config.ffn else ("norm1",)
        if config.ffn:  # an attention-only layer has no feed-forward net and no second norm
            for name in ("fc1", "up") if config.mlp == "gated" else ("fc1",):
                linear(f"{at}ff.{name}", D, F)
            linear(f"{at}ff.fc2", F, D)
        for name in norms:
            for part in norm:
                shapes[f"{at}{name}.{part}"] = (D,)
    if config.norm == "pre":
        for part in norm:
            shapes[f"norm_f.{part}"] = (D,)
    if config.n_out:
        linear("head", D, config.n_out)
    return shapes


def written_to(into: dict[str, Tensor] | None, site: str, *inputs: Tensor) -> Tensor | None:
    """Where a traced pass makes its `site` tensor: this layer's slice of the trace's stacked
    site, so that keeping it costs no copy. None (made as usual, copied by keep_stacked) with no
    trace, or where a gradient must flow through it (an out= result is not differentiable)."""
    if into is None or (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
        return None
    return into[site]


def softmax_into(scores: Tensor, into: dict[str, Tensor] | None, no_key: bool) -> Tensor:
    """softmax(scores) over the keys, written straight into the trace's attn buffer where a
    traced pass has one: the largest site of a trace then costs no copy.

    no_key: a query may have every key padded (a row all -inf, its softmax NaN); such a query
    attends to nothing (its weights 0).
    """
    attn_into = written_to(into, "attn", scores)
    if attn_into is None:
        attn = F.softmax(scores, -1)
        return attn.nan_to_num(0.0) if no_key else attn
    attn = torch.softmax(scores, -1, out=attn_into)
    return attn.nan_to_num_(0.0) if no_key else attn


def switched_heads(z: Tensor, sw: LayerSwitches) -> Tensor:
    """z (B, H, T, d_k) with the head switches applied before W_o: gated, then reordered."""
    if sw.gate is not None:
        # zero (or scale) heads before they reach W_o: (H,) one factor a head, or
        # (B, H, T, 1) one a head and token (the language atlas's gated arm)
        z = z * (sw.gate.view(1, z.shape[1], 1, 1) if sw.gate.dim() == 1 else sw.gate)
    if sw.order is not None:
        # Heads enter concat in another order; z is kept in that order too, so that the
        # per-head terms z_h W_O^h still add up to attn_out.
        z = z[:, list(sw.order)]
    return z


def concat_heads(z: Tensor, packed: Packing | None, into: dict[str, Tensor] | None) -> Tensor:
    """The heads side by side, W_o's input: z (B, H, T, d_k) -> (B, T, H * d_k); packed, the grid
    back to slots (R, M, H * d_k). A traced pass copies the heads once, into the trace's buffer."""
    if packed is not None:
        return from_grid(packed, z)
    B, H, T, d_k = z.shape
    concat_into = written_to(into, "concat", z)
    if concat_into is None:
        return z.transpose(1, 2).reshape(B, T, H * d_k)
    concat_into.view(B, T, H, d_k).copy_(z.transpose(1, 2))
    return concat_into


def dropped(x: Tensor, dropout: nn.Dropout) -> Tensor:
    """dropout(x) while training; x itself otherwise, as nn.Dropout returns it, without the
    module's call (three a layer: 2% of a small model's traced pass)."""
    return dropout(x) if dropout.training and dropout.p else x


def residual_add(x: Tensor, branch: Tensor, out: Tensor | None) -> Tensor:
    """x + branch: the residual stream after a sublayer, made in out where it is given."""
    return x + branch if out is None else torch.add(x, branch, out=out)


def keep_stacked(stacked: dict[str, Tensor], i: int, lt: LayerTrace) -> LayerTrace:
    """Layer i's trace in stacked (its (L, B, ...) tensors, made before layer 0), returned as
    views of them.

    Most sites were made there already (written_to); any other (a post-norm layer's stream,
    attn_out under an output gate or W_o off) is copied while still in cache, and then freed:
    the next layer's temporaries reuse its memory.
    """
    views = {}
    for name in STACKED:
        t = getattr(lt, name)
        views[name] = stacked[name][i]
        if views[name].data_ptr() != t.data_ptr():
            views[name].copy_(t)
    # A layer's input is the one before's output (the same tensor): a view of that, no copy.
    resid_pre = lt.resid_pre if i == 0 else stacked["resid_out"][i - 1]
    # concat is z with its heads side by side, so z is read back from it: equal to the layer's
    # z element for element.
    z = heads_apart(views["concat"], lt.z.shape[1])
    return dataclasses.replace(lt, resid_pre=resid_pre, z=z, **views)


def layer_modes(w_o: str | Mapping[int, str], n_layers: int) -> list[str]:
    """Expand a w_o switch into one mode per layer, refusing anything unknown."""
    return Interventions(w_o=w_o).w_o_modes(n_layers)
