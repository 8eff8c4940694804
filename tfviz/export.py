"""What a user can download: the numbers behind a view, as CSV text.

Plain strings, built only when the download button is pressed, so exporting costs nothing on a
keystroke.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np


def attention_csv(attn: np.ndarray, labels: Sequence[str]) -> str:
    """Attention weights (L, H, T, T) as CSV with columns layer, head, query, key, weight."""
    attn = np.asarray(attn)
    if attn.ndim != 4 or attn.shape[2] != attn.shape[3]:
        raise ValueError(f"attention must have shape (layers, heads, T, T), got {attn.shape}")
    if attn.shape[-1] != len(labels):
        raise ValueError(f"attention has {attn.shape[-1]} keys but {len(labels)} tokens were given")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["layer", "head", "query", "key", "weight"])
    L, H, T, _ = attn.shape
    for lay in range(L):
        for h in range(H):
            for q in range(T):
                for k in range(T):
                    writer.writerow([lay, h, labels[q], labels[k], f"{attn[lay, h, q, k]:.6g}"])
    return buf.getvalue()


def before_after_csv(
    concat: np.ndarray, attn_out: np.ndarray, labels: Sequence[str], n_heads: int
) -> str:
    """Each layer's input and output of W_o, (L, T, D) each, as CSV with columns layer, token,
    dim, head (the head whose slice of concat the dimension is), concat, attn_out.

    The head column belongs to concat only: after W_o a dimension draws on every head.
    """
    concat, attn_out = np.asarray(concat), np.asarray(attn_out)
    if concat.ndim != 3 or concat.shape != attn_out.shape:
        raise ValueError(
            f"concat and attn_out must both be (layers, T, D), got {concat.shape} and "
            f"{attn_out.shape}"
        )
    L, T, D = concat.shape
    _check_tokens(T, labels)
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"{D} dimensions do not split into {n_heads} heads")
    d_k = D // n_heads
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["layer", "token", "dim", "head", "concat", "attn_out"])
    for lay in range(L):
        for t in range(T):
            for d in range(D):
                writer.writerow(
                    [
                        lay,
                        labels[t],
                        d,
                        d // d_k,
                        f"{concat[lay, t, d]:.6g}",
                        f"{attn_out[lay, t, d]:.6g}",
                    ]
                )
    return buf.getvalue()


def comparison_csv(learned: np.ndarray, switched: np.ndarray, labels: Sequence[str]) -> str:
    """The residual stream after each layer, (L, T, D), of the learned and the switched model as
    CSV with columns layer, token, dim, learned, switched, difference (switched - learned)."""
    learned, switched = np.asarray(learned), np.asarray(switched)
    if learned.ndim != 3 or learned.shape != switched.shape:
        raise ValueError(
            f"both residual streams must be (layers, T, D), got {learned.shape} and "
            f"{switched.shape}"
        )
    L, T, D = learned.shape
    _check_tokens(T, labels)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["layer", "token", "dim", "learned", "switched", "difference"])
    for lay in range(L):
        for t in range(T):
            for d in range(D):
                a, b = learned[lay, t, d], switched[lay, t, d]
                writer.writerow([lay, labels[t], d, f"{a:.6g}", f"{b:.6g}", f"{b - a:.6g}"])
    return buf.getvalue()


def _check_tokens(T: int, labels: Sequence[str]) -> None:
    if T != len(labels):
        raise ValueError(f"the arrays have {T} tokens but {len(labels)} labels were given")
