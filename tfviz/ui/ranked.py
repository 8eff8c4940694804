"""Which word-pieces does one word-piece attend to: a ranked list under the Attention view.

At a few hundred word-pieces a heatmap's rows are a pixel or two high, and one row can no longer
be read off it; a list ranks the keys a chosen query looks at in one layer, by the heads' mean
weight, with the head that looks hardest. Shown for sentence models (long texts), off by default:
the list reruns the view's fragment only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from tfviz.ui.common import View, md_escape, per_model
from tfviz.ui.i18n import t

PER_MODEL_KEYS = per_model("ranked_query", "ranked_layer")
TOP = 10  # keys listed


@dataclass(frozen=True)
class RankedKey:
    key: int  # position of the key
    mean: float  # the layer's heads' mean weight from the query to this key
    head: int  # the head that weighs this key most
    weight: float  # that head's weight


def ranked_keys(attn: np.ndarray, query: int, k: int = TOP) -> list[RankedKey]:
    """The k keys the query attends to most in one layer, by the heads' mean weight.

    attn: (H, T, T) one layer's attention weights (rows: queries, each summing to 1).
    """
    rows = np.asarray(attn, dtype=np.float64)[:, query, :]  # (H, T)
    mean = rows.mean(0)  # (T,)
    order = np.argsort(-mean, kind="stable")[:k]
    best = rows.argmax(0)  # (T,)
    return [RankedKey(int(j), float(mean[j]), int(best[j]), float(rows[best[j], j])) for j in order]


def ranked_text(items: list[RankedKey], labels) -> str:
    """One key a line: rank, word-piece, mean weight, strongest head (a code block: inert)."""
    width = max(len(labels[r.key]) for r in items)
    return "\n".join(
        f"{n:>2}. {labels[r.key].ljust(width)}  {r.mean:6.1%}  H{r.head} {r.weight:6.1%}"
        for n, r in enumerate(items, 1)
    )


def show(view: View, layer_shown: int | None) -> None:
    """A toggle, then a query word-piece and a layer, and the keys it attends to, ranked."""
    tr = view.trace
    if not view.is_sentence or tr is None:
        return
    if not st.toggle(t("ranked.toggle"), key="ranked_open", help=t("ranked.help")):
        return
    a, b = st.columns(2)
    labels = list(tr.labels)
    if st.session_state.get("ranked_query", 0) >= len(labels):
        st.session_state.pop("ranked_query")  # the sentence got shorter than the choice
    query = a.selectbox(
        t("ranked.query"),
        range(len(labels)),
        format_func=lambda i: labels[i],
        key="ranked_query",
    )
    layer = b.selectbox(
        t("attention.layer"),
        range(tr.n_layers),
        index=layer_shown or 0,
        format_func=lambda x: f"L{x}",
        key="ranked_layer",
    )
    items = ranked_keys(tr.attn[layer], query)
    st.caption(md_escape(t("ranked.caption", query=labels[query], layer=layer, n=len(items))))
    with st.container(key="ranked"):  # a stable hook for tests
        st.code(ranked_text(items, labels), language=None)
