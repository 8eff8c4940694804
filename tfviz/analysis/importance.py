"""3. Head importance (Michel et al., NeurIPS 2019): each head zeroed before W_o in turn, the
gate-gradient score, and the metric left when only the k most important heads are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import ANALYSIS_SEED, _check_eval, _metric, _np, _sample, heads_of
from tfviz.core.model import Transformer
from tfviz.core.tasks import Batch, Task, get_task


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


def _forward(model: Transformer, batch: Batch, **switches) -> Tensor:
    with torch.no_grad():
        return model(batch.ids, batch.pad_mask, trace=False, **switches).logits


def gate_gradients(model: Transformer, task: Task, batch: Batch, w_o="learned") -> np.ndarray:
    """Per-example dL/d xi for the (L, H) head gates at xi = 1, shape (B, L, H) float32.

    Michel et al. average |dL/d xi| over examples, which needs one gradient per example (the
    gradient of the batch mean would let examples cancel), so each example gets its own backward
    pass. Only the gate tensor requires grad: it enters through Transformer.forward's head_gates
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
    model: Transformer,
    task: Task | str,
    n: int = 256,
    seed: int = ANALYSIS_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    w_o="learned",
    batch: Batch | None = None,
) -> HeadImportance:
    """Importance of every head: ablation effect on loss and metric, and Michel et al.'s score.

    Args:
        model: a model in eval mode (never changed).
        task: the task (or its name) the model was trained on.
        n, seed, min_len, max_len: the fresh examples (task.sample with rng seed).
        w_o: the w_o switch for every pass (as Transformer.forward).
        batch: the examples to use instead of fresh ones (a decoder's typed text, its own next
            tokens the targets: tfviz.hf.NextTokenTask.batch_from_texts); n is then its size.
    Returns:
        HeadImportance with (L, H) arrays loss_change, metric_change and gradient.
    """
    _check_eval(model)
    task = get_task(task) if isinstance(task, str) else task
    task.check_config(model.config)
    batch = _given(batch, model) or _sample(task, n, seed, min_len, max_len, model.device)
    n = len(batch.ids)
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
    model: Transformer,
    task: Task | str,
    scores: np.ndarray,
    k: int,
    n: int = 256,
    seed: int = ANALYSIS_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    w_o="learned",
    batch: Batch | None = None,
) -> float:
    """The task metric left when only the k highest-scoring heads are kept (Michel et al. 2019).

    Args:
        scores: (L, H), higher = more important (e.g. HeadImportance.scores("gradient")).
        k: heads kept, 0..L*H; every other head is ablated before W_o.
        n, seed, min_len, max_len, w_o, batch: as head_importance.
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
    batch = _given(batch, model) or _sample(task, n, seed, min_len, max_len, model.device)
    return _metric(task, _forward(model, batch, w_o=w_o, ablate_heads=removed), batch.target)


def _given(batch: Batch | None, model: Transformer) -> Batch | None:
    """A batch passed in, on the model's device; None when none was."""
    if batch is None:
        return None
    to = model.device
    return Batch(batch.ids.to(to), batch.pad_mask.to(to), batch.target.to(to), batch.lengths)


def keep_top_k_curve(
    model: Transformer, task: Task | str, scores: np.ndarray, **kwargs
) -> np.ndarray:
    """accuracy_keeping_top_k for every k = 0..L*H, shape (L*H + 1,) float32 (a slider's curve)."""
    n_heads = model.config.n_layers * model.config.n_heads
    return np.array(
        [accuracy_keeping_top_k(model, task, scores, k, **kwargs) for k in range(n_heads + 1)],
        dtype=np.float32,
    )
