"""2. Attention rollout (Abnar & Zuidema, ACL 2020), from raw attention or from the norm-based
weights of tfviz.analysis.norms, and attention_flow: both for one typed sequence.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import _check_trace, _np, normalise_rows
from tfviz.analysis.norms import norm_attention, norm_attention_summed
from tfviz.core.model import Trace, Transformer
from tfviz.core.tasks import Task, get_task


@torch.no_grad()
def attention_flow(
    model: Transformer, task: Task | str, text: str, **switches
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


def rollout_from_trace(model: Transformer, trace: Trace, method: str = "raw") -> np.ndarray:
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
