"""The Attention view: every layer x head as heatmaps, one head enlarged, the weights as CSV.

A model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, picked
above the grid: 72 squares in one figure are too small to read and slow to draw.
"""

from __future__ import annotations

import functools

import streamlit as st

from tfviz import plots
from tfviz.export import attention_csv
from tfviz.ui.common import View, chart, index_picker

MAX_GRID_HEADS = 32  # more heads than this in all: the grid shows one layer at a time


def render(view: View) -> None:
    tr = view.trace
    st.caption(
        "Each square is one head: row = the query token, column = the key token it looks at "
        "(same order in every square, labelled under the first); a row sums to 1. Dark = much "
        "attention. The last square of a layer is the mean of its heads: what one big head "
        "averaging them would look like. Hover a cell for its layer, head, query and key."
    )
    if tr.n_layers * tr.n_heads <= MAX_GRID_HEADS:
        layers, title = list(range(tr.n_layers)), "Attention: every layer x head"
    else:
        layer = index_picker(
            "Layer shown",
            tr.n_layers,
            "attn_grid_layer",
            "L",
            help=f"{tr.n_layers} layers x {tr.n_heads} heads: one layer's heads at a time.",
        )
        layers, title = [layer], f"Attention of layer {layer}: every head"
    chart(
        plots.attention_grid(tr.attn[layers], tr.labels, layers, title=title, with_mean=True),
        key="attention_grid",
    )
    if view.is_sentence:
        st.caption(
            "Rows and columns are sentence A's word-pieces, framed by [CLS] and [SEP]. Many "
            "heads of BERT-like models park their attention on [SEP] or [CLS] when they have "
            "nothing to look for."
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
