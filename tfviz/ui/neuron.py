"""The neuron view's charts (tfviz.analysis.neuron, BertViz's layout), drawn where a page opens one
head's attention for one query: the Attention view, and the decoder lesson's induction head.

The two maps, which a keystroke redraws, are canvas charts (tfviz.ui.widgets.canvas_charts), as
the Attention grid is: drawn by plotly.js the section made a keystroke cost more than a bare page
drawing the same numbers (bench/README.md). The bars, three panels of horizontal bars that the
canvas does not draw, stay plotly's.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import plots
from tfviz.ui.i18n import t
from tfviz.ui.widgets import canvas_charts, chart, plot_words


def neuron_charts(nv, labels, key: str = "neuron") -> None:
    """The neuron view's three charts, each with its caption: q above the keys and q x k side by
    side on a wide screen, then the dot products, scores and softmax per key. key: the charts'
    key prefix (two pages drawing them keep their own)."""
    words = plot_words()
    (token,) = plots.escape_labels([labels[nv.query]])  # a title is HTML to plotly
    left, right = st.columns(2)
    with left:
        figure = plots.query_key_map(nv.q, nv.k, labels, nv.query, words=words)
        canvas_charts([figure], f"{key}_qk", columns=1)
        st.caption(t("attention.neuron.qk_caption", d_k=len(nv.q)))
    with right:
        figure = plots.product_map(nv.product, labels, nv.masked, words=words)
        canvas_charts([figure], f"{key}_product", columns=1)
        st.caption(t("attention.neuron.product_caption"))
    title = t("attention.neuron.scores_title", token=token)
    figure = plots.score_bars(
        nv.dots, nv.scores, nv.weights, labels, nv.masked, title=title, words=words
    )
    chart(figure, key=f"{key}_scores")
    st.caption(t("attention.neuron.scores_caption", root=f"{np.sqrt(len(nv.q)):.2f}"))
