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
    concat, attn_out = _pair(concat, attn_out, labels, "concat and attn_out")
    D = concat.shape[2]
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"{D} dimensions do not split into {n_heads} heads")
    d_k = D // n_heads
    header = ["layer", "token", "dim", "head", "concat", "attn_out"]
    return _per_dimension(
        header, labels, concat, lambda lay, t, d: [d // d_k, concat[lay, t, d], attn_out[lay, t, d]]
    )


def comparison_csv(learned: np.ndarray, switched: np.ndarray, labels: Sequence[str]) -> str:
    """The residual stream after each layer, (L, T, D), of the learned and the switched model as
    CSV with columns layer, token, dim, learned, switched, difference (switched - learned)."""
    learned, switched = _pair(learned, switched, labels, "both residual streams")
    header = ["layer", "token", "dim", "learned", "switched", "difference"]

    def values(lay: int, t: int, d: int) -> list:
        a, b = learned[lay, t, d], switched[lay, t, d]
        return [a, b, b - a]

    return _per_dimension(header, labels, learned, values)


def _pair(a, b, labels: Sequence[str], what: str) -> tuple[np.ndarray, np.ndarray]:
    """a and b as arrays, checked: both (layers, T, D) of one shape, with T labels."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 3 or a.shape != b.shape:
        raise ValueError(f"{what} must both be (layers, T, D), got {a.shape} and {b.shape}")
    if a.shape[1] != len(labels):
        raise ValueError(f"the arrays have {a.shape[1]} tokens but {len(labels)} labels were given")
    return a, b


def _per_dimension(header: list[str], labels: Sequence[str], shape_of: np.ndarray, values) -> str:
    """CSV with one row per (layer, token, dim) of shape_of: layer, token label, dim, then
    values(layer, t, dim); floats to 6 significant digits, whole numbers as they are."""
    L, T, D = shape_of.shape
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for lay in range(L):
        for t in range(T):
            for d in range(D):
                cells = [c if isinstance(c, int) else f"{c:.6g}" for c in values(lay, t, d)]
                writer.writerow([lay, labels[t], d, *cells])
    return buf.getvalue()
