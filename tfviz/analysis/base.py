"""Helpers every analysis shares: checks on the model and trace, fresh examples, the task's
metric, and the W_o a layer applies in a W_o mode. The section modules import from here, never the
other way round.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from torch import Tensor

from tfviz.core import wo
from tfviz.core.model import Trace, Transformer
from tfviz.core.tasks import Batch, Task

ANALYSIS_SEED = 3_000_017  # examples for importance/ablation: fresh, and apart from EVAL_SEED


def _np(x: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float32)


def _check_trace(model: Transformer, trace: Trace) -> None:
    if not isinstance(trace, Trace) or any(lt is None for lt in trace.layers):
        raise ValueError("a Trace from model(ids, trace=True) is needed")
    if len(trace.layers) != model.config.n_layers:
        raise ValueError(
            f"the trace has {len(trace.layers)} layers but the model {model.config.n_layers}: "
            f"was it made by another model?"
        )


def _check_eval(model: Transformer) -> None:
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
    """The task's headline metric (as tfviz.training.evaluate reports it) on one batch."""
    s = task.score(logits.cpu(), target.cpu())
    total = s["abs_err"] if task.kind == "regress" else s["correct"]
    return total / max(1, s["count"])


def heads_of(model: Transformer) -> Iterable[tuple[int, int]]:
    """Every (layer, head) pair of a model, layer-major."""
    return ((l, h) for l in range(model.config.n_layers) for h in range(model.config.n_heads))


def _w_o_of(model: Transformer, layer: int, mode: str) -> Tensor:
    """The (D, D) map a layer applies in a W_o mode (tfviz.core.wo), nn.Linear layout (out, in)."""
    lin = model.layers[layer].attn.W_o
    return wo.effective(lin.weight.detach(), lin.bias.detach(), mode, model.config.n_heads)[0]


# Here rather than with rollout, its first user: W_o's head shares (tfviz.analysis.mixing)
# normalise the same way, and neither section should import the other for it.
def normalise_rows(weights: np.ndarray | Tensor) -> np.ndarray:
    """Each row divided by its sum; all-zero rows stay zero (no NaN). Same shape, float32."""
    w = np.asarray(_np(weights), dtype=np.float64)
    sums = w.sum(axis=-1, keepdims=True)
    return np.divide(w, sums, out=np.zeros_like(w), where=sums > 0).astype(np.float32)
