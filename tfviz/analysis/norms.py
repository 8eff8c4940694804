"""1. Norm-based attention ||alpha_ij^h f^h(x_j)|| (Kobayashi et al., EMNLP 2020): how much each
key token really moves into a query through the head's values and W_o, not only where it looks.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import _check_trace, _np
from tfviz.core import wo
from tfviz.core.model import LayerTrace, Trace, Transformer


def transformed_values(lt: LayerTrace) -> Tensor:
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head and token, shape (B, H, T, D).

    Uses the trace's values (bias included) and the W_o the layer actually applied (so it follows
    the w_o switch), times the gate the head carried in that pass (0 for an ablated head).
    """
    f = wo.head_contributions(lt.v, lt.W_o)  # v_h W_O^h: the same algebra as z_h W_O^h
    if lt.head_gate is not None:
        f = f * lt.head_gate.view(1, -1, 1, 1)
    return f


def norm_attention(model: Transformer, trace: Trace) -> np.ndarray:
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


def norm_attention_summed(model: Transformer, trace: Trace) -> np.ndarray:
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
