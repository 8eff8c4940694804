"""Numbers that look past raw attention: what each head writes, and what W_o does with it.

Raw attention weights say where a head looks, not what it writes into the residual stream: that
also depends on the values it reads and on the output projection W_o. Each function here computes
one published way of measuring that, from a model and/or a Trace, and returns float32 numpy arrays
(or small frozen dataclasses of them) for tfviz.plots to draw:

1. norm-based attention ||alpha_ij^h f^h(x_j)||           Kobayashi et al., EMNLP 2020
2. attention rollout (raw and norm-based)                   Abnar & Zuidema, ACL 2020
3. head importance by ablation and by gate gradients        Michel et al., NeurIPS 2019
4. ablating a head before W_o versus after it               (the teaching point of this tool)
5. OV circuits W_V^h W_O^h, effective rank, composition     Elhage et al. 2021; Roy & Vetterli 2007
6. how W_o mixes heads into each output dimension

Nothing here changes the model: it is shared by every browser session, so interventions go
through Encoder.forward's arguments (w_o, ablate_heads, head_gates, ablate_after_w_o), never
hooks or weight edits, and weights keep requires_grad=False. Model weights follow nn.Linear's
layout (out, in), applied as x @ W.T; per-head matrices below use the papers' row-vector
convention instead: W_V^h is (D, d_k), W_O^h is (d_k, D), and a head's output is z_h @ W_O^h.

Dimensions: L layers, B batch, H heads, T tokens, D = d_model, d_k = D / H.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz import wo
from tfviz.model import Encoder, LayerTrace, Trace, layer_modes
from tfviz.tasks import Batch, Task, get_task

ANALYSIS_SEED = 3_000_017  # examples for importance/ablation: fresh, and apart from EVAL_SEED


# ---- shared helpers ------------------------------------------------------------------------------
def _np(x: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float32)


def _check_trace(model: Encoder, trace: Trace) -> None:
    if not isinstance(trace, Trace) or any(lt is None for lt in trace.layers):
        raise ValueError("a Trace from model(ids, trace=True) is needed")
    if len(trace.layers) != model.config.n_layers:
        raise ValueError(
            f"the trace has {len(trace.layers)} layers but the model {model.config.n_layers}: "
            f"was it made by another model?"
        )


def _check_eval(model: Encoder) -> None:
    # Dropout would make every number below random, and switching modes would mutate a shared model.
    if model.training:
        raise ValueError("the model is in training mode; analyse a model after model.eval()")


def _sample(
    task: Task, n: int, seed: int, min_len: int | None, max_len: int | None, device
) -> Batch:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n (number of examples) must be a positive integer, got {n!r}")
    b = task.sample(n, np.random.default_rng(seed), min_len, max_len)
    return Batch(b.ids.to(device), b.pad_mask.to(device), b.target.to(device), b.lengths)


def _metric(task: Task, logits: Tensor, target: Tensor) -> float:
    """The task's headline metric (as tfviz.evaluate reports it) on one batch."""
    s = task.score(logits.cpu(), target.cpu())
    total = s["abs_err"] if task.kind == "regress" else s["correct"]
    return total / max(1, s["count"])


def heads_of(model: Encoder) -> Iterable[tuple[int, int]]:
    """Every (layer, head) pair of a model, layer-major."""
    return ((l, h) for l in range(model.config.n_layers) for h in range(model.config.n_heads))


def _w_o_of(model: Encoder, layer: int, mode: str) -> Tensor:
    """The (D, D) map a layer applies in a W_o mode (tfviz.wo), nn.Linear layout (out, in)."""
    lin = model.layers[layer].attn.W_o
    return wo.effective(lin.weight.detach(), lin.bias.detach(), mode, model.config.n_heads)[0]


# ---- 1. norm-based attention (Kobayashi et al. 2020) ---------------------------------------------
def transformed_values(lt: LayerTrace) -> Tensor:
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head and token, shape (B, H, T, D).

    Uses the trace's values (bias included) and the W_o the layer actually applied (so it follows
    the w_o switch), times the gate the head carried in that pass (0 for an ablated head).
    """
    f = wo.head_contributions(lt.v, lt.W_o)  # v_h W_O^h: the same algebra as z_h W_O^h
    if lt.head_gate is not None:
        f = f * lt.head_gate.view(1, -1, 1, 1)
    return f


def norm_attention(model: Encoder, trace: Trace) -> np.ndarray:
    """Per-head norm-based attention ||alpha_ij^h f^h(x_j)|| (Kobayashi et al., EMNLP 2020).

    Args:
        model: the model that made the trace (checked against it).
        trace: Trace of a forward pass in eval mode; any w_o mode and head ablation.
    Returns:
        (L, B, H, T, T) float32: [l, b, h, i, j] is the length of the vector head h of layer l
        moves from token j into token i (through W_o). Summed over j with signs (as vectors),
        these terms give head_contributions(); padded keys get 0.
    """
    _check_trace(model, trace)
    out = []
    for lt in trace.layers:
        lengths = transformed_values(lt).norm(dim=-1)  # (B, H, T): ||f^h(x_j)||
        out.append(lt.attn * lengths[:, :, None, :])  # alpha >= 0: ||alpha f|| = alpha ||f||
    return _np(torch.stack(out))


def norm_attention_summed(model: Encoder, trace: Trace) -> np.ndarray:
    """Layer-level norm-based attention ||sum_h alpha_ij^h f^h(x_j)|| (Kobayashi et al. 2020).

    Args:
        model: the model that made the trace.
        trace: Trace of a forward pass in eval mode.
    Returns:
        (L, B, T, T) float32: the length of everything token j sends to token i through all heads
        and W_o together (W_o's bias excluded: it depends on no token).
    """
    _check_trace(model, trace)
    out = []
    for lt in trace.layers:
        f = transformed_values(lt)  # (B, H, T, D)
        vectors = torch.einsum("bhij,bhjd->bijd", lt.attn, f)  # (B, T, T, D): sum over heads
        out.append(vectors.norm(dim=-1))
    return _np(torch.stack(out))


# ---- 2. attention rollout (Abnar & Zuidema 2020) -------------------------------------------------
@torch.no_grad()
def attention_flow(
    model: Encoder, task: Task | str, text: str, **switches
) -> dict[str, np.ndarray]:
    """Norm-based attention and rollout of one typed sequence, batch dimension dropped.

    Args:
        model: the encoder (not changed); task: its task; text: the typed sequence.
        switches: forward arguments (w_o, ablate_heads) applied to the traced pass.
    Returns:
        {"norm": (L, H, T, T), "norm_summed": (L, T, T), "rollout_raw": (L, T, T),
         "rollout_norm": (L, T, T)}, float32.
    """
    task = get_task(task) if isinstance(task, str) else task
    ids, pad_mask = task.encode_batch([text], device=model.device)
    trace = model(ids, pad_mask, trace=True, **switches).trace
    return {
        "norm": norm_attention(model, trace)[:, 0],
        "norm_summed": norm_attention_summed(model, trace)[:, 0],
        "rollout_raw": rollout_from_trace(model, trace, "raw")[:, 0],
        "rollout_norm": rollout_from_trace(model, trace, "norm")[:, 0],
    }


def normalise_rows(weights: np.ndarray | Tensor) -> np.ndarray:
    """Each row divided by its sum; all-zero rows stay zero (no NaN). Same shape, float32."""
    w = np.asarray(_np(weights), dtype=np.float64)
    sums = w.sum(axis=-1, keepdims=True)
    return np.divide(w, sums, out=np.zeros_like(w), where=sums > 0).astype(np.float32)


def attention_rollout(weights: np.ndarray | Tensor) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 'Quantifying Attention Flow in Transformers', ACL 2020).

    A_hat_l = 0.5 A_l + 0.5 I with rows renormalised (the identity stands for the residual
    connection), then rollout_0 = A_hat_0 and rollout_l = A_hat_l @ rollout_{l-1}.

    Args:
        weights: (L, B, T, T) attention per layer, heads already combined (e.g. averaged), rows
            indexed by query. Rows need not sum to 1; an all-zero row (a query that attends to
            nothing, e.g. an all-padding example) becomes the identity row after the residual
            mix, so no NaN appears.
    Returns:
        (L, B, T, T) float32: layer l is the rollout through layers 0..l; every row sums to 1.
    """
    w = np.asarray(_np(weights), dtype=np.float64)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"weights must have shape (L, B, T, T), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("attention weights must be finite and non-negative")
    T = w.shape[-1]
    a_hat = 0.5 * w + 0.5 * np.eye(T)
    a_hat /= a_hat.sum(axis=-1, keepdims=True)  # >= 0.5 on the diagonal, so never zero
    out = np.empty_like(a_hat)
    out[0] = a_hat[0]
    for layer in range(1, w.shape[0]):
        out[layer] = a_hat[layer] @ out[layer - 1]
    return out.astype(np.float32)


def rollout_from_trace(model: Encoder, trace: Trace, method: str = "raw") -> np.ndarray:
    """Attention rollout of a traced pass, from raw or from norm-based weights.

    Args:
        model, trace: as for norm_attention.
        method: "raw" averages the heads' attention weights (Abnar & Zuidema); "norm" uses
            norm_attention_summed with each row normalised to sum 1 (Kobayashi et al.'s weights).
    Returns:
        (L, B, T, T) float32, as attention_rollout.
    """
    _check_trace(model, trace)
    if method == "raw":
        weights = _np(torch.stack([lt.attn.mean(dim=1) for lt in trace.layers]))
    elif method == "norm":
        weights = normalise_rows(norm_attention_summed(model, trace))
    else:
        raise ValueError(f"method must be 'raw' or 'norm', got {method!r}")
    return attention_rollout(weights)


# ---- 3. head importance (Michel et al. 2019) -----------------------------------------------------
@dataclass(frozen=True)
class HeadImportance:
    """Per-head importance on fresh examples; arrays are (L, H) float32."""

    metric: str  # "token_accuracy", "accuracy" or "mae" (the task's headline metric)
    higher_is_better: bool  # True for accuracies, False for MAE
    base_loss: float
    base_metric: float
    loss_change: np.ndarray  # loss with the head ablated before W_o, minus base_loss
    metric_change: np.ndarray  # metric with the head ablated, minus base_metric
    gradient: np.ndarray  # Michel et al.: mean over examples of |dL/d xi_h|
    n: int
    seed: int

    def scores(self, kind: str) -> np.ndarray:
        """(L, H) float32 where higher means more important: kind "loss", "metric" or "gradient"."""
        if kind == "loss":
            return self.loss_change
        if kind == "metric":
            return -self.metric_change if self.higher_is_better else self.metric_change
        if kind == "gradient":
            return self.gradient
        raise ValueError(f"kind must be 'loss', 'metric' or 'gradient', got {kind!r}")


def _forward(model: Encoder, batch: Batch, **switches) -> Tensor:
    with torch.no_grad():
        return model(batch.ids, batch.pad_mask, trace=False, **switches).logits


def gate_gradients(model: Encoder, task: Task, batch: Batch, w_o="learned") -> np.ndarray:
    """Per-example dL/d xi for the (L, H) head gates at xi = 1, shape (B, L, H) float32.

    Michel et al. average |dL/d xi| over examples, which needs one gradient per example (the
    gradient of the batch mean would let examples cancel), so each example gets its own backward
    pass. Only the gate tensor requires grad: it enters through Encoder.forward's head_gates
    argument, and the model's weights keep requires_grad=False. (torch.func.vmap cannot batch
    this: the forward pass branches on the padding mask; forward-mode AD could, but its first use
    in a process costs seconds of set-up.)
    """
    cfg = model.config
    grads = torch.empty(len(batch.ids), cfg.n_layers, cfg.n_heads)
    for i in range(len(batch.ids)):
        gates = torch.ones(cfg.n_layers, cfg.n_heads, device=model.device, requires_grad=True)
        one = slice(i, i + 1)
        logits = model(
            batch.ids[one], batch.pad_mask[one], w_o=w_o, head_gates=gates, trace=False
        ).logits
        loss = task.loss(logits, batch.target[one])
        if not loss.requires_grad:  # W_o zeroed in every layer: no gate reaches the loss
            grads[i] = 0.0
            continue
        (grad,) = torch.autograd.grad(loss, gates)
        grads[i] = grad.cpu()
    return _np(grads)


def head_importance(
    model: Encoder,
    task: Task | str,
    n: int = 256,
    seed: int = ANALYSIS_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    w_o="learned",
) -> HeadImportance:
    """Importance of every head: ablation effect on loss and metric, and Michel et al.'s score.

    Args:
        model: a model in eval mode (never changed).
        task: the task (or its name) the model was trained on.
        n, seed, min_len, max_len: the fresh examples (task.sample with rng seed).
        w_o: the w_o switch for every pass (as Encoder.forward).
    Returns:
        HeadImportance with (L, H) arrays loss_change, metric_change and gradient.
    """
    _check_eval(model)
    task = get_task(task) if isinstance(task, str) else task
    task.check_config(model.config)
    batch = _sample(task, n, seed, min_len, max_len, model.device)
    logits = _forward(model, batch, w_o=w_o)
    base_loss = task.loss(logits, batch.target).item()
    base_metric = _metric(task, logits, batch.target)
    L, H = model.config.n_layers, model.config.n_heads
    loss_change = np.zeros((L, H), np.float32)
    metric_change = np.zeros((L, H), np.float32)
    for layer in range(L):
        for head in range(H):
            ablated = _forward(model, batch, w_o=w_o, ablate_heads=[(layer, head)])
            loss_change[layer, head] = task.loss(ablated, batch.target).item() - base_loss
            metric_change[layer, head] = _metric(task, ablated, batch.target) - base_metric
    gradient = np.abs(gate_gradients(model, task, batch, w_o)).mean(axis=0)
    return HeadImportance(
        metric=task.metric,
        higher_is_better=task.kind != "regress",
        base_loss=base_loss,
        base_metric=base_metric,
        loss_change=loss_change,
        metric_change=metric_change,
        gradient=gradient.astype(np.float32),
        n=n,
        seed=seed,
    )


def top_k_heads(scores: np.ndarray, k: int) -> list[tuple[int, int]]:
    """The k (layer, head) pairs with the highest scores; ties go to the lower index."""
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be an (L, H) array, got shape {scores.shape}")
    if not isinstance(k, (int, np.integer)) or not 0 <= k <= scores.size:
        raise ValueError(f"k must be an integer in 0..{scores.size}, got {k!r}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    order = np.argsort(-scores.ravel(), kind="stable")[:k]
    return [divmod(int(i), scores.shape[1]) for i in order]


def ranked_keys(weights: np.ndarray, query: int, k: int) -> list[tuple[int, float]]:
    """Which tokens one token attends to, strongest first: the k (key position, weight) pairs
    of row `query` of a (T, T) attention map; ties go to the earlier key. For long inputs, where
    a row of hundreds of cells cannot be read off a heatmap."""
    weights = np.asarray(weights)
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1]:
        raise ValueError(f"weights must be a (T, T) attention map, got shape {weights.shape}")
    T = weights.shape[0]
    if not 0 <= query < T:
        raise ValueError(f"query must be a position in 0..{T - 1}, got {query!r}")
    row = weights[query]
    order = np.argsort(-row, kind="stable")[: max(0, min(k, T))]
    return [(int(j), float(row[j])) for j in order]


def accuracy_keeping_top_k(
    model: Encoder,
    task: Task | str,
    scores: np.ndarray,
    k: int,
    n: int = 256,
    seed: int = ANALYSIS_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    w_o="learned",
) -> float:
    """The task metric left when only the k highest-scoring heads are kept (Michel et al. 2019).

    Args:
        scores: (L, H), higher = more important (e.g. HeadImportance.scores("gradient")).
        k: heads kept, 0..L*H; every other head is ablated before W_o.
        n, seed, min_len, max_len, w_o: as head_importance.
    Returns:
        The metric on the fresh examples: accuracy (token accuracy for token tasks), or the MAE
        for the regression task (lower is better there).
    """
    _check_eval(model)
    task = get_task(task) if isinstance(task, str) else task
    cfg = model.config
    task.check_config(cfg)
    if np.shape(scores) != (cfg.n_layers, cfg.n_heads):
        raise ValueError(f"scores must have shape ({cfg.n_layers}, {cfg.n_heads})")
    kept = set(top_k_heads(scores, k))
    removed = [pair for pair in heads_of(model) if pair not in kept]
    batch = _sample(task, n, seed, min_len, max_len, model.device)
    return _metric(task, _forward(model, batch, w_o=w_o, ablate_heads=removed), batch.target)


def keep_top_k_curve(model: Encoder, task: Task | str, scores: np.ndarray, **kwargs) -> np.ndarray:
    """accuracy_keeping_top_k for every k = 0..L*H, shape (L*H + 1,) float32 (a slider's curve)."""
    n_heads = model.config.n_layers * model.config.n_heads
    return np.array(
        [accuracy_keeping_top_k(model, task, scores, k, **kwargs) for k in range(n_heads + 1)],
        dtype=np.float32,
    )


# ---- 4. ablation before W_o versus after it ------------------------------------------------------
@dataclass(frozen=True)
class AblationComparison:
    """One head removed two ways: before W_o (right) and after it (the common mistake)."""

    layer: int
    head: int
    metric: str
    higher_is_better: bool
    base_metric: float
    metric_before: float  # head's slice of concat zeroed (ablate_heads)
    metric_after: float  # same slice of W_o's output zeroed (ablate_after_w_o)
    base_loss: float
    loss_before: float
    loss_after: float
    attn_out_change_before: np.ndarray  # (B, T) ||attn_out - base|| at the layer; 0 at padding
    attn_out_change_after: np.ndarray  # (B, T)
    attn_out_gap: np.ndarray  # (B, T) ||attn_out_before - attn_out_after||
    logits_change_before: np.ndarray  # (B,) ||logits - base||, averaged over real positions
    logits_change_after: np.ndarray  # (B,)
    logits_gap: np.ndarray  # (B,) ||logits_before - logits_after||
    prediction_changed_before: float  # share of answers (tokens or sequences) that changed
    prediction_changed_after: float
    removed_share_after: np.ndarray  # (H,) share of each head's output energy the after-W_o zeroing
    # removes (before W_o this is 1 for the head and 0 for the rest)

    @property
    def metric_difference(self) -> float:
        """metric_after - metric_before: what the mistake gets wrong about the head's role."""
        return self.metric_after - self.metric_before

    @property
    def loss_difference(self) -> float:
        return self.loss_after - self.loss_before


def compare_ablation(
    model: Encoder,
    task: Task | str,
    layer: int,
    head: int,
    batch: Batch | None = None,
    n: int = 256,
    seed: int = ANALYSIS_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    w_o="learned",
) -> AblationComparison:
    """Remove head (layer, head) before W_o and after it, and measure both effects.

    Args:
        model: a model in eval mode.
        task: its task (or name).
        layer, head: the head.
        batch: examples to use (e.g. task.batch_from_texts([text])), else n fresh ones drawn as
            in head_importance (seed, min_len, max_len).
        w_o: the w_o switch for all three passes.
    Returns:
        AblationComparison; its (B, T) and (B,) arrays follow the batch's examples.
    """
    _check_eval(model)
    task = get_task(task) if isinstance(task, str) else task
    cfg = model.config
    task.check_config(cfg)
    if not (isinstance(layer, int) and 0 <= layer < cfg.n_layers):
        raise ValueError(f"layer must be in 0..{cfg.n_layers - 1}, got {layer!r}")
    if not (isinstance(head, int) and 0 <= head < cfg.n_heads):
        raise ValueError(f"head must be in 0..{cfg.n_heads - 1}, got {head!r}")
    if batch is None:
        batch = _sample(task, n, seed, min_len, max_len, model.device)
    else:
        batch = Batch(
            batch.ids.to(model.device),
            batch.pad_mask.to(model.device),
            batch.target.to(model.device),
            batch.lengths,
        )
    pair = [(layer, head)]
    with torch.no_grad():
        base = model(batch.ids, batch.pad_mask, w_o=w_o)
        before = model(batch.ids, batch.pad_mask, w_o=w_o, ablate_heads=pair)
        after = model(batch.ids, batch.pad_mask, w_o=w_o, ablate_after_w_o=pair)
    real = (~batch.pad_mask).to(torch.float32)  # (B, T)
    a0, a1, a2 = (o.trace.layers[layer].attn_out for o in (base, before, after))

    def token_change(x: Tensor, y: Tensor) -> np.ndarray:
        return _np((x - y).norm(dim=-1) * real)

    def logit_change(x: Tensor, y: Tensor) -> np.ndarray:
        d = (x - y).norm(dim=-1)
        if d.dim() == 2:  # token task: average over the real positions of each example
            d = (d * real).sum(1) / real.sum(1).clamp_min(1.0)
        return _np(d)

    def changed(x: Tensor, y: Tensor) -> float:
        px, py = task.output_classes(x), task.output_classes(y)
        if task.kind == "regress":  # answers are rounded sums
            px, py = torch.round(px * task.scale), torch.round(py * task.scale)
        diff = px != py
        if diff.dim() == 2:
            keep = real.bool()
            if task.bos:
                keep[:, 0] = False  # BOS has no answer
            return diff[keep].float().mean().item() if keep.any() else 0.0
        return diff.float().mean().item()

    # Share of each head's term z_h W_o^h that lies in the zeroed output dims (real tokens only).
    contrib = base.trace.layers[layer].head_contributions()  # (B, H, T, D)
    energy = (contrib**2).sum(-1) * real[:, None, :]  # (B, H, T)
    dims = slice(head * cfg.d_k, (head + 1) * cfg.d_k)
    in_slice = (contrib[..., dims] ** 2).sum(-1) * real[:, None, :]
    total = energy.sum(dim=(0, 2))
    removed = torch.where(total > 0, in_slice.sum(dim=(0, 2)) / total.clamp_min(1e-30), 0.0)

    t = batch.target
    return AblationComparison(
        layer=layer,
        head=head,
        metric=task.metric,
        higher_is_better=task.kind != "regress",
        base_metric=_metric(task, base.logits, t),
        metric_before=_metric(task, before.logits, t),
        metric_after=_metric(task, after.logits, t),
        base_loss=task.loss(base.logits, t).item(),
        loss_before=task.loss(before.logits, t).item(),
        loss_after=task.loss(after.logits, t).item(),
        attn_out_change_before=token_change(a1, a0),
        attn_out_change_after=token_change(a2, a0),
        attn_out_gap=token_change(a1, a2),
        logits_change_before=logit_change(before.logits, base.logits),
        logits_change_after=logit_change(after.logits, base.logits),
        logits_gap=logit_change(before.logits, after.logits),
        prediction_changed_before=changed(before.logits, base.logits),
        prediction_changed_after=changed(after.logits, base.logits),
        removed_share_after=_np(removed),
    )


# ---- 5. OV circuits and composition (Elhage et al. 2021) -----------------------------------------
def head_block(W: Tensor | np.ndarray, head: int, n_heads: int, side: str) -> np.ndarray:
    """Head h's part of a D x D nn.Linear weight (out, in), in row-vector convention.

    side="in": for W_q/W_k/W_v, whose *outputs* h*d_k..(h+1)*d_k belong to head h: returns
    W[rows].T, shape (D, d_k), so x @ result is head h's query/key/value.
    side="out": for W_o, whose *inputs* from head h are columns h*d_k..: returns W[:, cols].T,
    shape (d_k, D), so z_h @ result is head h's term of attn_out.
    """
    W = np.asarray(_np(W), dtype=np.float64)
    if side == "in":
        d_k = W.shape[0] // n_heads
        return W[head * d_k : (head + 1) * d_k, :].T
    if side == "out":
        return wo.head_block(W, head, n_heads)
    raise ValueError(f"side must be 'in' or 'out', got {side!r}")


def ov_matrix(W_v: Tensor | np.ndarray, W_o: Tensor | np.ndarray, head: int, n_heads: int):
    """W_OV^h = W_V^h W_O^h, (D, D) float64, from nn.Linear weights of W_v and W_o.

    x @ W_OV^h is what head h writes (bias aside) for a token x it attends to with weight 1.
    """
    return head_block(W_v, head, n_heads, "in") @ head_block(W_o, head, n_heads, "out")


def singular_values(M: np.ndarray) -> np.ndarray:
    """Singular values of a matrix, largest first (float64 for the rank tests)."""
    return np.linalg.svd(np.asarray(M, dtype=np.float64), compute_uv=False)


def effective_rank(s: np.ndarray) -> float:
    """Entropy effective rank (Roy & Vetterli, 'The effective rank: a measure of effective
    dimensionality', EUSIPCO 2007): exp(-sum p_i log p_i) with p = s / sum(s).

    1 for a rank-1 matrix, r for r equal singular values; 0 for the zero matrix.
    """
    s = np.abs(np.asarray(s, dtype=np.float64))
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def numerical_rank(s: np.ndarray, rtol: float = 0.01) -> int:
    """How many singular values exceed rtol times the largest (default: 1% of it)."""
    s = np.abs(np.asarray(s, dtype=np.float64))
    if s.size == 0 or s.max() <= 0:
        return 0
    return int((s > rtol * s.max()).sum())


@dataclass(frozen=True)
class OVSpectra:
    """What the spectrum of every head's OV circuit says, without the (D, D) circuits."""

    singular_values: np.ndarray  # (L, H, d_k) the top d_k (the rest are 0: rank <= d_k)
    effective_rank: np.ndarray  # (L, H) Roy & Vetterli entropy effective rank, 0..d_k
    numerical_rank: np.ndarray  # (L, H) int: singular values above rtol * the largest
    frobenius: np.ndarray  # (L, H) ||W_OV^h||_F: how strongly the head can write
    rtol: float


@dataclass(frozen=True)
class OVCircuits(OVSpectra):
    """The OV circuit of every head and what its spectrum says."""

    ov: np.ndarray  # (L, H, D, D) W_V^h W_O^h, row-vector convention


# The weights-only numbers below (OV spectra, composition) are computed in torch, float64, on
# the CPU: the app limits torch to one thread per kernel (tfviz.jobs.limit_torch_threads), while
# numpy's OpenBLAS starts a thread per core for every small product and QR; on a loaded 2-core
# server those threads wait on each other, and the same numbers took 4.5 s instead of 0.5 s.
def _f64(W: Tensor) -> Tensor:
    return W.detach().to("cpu", torch.float64)


def _ov_factors(model: Encoder, w_o="learned") -> list[tuple[Tensor, Tensor]]:
    """Per layer (V, O): V (H, D, d_k) every head's W_V^h and O (H, d_k, D) its W_O^h in the
    layer's W_o mode, float64 CPU tensors, so that W_OV^h = V[h] @ O[h]."""
    cfg = model.config
    modes = layer_modes(w_o, cfg.n_layers)
    H, D, d_k = cfg.n_heads, cfg.d_model, cfg.d_k
    factors = []
    for layer in range(cfg.n_layers):
        W_v = _f64(model.layers[layer].attn.W_v.weight)  # (D, D): head h's rows h*d_k..
        V = W_v.reshape(H, d_k, D).transpose(1, 2)  # (H, D, d_k): each head's rows, .T
        O = wo.head_blocks(_f64(_w_o_of(model, layer, modes[layer])), H)  # (H, d_k, D)
        factors.append((V, O.contiguous()))
    return factors


def _reduced(V: Tensor, O: Tensor) -> Tensor:
    """(H, d_k, D) A[h] = R[h] @ O[h], where V[h] = Q[h] R[h] (reduced QR, Q with orthonormal
    columns), so that ||V[h] @ O[h] @ M||_F = ||A[h] @ M||_F for every M, and the nonzero
    singular values of W_OV^h = V[h] O[h] are those of A[h].

    Why: W_OV^h is D x D (384 x 384 for MiniLM) but of rank <= d_k; its SVD per head cost
    seconds for 72 heads (a minute on a loaded 2-core server), while A[h] is d_k x D. Exact in
    algebra; the float64 results agree with the full SVD to ~1e-13 relative.
    """
    R = torch.linalg.qr(V, mode="r").R  # (H, d_k, d_k)
    return R @ O


def ov_spectra(model: Encoder, w_o="learned", rtol: float = 0.01) -> OVSpectra:
    """The singular values, ranks and norms of every head's OV circuit, for the w_o switch,
    without forming the (L, H, D, D) circuits (see _reduced).

    Args:
        model: any Encoder (read, never changed).
        w_o: "learned", "identity", "zero" or {layer: mode}, as Encoder.forward.
        rtol: threshold of numerical_rank, relative to the largest singular value.
    Returns:
        OVSpectra with arrays of shapes (L, H, d_k) and (L, H), float32 (ranks int64).
    """
    cfg = model.config
    L, H, d_k = cfg.n_layers, cfg.n_heads, cfg.d_k
    with torch.no_grad():
        reduced = [_reduced(V, O) for V, O in _ov_factors(model, w_o)]  # L x (H, d_k, D)
        sv = torch.stack([torch.linalg.svdvals(A)[:, :d_k] for A in reduced]).numpy()
        fro = torch.stack([torch.linalg.matrix_norm(A) for A in reduced]).numpy()  # (L, H)
    eff = np.array([[effective_rank(s) for s in row] for row in sv]).reshape(L, H)
    num = np.array([[numerical_rank(s, rtol) for s in row] for row in sv], dtype=np.int64)
    return OVSpectra(
        singular_values=sv.astype(np.float32),
        effective_rank=eff.astype(np.float32),
        numerical_rank=num.reshape(L, H),
        frobenius=fro.astype(np.float32),
        rtol=rtol,
    )


def ov_circuits(model: Encoder, w_o="learned", rtol: float = 0.01) -> OVCircuits:
    """OV circuits of every head, with the W_o each layer applies for the w_o switch.

    Args:
        model: any Encoder.
        w_o: "learned", "identity", "zero" or {layer: mode}, as Encoder.forward.
        rtol: threshold of numerical_rank, relative to the largest singular value.
    Returns:
        OVCircuits: ov_spectra's arrays and the circuits themselves, (L, H, D, D) float32
        (for MiniLM 42 MB: the views ask ov_spectra, which does not form them).
    """
    spectra = ov_spectra(model, w_o, rtol)
    with torch.no_grad():
        ov = torch.stack([V @ O for V, O in _ov_factors(model, w_o)])  # (L, H, D, D)
    return OVCircuits(**vars(spectra), ov=ov.numpy().astype(np.float32))


def composition_score(writer: np.ndarray, reader: np.ndarray) -> float:
    """||writer @ reader||_F / (||writer||_F ||reader||_F), in [0, 1]; 0 if either is zero.

    writer: (D, D) a head's OV circuit (row-vector convention); reader: (D, k) the matrix a later
    head reads the residual stream with (its W_Q^g, W_K^g or W_V^g). 1 means everything the
    writer can write lies where the reader looks (and both are rank-1 aligned); 0 means the
    reader is blind to it.
    """
    writer, reader = np.asarray(writer, np.float64), np.asarray(reader, np.float64)
    denom = np.linalg.norm(writer) * np.linalg.norm(reader)
    return float(np.linalg.norm(writer @ reader) / denom) if denom > 0 else 0.0


@dataclass(frozen=True)
class Composition:
    """Composition scores from each head of layer l to each head of layer l + 1."""

    q: np.ndarray  # (L-1, H, H): [l, h, g] head h of layer l into the query of head g of l+1
    k: np.ndarray  # (L-1, H, H) into its key
    v: np.ndarray  # (L-1, H, H) into its value
    baseline: float  # what unrelated random matrices score: about 1/sqrt(D)
    fold_layernorm: bool


def layernorm_fold(model: Encoder, layer: int) -> np.ndarray:
    """(D, D) linear part of the LayerNorms between layer's attention output and layer+1's input.

    LayerNorm(y) = gamma * (y - mean(y)) / sigma + beta: in row-vector form
    y @ P diag(gamma) / sigma + beta, with P = I - 11^T/D the centring. sigma depends on the token
    (a common factor that cancels in the composition ratio) and beta adds a constant, so both are
    left out. Post-norm: norm1 then norm2 of this layer lie on the residual path; pre-norm: the
    next layer's norm1. The post-norm path also crosses the feed-forward net, which no matrix
    captures.
    """
    D = model.config.d_model
    P = np.eye(D) - np.full((D, D), 1.0 / D)

    def ln(norm) -> np.ndarray:
        return P @ np.diag(norm.weight.detach().cpu().double().numpy())

    if model.config.norm == "post":
        return ln(model.layers[layer].norm1) @ ln(model.layers[layer].norm2)
    return ln(model.layers[layer + 1].norm1)


def _fold_gammas(model: Encoder, layer: int) -> list[Tensor]:
    """The LayerNorm gammas of layernorm_fold(model, layer) = prod_i P diag(gamma_i), in order."""
    if model.config.norm == "post":
        norms = (model.layers[layer].norm1, model.layers[layer].norm2)
    else:
        norms = (model.layers[layer + 1].norm1,)
    return [_f64(norm.weight) for norm in norms]


def _fold(X: Tensor, gammas: list[Tensor], side: str) -> Tensor:
    """N @ X (side "left", X (D, n)) or X @ N (side "right", X (..., D)) for
    N = prod_i P diag(gamma_i) (layernorm_fold), in O(D^2) instead of a D x D product: P
    centres (subtracts the mean over the D axis), diag(gamma) scales it."""
    if side == "left":  # P diag(g1) P diag(g2) X: apply the last factor first
        for g in reversed(gammas):
            X = g[:, None] * X
            X = X - X.mean(dim=0, keepdim=True)
        return X
    for g in gammas:  # X P diag(g1) P diag(g2): apply the first factor first
        X = X - X.mean(dim=-1, keepdim=True)
        X = X * g
    return X


def composition_scores(model: Encoder, w_o="learned", fold_layernorm: bool = True) -> Composition:
    """Q-, K- and V-composition of each head with each head of the next layer (Elhage et al. 2021).

    score[l, h, g] = ||W_OV^{l,h} N W_X^{l+1,g}||_F / (||W_OV^{l,h}||_F ||N W_X^{l+1,g}||_F), X in
    {Q, K, V}, where N is layernorm_fold (or the identity when fold_layernorm is False).

    Args:
        model: any Encoder (a single-layer model gives arrays with a first axis of 0).
        w_o: the w_o switch used for the writer's OV circuit.
        fold_layernorm: fold the LayerNorms' centring and gamma into the readers.
    Returns:
        Composition with (L-1, H, H) arrays q, k, v and the random baseline 1/sqrt(D).
    """
    cfg = model.config
    L, H, D, d_k = cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_k
    scores = {x: np.zeros((max(L - 1, 0), H, H)) for x in "qkv"}
    factors = _ov_factors(model, w_o)
    for layer in range(L - 1):
        # ||W_OV^h N R_g||_F = ||A[h] N R_g||_F with A[h] = R[h] W_O^h (d_k, D) (_reduced), and
        # ||W_OV^h||_F = ||A[h]||_F: no D x D circuit is formed, nor N itself (_fold).
        with torch.no_grad():
            A = _reduced(*factors[layer])  # (H, d_k, D)
            writer = torch.linalg.matrix_norm(A)  # (H,)
            gammas = _fold_gammas(model, layer) if fold_layernorm else []
            A_N = _fold(A, gammas, side="right")  # (H, d_k, D): A[h] @ N
            nxt = model.layers[layer + 1].attn
            for x, lin in (("q", nxt.W_q), ("k", nxt.W_k), ("v", nxt.W_v)):
                W_T = _f64(lin.weight).T  # (D, D): columns g*d_k.. are head_block(W, g, "in")
                reader = _fold(W_T, gammas, side="left").reshape(D, H, d_k)  # N @ R_g
                reader = reader.pow(2).sum(dim=(0, 2)).sqrt()  # (H,) ||N R_g||_F
                written = (A_N @ W_T).reshape(H, d_k, H, d_k)  # [h, :, g, :] = A[h] N R_g
                num = written.pow(2).sum(dim=(1, 3)).sqrt()  # (H, H): [h, g]
                denom = writer[:, None] * reader[None, :]
                score = torch.where(denom > 0, num / denom.clamp_min(1e-300), 0.0)
                scores[x][layer] = score.numpy()
    return Composition(
        q=scores["q"].astype(np.float32),
        k=scores["k"].astype(np.float32),
        v=scores["v"].astype(np.float32),
        baseline=1.0 / math.sqrt(D),
        fold_layernorm=fold_layernorm,
    )


# ---- 6. how W_o mixes heads ----------------------------------------------------------------------
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


def w_o_mixing(model: Encoder, w_o="learned") -> WoMixing:
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
