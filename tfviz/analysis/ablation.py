"""4. Ablating a head before W_o (right: its slice of the concatenation) versus after it (the
common mistake: the same slice of W_o's output), and what each does to the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import ANALYSIS_SEED, _check_eval, _metric, _np, _sample
from tfviz.core.model import LayerTrace, Transformer
from tfviz.core.tasks import Batch, Task, get_task


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
    model: Transformer,
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
    removed = _removed_share(base.trace.layers[layer], head, cfg.d_k, real)
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
        attn_out_change_before=_token_change(a1, a0, real),
        attn_out_change_after=_token_change(a2, a0, real),
        attn_out_gap=_token_change(a1, a2, real),
        logits_change_before=_logit_change(before.logits, base.logits, real),
        logits_change_after=_logit_change(after.logits, base.logits, real),
        logits_gap=_logit_change(before.logits, after.logits, real),
        prediction_changed_before=_prediction_changed(task, before.logits, base.logits, real),
        prediction_changed_after=_prediction_changed(task, after.logits, base.logits, real),
        removed_share_after=_np(removed),
    )


def _token_change(x: Tensor, y: Tensor, real: Tensor) -> np.ndarray:
    """(B, T) ||x - y|| at each token, 0 at padding (real: (B, T) 1 at real tokens)."""
    return _np((x - y).norm(dim=-1) * real)


def _logit_change(x: Tensor, y: Tensor, real: Tensor) -> np.ndarray:
    """(B,) ||x - y|| per example; a token task's averaged over the example's real positions."""
    d = (x - y).norm(dim=-1)
    if d.dim() == 2:  # token task: average over the real positions of each example
        d = (d * real).sum(1) / real.sum(1).clamp_min(1.0)
    return _np(d)


def _prediction_changed(task: Task, x: Tensor, y: Tensor, real: Tensor) -> float:
    """The share of answers (tokens with one, or sequences) that logits x and y answer apart."""
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


def _removed_share(lt: LayerTrace, head: int, d_k: int, real: Tensor) -> Tensor:
    """(H,) the share of each head's term z_h W_o^h that lies in head's slice of the output
    dims, the slice that zeroing after W_o removes (real tokens only)."""
    contrib = lt.head_contributions()  # (B, H, T, D)
    energy = (contrib**2).sum(-1) * real[:, None, :]  # (B, H, T)
    dims = slice(head * d_k, (head + 1) * d_k)
    in_slice = (contrib[..., dims] ** 2).sum(-1) * real[:, None, :]
    total = energy.sum(dim=(0, 2))
    return torch.where(total > 0, in_slice.sum(dim=(0, 2)) / total.clamp_min(1e-30), 0.0)
