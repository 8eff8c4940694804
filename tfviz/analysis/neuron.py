"""The neuron view (BertViz's, Vig 2019): inside one head's attention for one query position.

For a layer, a head and a query token: the query vector q, every key vector k_j, their elementwise
product q * k_j (whose sum over dimensions is the dot product q . k_j), the scaled scores with the
masks applied, and the softmax over them, which is the head's attention row in the trace.

q and k are not kept by a trace, so they are made again from the layer's input (resid_pre) by the
layer's own pieces: its norm (pre-norm layers), the W_q and W_k projections, the heads' split,
the rotary turn (rotary models), the grouped-query key/value head a query head reads, and the
scores' scaling and masks (MultiHeadAttention.scaled_scores and mask_scores). Nothing of the
forward pass is written again, so what is shown is what the softmax read.

Dimensions: L layers, B batch, H query heads, T tokens, D = d_model, d_k = D / H.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz.core.functional import layer_norm, linear, rotate
from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task
from tfviz.core.trace import TraceArrays


@dataclass(frozen=True)
class NeuronView:
    """One head's attention for one query, laid out as BertViz's neuron view.

    Softmax over `scores` is `weights`, which equals the trace's attn[layer, head, query] (up to
    float32 rounding), causal and padding masks included. Vectors are float64 copies of the
    model's float32 ones; `scores` are the model's own scaled, masked products.
    """

    layer: int
    head: int  # the query head
    query: int  # the query position
    kv_head: int  # the key/value head this query head reads (grouped-query attention; = head
    # without it)
    rotated: bool  # q and k after the rotary turn (what the scores read); False before it, and
    # always for a model with learned positions (nothing turns there)
    labels: list[str]  # one per position (empty when the caller gave none)
    q: np.ndarray  # (d_k,) float64: the query vector
    k: np.ndarray  # (T, d_k) float64: every key vector of the key/value head
    product: np.ndarray  # (T, d_k) float64: q * k_j elementwise, each key's row
    dots: np.ndarray  # (T,) float64: q . k_j, product summed over d_k (before rotation when
    # rotated is False: then dots / sqrt(d_k) differ from the scores by the turn)
    scores: np.ndarray  # (T,) float64: q . k_j / sqrt(d_k) as the softmax read it (after the
    # turn), -inf at masked keys
    masked: np.ndarray  # (T,) bool: a key the query may not read (padding; after it, causal)
    weights: np.ndarray  # (T,) float64: softmax(scores); all 0 where every key is masked
    replaced: bool  # an intervention replaced this head's pattern (Interventions.patterns):
    # the trace then shows the pattern put in its place, not this softmax


@torch.no_grad()
def queries_and_keys(
    model: Transformer,
    layer: int,
    resid_pre: Tensor,
    rotary: tuple[Tensor, Tensor] | None,
    rotated: bool = True,
) -> tuple[Tensor, Tensor]:
    """The queries (B, H, T, d_k) and keys (B, n_kv, T, d_k) layer `layer` makes from its input
    resid_pre (B, T, D), with the layer's own norm, projections and head split; turned by the
    rotary angles (Transformer.embed_input's) unless rotated is False or rotary is None."""
    block = model.layers[layer]
    attn = block.attn
    x = layer_norm(resid_pre, block.norm1) if block.pre_norm else resid_pre
    q = attn.split_heads(linear(x, attn.W_q), None)
    k = attn.split_heads(linear(x, attn.W_k), None)
    if rotary is not None and rotated:
        q, k = rotate(q, *rotary), rotate(k, *rotary)
    return q, k


def neuron_view(
    model: Transformer,
    task: Task,
    text: str,
    layer: int,
    head: int,
    query: int,
    interventions: Interventions | None = None,
    *,
    rotated: bool = True,
) -> NeuronView:
    """The neuron view of one sequence under the switches (one traced forward pass).

    Args:
        model: a tfviz Transformer in eval mode (not changed).
        task: its task: validates, encodes and labels text as run_trace does.
        layer, head, query: the layer, query head and query position (BOS counted).
        interventions: the pass's switches; a switch in an earlier layer changes this layer's
            input, so its q and k.
        rotated: q and k after the rotary turn (True) or before it (rotary models only).
    Returns:
        NeuronView; ValueError for an index out of range.
    """
    text = task.validate(text)
    ids, pad_mask = task.encode_batch([text], device=model.device)
    return neuron_view_of_pass(
        model, ids, pad_mask, layer, head, query, interventions,
        rotated=rotated, labels=task.labels(text),
    )  # fmt: skip


@torch.no_grad()
def neuron_view_of_pass(
    model: Transformer,
    ids: Tensor,
    pad_mask: Tensor | None,
    layer: int,
    head: int,
    query: int,
    interventions: Interventions | None = None,
    *,
    row: int = 0,
    rotated: bool = True,
    labels: list[str] | None = None,
) -> NeuronView:
    """The neuron view of sequence `row` of a batch ids (B, T) with its pad_mask (B, T) (True at
    padding; a decoder's batch padded on the left), from one traced pass of the model."""
    out = model(ids, pad_mask, Interventions.of(interventions), trace=True)
    pad = out.trace.pad_mask  # None where nothing is padded, as the forward took it
    _check_index("row", row, ids.shape[0])
    _, rotary = model.embed_input(ids, pad, None)
    resid_pre = out.trace.layers[_check_index("layer", layer, len(model.layers))].resid_pre
    at = slice(row, row + 1)
    return _view(
        model, resid_pre[at], None if pad is None else pad[at], _row(rotary, at),
        (layer, head, query), rotated, _replaced(out.trace.interventions, layer, head),
        labels or [],
    )  # fmt: skip


@torch.no_grad()
def neuron_view_of_trace(
    model: Transformer,
    task: Task,
    trace: TraceArrays,
    layer: int,
    head: int,
    query: int,
    *,
    rotated: bool = True,
) -> NeuronView:
    """The neuron view from a trace already made (run_trace of this model and task): no second
    forward pass. Layer l's input is the trace's resid_out of layer l - 1; layer 0's is the
    embedding, made again by the model (Transformer.embed_input)."""
    ids, pad_mask = task.encode_batch([trace.text], device=model.device)
    if pad_mask is not None and not pad_mask.any():
        pad_mask = None  # as the forward pass takes an unpadded sequence
    if ids.shape[1] != trace.attn.shape[-1]:
        raise ValueError("the trace was made from another model or task: its lengths differ")
    embed, rotary = model.embed_input(ids, pad_mask, None)
    if _check_index("layer", layer, len(model.layers)) == 0:
        resid_pre = embed
    else:
        resid_pre = torch.from_numpy(trace.resid_out[layer - 1][None]).to(embed)
    return _view(
        model, resid_pre, pad_mask, rotary, (layer, head, query), rotated,
        _replaced(trace.interventions, layer, head), list(trace.labels),
    )  # fmt: skip


def _view(
    model: Transformer,
    resid_pre: Tensor,
    pad_mask: Tensor | None,
    rotary: tuple[Tensor, Tensor] | None,
    at: tuple[int, int, int],
    rotated: bool,
    replaced: bool,
    labels: list[str],
) -> NeuronView:
    """The NeuronView of one sequence's (1, T, D) layer input at (layer, head, query)."""
    cfg = model.config
    layer, head, query = at
    _check_index("head", head, cfg.n_heads)
    T = resid_pre.shape[1]
    _check_index("query", query, T)
    attn = model.layers[layer].attn
    q, k = queries_and_keys(model, layer, resid_pre, rotary)
    scores = attn.scaled_scores(q, k)  # (1, H, T, T): the product the model's softmax reads
    attn.mask_scores(scores, pad_mask)
    shown_q, shown_k = (
        (q, k) if rotated else queries_and_keys(model, layer, resid_pre, rotary, False)
    )
    kv_head = cfg.kv_head(head)
    q_vec = _f64(shown_q[0, head, query])  # (d_k,)
    k_vecs = _f64(shown_k[0, kv_head])  # (T, d_k)
    product = q_vec[None, :] * k_vecs
    row = _f64(scores[0, head, query])
    masked = np.zeros(T, dtype=bool) if pad_mask is None else pad_mask[0].cpu().numpy().copy()
    if cfg.causal:
        masked[query + 1 :] = True
    return NeuronView(
        layer=layer,
        head=head,
        query=query,
        kv_head=kv_head,
        rotated=rotated and rotary is not None,
        labels=labels,
        q=q_vec,
        k=k_vecs,
        product=product,
        dots=product.sum(-1),
        scores=row,
        masked=masked,
        weights=softmax_masked(row),
        replaced=replaced,
    )


def softmax_masked(scores: np.ndarray) -> np.ndarray:
    """softmax over the last axis in float64, -inf scores getting 0; a row with every score -inf
    gets 0 throughout (the model's query with every key padded attends to nothing)."""
    s = np.asarray(scores, dtype=np.float64)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)  # exp(-inf) = 0
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _f64(t: Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def _row(rotary: tuple[Tensor, Tensor] | None, at: slice) -> tuple[Tensor, Tensor] | None:
    """One sequence's rotary angles (cos and signed sin are (B, 1, T, d_k))."""
    return None if rotary is None else (rotary[0][at], rotary[1][at])


def _replaced(iv: Interventions, layer: int, head: int) -> bool:
    return any(lay == layer and h == head for lay, h, _ in iv.patterns)


def _check_index(name: str, value: int, size: int) -> int:
    """value if 0 <= value < size, else ValueError naming the range."""
    if not isinstance(value, int | np.integer) or not 0 <= value < size:
        raise ValueError(f"{name} must be from 0 to {size - 1}, got {value!r}")
    return int(value)
