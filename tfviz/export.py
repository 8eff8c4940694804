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
