"""One traced forward pass copied to numpy (run_trace, TraceArrays), and how two traces differ.

`run_trace` runs the model once on one typed sequence and copies every site the views need into a
plain dataclass of float32 arrays (no tensors, no autograd), so the app can cache it and the plots
never touch a model. The other functions compare arrays: the cosine between what goes into W_o
(`concat`) and what comes out (`attn_out`), the check that the per-head terms add up to `attn_out`,
and how far a switched pass (W_o off, heads zeroed) drifts from the learned one.

Dimensions: L layers, H heads, T positions (BOS included when the task uses one), D = d_model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tfviz.core import wo
from tfviz.core.functional import heads_apart
from tfviz.core.interventions import Interventions
from tfviz.core.tasks import Task


@dataclass(frozen=True)
class TraceArrays:
    """One forward pass on one sequence, as float32 numpy arrays (batch dimension removed)."""

    text: str
    labels: list[str]  # one unique axis label per position, BOS first when the task uses one
    interventions: Interventions  # the switches of this pass
    w_o_modes: list[str]  # per layer: one of tfviz.core.wo's modes (learned, identity, ...)
    attn: np.ndarray  # (L, H, T, T) attention weights; a query's row sums to 1
    z: np.ndarray  # (L, H, T, d_k) each head's output
    concat: np.ndarray  # (L, T, D) heads side by side: the input of W_o
    attn_out: np.ndarray  # (L, T, D) the output of W_o: what attention adds to the residual
    resid_mid: np.ndarray  # (L, T, D) residual stream after the attention sublayer
    resid_out: np.ndarray  # (L, T, D) residual stream after the whole layer
    b_o: np.ndarray  # (L, D) the bias added (zero when W_o is switched off)
    prediction: list[str]  # the model's answer, one token per answer position
    answer: list[str]  # the right answer, same layout
    # A decoder (causal) model: a query reads only itself and earlier keys, so the weights above
    # the diagonal are masked, not learned zeros; its next token at every position, the TOP_K
    # likeliest ids (T, k), best first, and their probabilities (T, k). None for an encoder.
    causal: bool = False
    top_ids: np.ndarray | None = None
    top_probs: np.ndarray | None = None
    # A model without a head of tfviz's (a sentence encoder, a masked-LM folder's encoder): what
    # it returns, (D,) pooled or (T, D) per token, from which a sentence embedding is pooled
    # (tfviz.hf.pretrained.trace_embedding) without running the model again. None otherwise.
    output: np.ndarray | None = None

    def shown(self, weights: np.ndarray) -> np.ndarray:
        """Attention weights (..., T, T) of this trace as the charts draw them: a causal model's
        masked cells (a key after its query) are NaN, a gap in the heatmap, not a weight of 0.
        Any slice of attn whose last two axes are whole (queries, keys) or one window of both."""
        if not self.causal:
            return weights
        T = weights.shape[-1]
        return np.where(np.triu(np.ones((T, T), dtype=bool), 1), np.nan, weights)

    @property
    def nbytes(self) -> int:
        """The bytes of this trace's arrays (z is counted once: it is concat's heads apart)."""
        arrays = [v for k, v in vars(self).items() if isinstance(v, np.ndarray) and k != "z"]
        return sum(a.nbytes for a in arrays)

    @property
    def n_layers(self) -> int:
        return self.attn.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attn.shape[1]


@torch.no_grad()
def run_trace(
    model, task: Task, text: str, interventions: Interventions | None = None, **switches
) -> TraceArrays:
    """Run the model on one sequence with the given switches and copy out every traced site.

    Args:
        model: a tfviz Transformer (not changed: switches are forward arguments).
        task: the model's task; validates text (ValueError with the task's message if bad),
            unless it is the task's own Accepted text, already checked.
        interventions: the switches (or the same as keywords: w_o=..., ablate_heads=...).
    Returns:
        TraceArrays with float32 arrays of the shapes listed there.
    """
    text = task.validate(text)
    iv = Interventions.of(interventions, **switches)
    ids, pad_mask = task.encode_batch([text], device=model.device)
    cfg = model.config
    # A language model's next tokens (a task that answers with token ids): its head spans a
    # vocabulary, so the (T, V) logits are never made whole (head_top_next).
    vocabulary = (
        cfg.causal and cfg.n_out > 0 and cfg.pool == "none" and task.model_kind == "decoder"
    )
    out = model(ids, pad_mask, iv, trace=True, head=not vocabulary)
    layers = out.trace.layers
    if vocabulary:
        top_ids, top_probs = head_top_next(out.logits[0], model.head)
        prediction = task.answer_from_ids(top_ids[..., 0])
        next_tokens = _next_token_arrays(top_ids, top_probs)
    else:
        prediction = task.answer_from_logits(out.logits[0], len(text))
        next_tokens = _next_tokens(model, out.logits[0])

    def stack(tensors) -> np.ndarray:
        return torch.stack(list(tensors)).to("cpu", torch.float32).numpy()

    def site(name: str) -> np.ndarray:
        # (L, 1, ...) -> (L, ...): a view; on the CPU in float32, the array shares its memory.
        return out.trace.stacked[name][:, 0].to("cpu", torch.float32).numpy()

    concat = site("concat")
    return TraceArrays(
        text=text,
        labels=task.labels(text),
        interventions=iv,
        w_o_modes=[lt.w_o_mode for lt in layers],
        attn=site("attn"),
        z=heads_apart(torch.from_numpy(concat), layers[0].z.shape[1]).numpy(),  # a view
        concat=concat,
        attn_out=site("attn_out"),
        resid_mid=site("resid_mid"),
        resid_out=site("resid_out"),
        b_o=stack(lt.b_o for lt in layers),
        prediction=prediction,
        answer=task.solve_tokens(text),
        **next_tokens,
        output=None if cfg.n_out else out.logits[0].to("cpu", torch.float32).numpy(),
    )


TOP_K = 5  # next tokens kept per position of a decoder's trace


def top_next(logits: torch.Tensor, k: int = TOP_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The k likeliest next tokens at every position of logits (..., V): their ids and softmax
    probabilities (..., k), best first.

    The k largest logits, then their probabilities from the log of the softmax's normaliser: no
    (..., V) array of probabilities is made (at 256 tokens of a 152k vocabulary, one in float64
    cost more than a tenth of the traced forward).
    """
    k = min(k, logits.shape[-1])
    if logits.dim() < 2 or logits.shape[-2] <= ROWS_AT_ONCE:
        top = logits.topk(k, dim=-1)
        return top.indices, (top.values - torch.logsumexp(logits, dim=-1, keepdim=True)).exp()
    # A few positions at a time (each row's answer does not depend on the others): logsumexp's
    # (..., V) temporaries then stay small and in cache; on the whole (256, 49,152) logits of a
    # Llama-sized model they took several times as long as in chunks (bench/hf_decoders.py).
    parts = [top_next(rows, k) for rows in logits.split(ROWS_AT_ONCE, dim=-2)]
    return torch.cat([i for i, _ in parts], dim=-2), torch.cat([p for _, p in parts], dim=-2)


ROWS_AT_ONCE = 16


@torch.no_grad()  # an answer to show: its products are written in place (out=)
def head_top_next(
    hidden: torch.Tensor, head: torch.nn.Linear, k: int = TOP_K
) -> tuple[torch.Tensor, torch.Tensor]:
    """top_next of the logits head(hidden) (..., V), made a chunk of the vocabulary at a time.

    Each chunk's logits (CHUNK_BYTES of them, in one buffer reused chunk after chunk) give
    their k best and their log-normaliser while in cache, and the chunks' answers are merged:
    the k best of the chunks' k best, and the log of the sum of their normalisers. The whole
    (T, V) logits (150 MB at 256 tokens of Qwen2's vocabulary) are never made.

    A chunk's logits are made PRODUCT_COLUMNS at a time, each product written in place into the
    chunk (mm or addmm with out=): here, for a 50k-150k vocabulary, products of 1,024 rows of the
    head were faster than one product over the whole vocabulary (bench/README.md), so
    the head with its top 5 and normaliser costs less than transformers' bare head.
    """
    W, b = head.weight, head.bias
    V, D = W.shape
    k = min(k, V)
    rows = hidden.reshape(-1, D)
    n = rows.shape[0]
    width = max(PRODUCT_COLUMNS, CHUNK_BYTES // (n * rows.element_size()) // PRODUCT_COLUMNS
                * PRODUCT_COLUMNS)  # fmt: skip
    buffer = rows.new_empty(n, min(width, V))
    values, ids, norms = [], [], []
    for start in range(0, V, width):
        end = min(start + width, V)
        logits = buffer[:, : end - start]
        for at in range(start, end, PRODUCT_COLUMNS):
            to = min(at + PRODUCT_COLUMNS, end)
            into = logits[:, at - start : to - start]
            if b is None:
                torch.mm(rows, W[at:to].t(), out=into)
            else:
                torch.addmm(b[at:to], rows, W[at:to].t(), out=into)
        top_values, top_ids = top_k_by_blocks(logits, min(k, end - start))
        values.append(top_values)
        ids.append(top_ids + start)
        # log sum exp, with the chunk's largest logit (its best) as the shift, computed in the
        # chunk's own buffer: no second (T, chunk) array and no pass to find the maximum.
        shift = top_values[:, :1]
        norms.append(logits.sub_(shift).exp_().sum(-1).log_() + shift[:, 0])
    best = torch.cat(values, dim=-1).topk(k, dim=-1)
    top_ids = torch.cat(ids, dim=-1).gather(-1, best.indices)
    log_norm = torch.logsumexp(torch.stack(norms, dim=-1), dim=-1, keepdim=True)
    shape = (*hidden.shape[:-1], k)
    return top_ids.view(shape), (best.values - log_norm).exp().view(shape)


PRODUCT_COLUMNS = 1024  # rows of the head per matrix product in head_top_next
CHUNK_BYTES = 4 << 20  # logits per chunk in head_top_next, at least one product's
BLOCK = 64  # logits per block in top_k_by_blocks


def top_k_by_blocks(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits.topk(k) along the last axis of (..., S), as (values, indices), from the k blocks
    of BLOCK logits with the largest maxima: the k best logits lie in those blocks (a block
    holding one of them has a maximum at least as large, and fewer than k other blocks can
    beat it). One vectorised pass for the maxima and topk over S / BLOCK of them and k * BLOCK
    candidates: faster than topk over the whole slice at a few hundred tokens."""
    S = logits.shape[-1]
    if S % BLOCK or S < k * BLOCK:
        top = logits.topk(k, dim=-1)
        return top.values, top.indices
    maxima = logits.unflatten(-1, (S // BLOCK, BLOCK)).amax(-1)
    blocks = maxima.topk(k, dim=-1).indices
    offsets = torch.arange(BLOCK, device=logits.device)
    where = (blocks.unsqueeze(-1) * BLOCK + offsets).flatten(-2)  # (..., k * BLOCK)
    top = logits.gather(-1, where).topk(k, dim=-1)
    return top.values, where.gather(-1, top.indices)


def _next_tokens(model, logits: torch.Tensor) -> dict:
    """A causal model's top next tokens at every position, for TraceArrays; {} otherwise."""
    cfg = model.config
    if not cfg.causal or not cfg.n_out:
        return {}
    return _next_token_arrays(*top_next(logits))


def _next_token_arrays(ids: torch.Tensor, probs: torch.Tensor) -> dict:
    """TraceArrays' next-token fields from top_next's answer."""
    return dict(
        causal=True,
        top_ids=ids.cpu().numpy(),
        top_probs=probs.to(torch.float32).cpu().numpy(),
    )


def cosine_per_token(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of a and b along the last axis (..., T, D) -> (..., T).

    A token where either vector is zero (e.g. W_o in "zero" mode) gets 0: no shared direction.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    dots = (a * b).sum(axis=-1)
    safe = np.where(norms > 1e-12, norms, 1.0)
    cos = np.where(norms > 1e-12, dots / safe, 0.0)
    return np.clip(cos, -1.0, 1.0).astype(np.float32)


def w_o_used(model, w_o_modes: Sequence[str]) -> np.ndarray:
    """(L, D, D) the map each layer applied in its mode (tfviz.core.wo), nn.Linear layout (out, in).
    Kept out of TraceArrays: it is the same for every sequence."""
    H = model.config.n_heads
    mats = []
    for layer, mode in zip(model.layers, w_o_modes, strict=True):
        lin = layer.attn.W_o
        mats.append(wo.effective(lin.weight.detach(), lin.bias.detach(), mode, H)[0])
    return torch.stack(mats).to("cpu", torch.float32).numpy()


def decomposition_error(trace: TraceArrays, W_o: np.ndarray, layer: int | None = None) -> float:
    """max |sum_h z_h W_o^h + b_o - attn_out| over tokens and dims (one layer, or all layers).

    attn_out comes from the model's own W_o; the sum is rebuilt here from z alone, so this checks
    the decomposition, and is about 1e-6 (float32 rounding).
    """
    layers = range(trace.n_layers) if layer is None else [layer]
    err = 0.0
    for lay in layers:
        terms = wo.head_contributions(trace.z[lay].astype(np.float64), W_o[lay].astype(np.float64))
        rebuilt = terms.sum(axis=0) + trace.b_o[lay]
        err = max(err, float(np.abs(rebuilt - trace.attn_out[lay]).max()))
    return err


def resid_cosine(base: TraceArrays, switched: TraceArrays) -> np.ndarray:
    """(L, T) cosine between the learned and the switched residual stream after each layer."""
    _same_input(base, switched)
    return cosine_per_token(base.resid_out, switched.resid_out)


def drift_per_layer(base: TraceArrays, switched: TraceArrays) -> np.ndarray:
    """(L,) cosine drift of the residual stream: 1 - mean over tokens of resid_cosine.

    0 means the switch changed nothing up to that layer; 1 means the directions became unrelated.
    """
    return (1.0 - resid_cosine(base, switched).mean(axis=-1)).astype(np.float32)


def _same_input(a: TraceArrays, b: TraceArrays) -> None:
    if a.text != b.text or a.resid_out.shape != b.resid_out.shape:
        raise ValueError("the two traces must come from the same model and the same sequence")


@dataclass(frozen=True)
class InputDiff:
    """How two sequences of the same length differ, head by head, through one model."""

    positions: list[int]  # where the inputs differ (0-based, over the model's positions)
    attn: np.ndarray  # (L, H, T, T) attention of b minus attention of a
    z: np.ndarray  # (L, H, T, d_k) each head's output, b - a (before W_o, per head)
    concat: np.ndarray  # (L, T, D) the heads side by side, b - a
    attn_out: np.ndarray  # (L, T, D) W_o's output, b - a
    head_terms: np.ndarray  # (L, H, T) ||z_h W_O^h (b) - z_h W_O^h (a)||: each head's change
    # after W_o, per token; sums of these bound ||attn_out diff|| (triangle inequality)


def diff_inputs(a: TraceArrays, b: TraceArrays, W_o: np.ndarray) -> InputDiff:
    """Per-head differences between two traces of one model with the same switches.

    Args:
        a, b: run_trace of two sequences with the same number of positions and switches.
        W_o: (L, D, D) the maps the layers applied (w_o_used), to split attn_out by head.
    Returns:
        InputDiff (b minus a). ValueError when the sequences differ in length or switches, or are
        the same sequence (nothing to compare).
    """
    if a.attn.shape != b.attn.shape:
        raise ValueError(
            f"the two sequences must have the same length to be compared position by position; "
            f"they have {a.attn.shape[-1]} and {b.attn.shape[-1]} positions"
        )
    if a.interventions != b.interventions:
        raise ValueError("the two traces must come from passes with the same switches")
    positions = [i for i, (x, y) in enumerate(zip(a.labels, b.labels, strict=True)) if x != y]
    if a.text == b.text:
        raise ValueError("the two sequences are the same: change at least one token")
    terms = [
        wo.head_contributions(b.z[lay], W_o[lay]) - wo.head_contributions(a.z[lay], W_o[lay])
        for lay in range(a.n_layers)
    ]
    return InputDiff(
        positions=positions,
        attn=(b.attn - a.attn).astype(np.float32),
        z=(b.z - a.z).astype(np.float32),
        concat=(b.concat - a.concat).astype(np.float32),
        attn_out=(b.attn_out - a.attn_out).astype(np.float32),
        head_terms=np.linalg.norm(np.stack(terms), axis=-1).astype(np.float32),
    )
