"""The Attention view: every layer x head as heatmaps, one head enlarged, the weights as CSV."""

from __future__ import annotations

import functools

import streamlit as st

from tfviz import plots
from tfviz.export import attention_csv
from tfviz.ui.common import View, chart


def render(view: View) -> None:
    tr = view.trace
    st.caption(
        "Each square is one head: row = the query token, column = the key token it looks at "
        "(same order in every square, labelled under the first); a row sums to 1. Dark = much "
        "attention. The last square of a layer is the mean of its heads: what one big head "
        "averaging them would look like. Hover a cell for its layer, head, query and key."
    )
    chart(
        plots.attention_grid(
            tr.attn, tr.labels, title="Attention: every layer x head", with_mean=True
        ),
        key="attention_grid",
    )
    left, right = st.columns(2)
    with left:
        # Off by default: a second heatmap costs the browser a redraw on every keystroke.
        if st.toggle("Enlarge one head", key="attn_enlarge"):
            a, b = st.columns(2)
            layer = a.selectbox(
                "Layer", range(tr.n_layers), format_func=lambda x: f"L{x}", key="attn_layer"
            )
            head = b.selectbox(
                "Head", range(tr.n_heads), format_func=lambda x: f"H{x}", key="attn_head"
            )
            chart(
                plots.attention_map(tr.attn[layer, head], tr.labels, title=f"L{layer} H{head}"),
                key="attention_head",
            )
    with right:
        st.caption(
            "Every weight shown here, of every layer and head, can be downloaded as a table "
            "with columns layer, head, query, key, weight:"
        )
        st.download_button(
            "Download attention weights (CSV)",
            functools.partial(attention_csv, tr.attn, tr.labels),  # built on click only
            file_name=f"attention_{view.entry.name}.csv",
            mime="text/csv",
            key="download_attention",
            on_click="ignore",
        )
