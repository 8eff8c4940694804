"""How a view lays out many heads: columns of squares, side by side on a wide screen and one
under the other on a phone; and how their weights are coloured.

Shared by the Attention, "W_o off" and Analysis views (a view imports nothing from another view):
a model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, laid out
in HEAD_COLUMNS columns, drawn on canvases. In one row, 13 squares left about 5 px per
word-piece, and their labels an illegible pile. A toy model's every layer (grid_columns) is laid
out the same way, on canvases too: as one mosaic of every head, a phone's 390 px left each of
its ten squares about 60 px.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import plots
from tfviz.ui import state
from tfviz.ui.i18n import current, t
from tfviz.ui.widgets import canvas_charts, chart, plot_words

MAX_GRID_HEADS = 32  # more heads than this in all: the grid shows one layer at a time
# Columns of heads (each sized for tfviz.plots.COLUMN_PX): on a 1280 px screen with the sidebar
# open, three leave each head's squares about 200 px; below 640 px Streamlit (and the canvas
# charts' CSS) put them one under the other, each the phone's whole width.
HEAD_COLUMNS = 3


def head_columns(attn, labels, layer: int, key: str, scale: str = plots.FIXED) -> None:
    """One layer's heads and their mean, readable: HEAD_COLUMNS charts of squares one above the
    other, in st.columns (stacked on a phone). The first column carries the colour bar.

    attn: (H, T, T) the layer's attention; key: the charts' keys are key_0, key_1, ...;
    scale: how the weights are coloured (tfviz.plots.WEIGHT_SCALES).
    """
    words = plot_words()
    block_columns(
        attn.shape[0],
        lambda heads, last, show_scale: plots.attention_column(
            attn,
            labels,
            layer,
            heads,
            with_mean=last,
            show_scale=show_scale,
            words=words,
            scale=scale,
        ),
        key,
    )


def column_blocks(H: int) -> list[tuple[int, list[int], bool]]:
    """(column, its heads, whether it ends with the extra block) for H heads and one more block
    (their mean, or their sum) over HEAD_COLUMNS columns; empty columns left out."""
    # Block b < H is head b, block H the last one: in order down the columns, about as many in
    # each.
    parts = np.array_split(np.arange(H + 1), HEAD_COLUMNS)
    columns = [(c, [int(b) for b in part if b < H], H in part) for c, part in enumerate(parts)]
    return [(c, heads, last) for c, heads, last in columns if heads or last]


def attention_columns(
    attn, labels, layer: int, words: plots.Words = plots.english, scale: str = plots.FIXED
) -> list:
    """The figures head_columns draws, one per column (for a web page or a bench), in words."""
    return [
        plots.attention_column(
            attn, labels, layer, heads, with_mean=last, show_scale=c == 0, words=words, scale=scale
        )
        for c, heads, last in column_blocks(attn.shape[0])
    ]


def block_columns(H: int, figure, key: str) -> None:
    """H heads and one more block (their mean, or their sum) in HEAD_COLUMNS columns, drawn on
    canvases (widgets.canvas_charts: a keystroke redraws them all).

    figure(heads, with_last_block, show_scale) draws one column (tfviz.plots.attention_column,
    norm_attention_column); key: the element's key.
    """
    canvas_charts(column_figures(H, figure), key=key, columns=HEAD_COLUMNS)


def grid_figures(
    attn, labels, layer_ids, words: plots.Words = plots.english, scale: str = plots.FIXED
) -> list:
    """Every layer's heads and means as HEAD_COLUMNS figures (tfviz.plots.attention_grid_column):
    column c holds the heads column_blocks gives it, of every layer. attn: (L, H, T, T)."""
    return [
        plots.attention_grid_column(
            attn,
            labels,
            layer_ids,
            heads,
            with_mean=last,
            show_scale=c == 0,
            words=words,
            scale=scale,
        )
        for c, heads, last in column_blocks(attn.shape[1])
    ]


def grid_columns(attn, labels, layer_ids, key: str, scale: str = plots.FIXED) -> None:
    """A few layers' heads (a toy model's every layer) readable at any width: grid_figures in
    columns, on canvases as a many-headed layer's are (a page that opens on them then fetches no
    plotly.js, and a keystroke redraws them in a few ms: tests/test_browser_pagespeed.py)."""
    figures = grid_figures(attn, labels, list(layer_ids), plot_words(), scale)
    canvas_charts(figures, key=key, columns=HEAD_COLUMNS)


def plotly_columns(figures: list, key: str) -> None:
    """Columns of heads (figures, at most HEAD_COLUMNS) as plotly charts in st.columns, keyed
    key_0, key_1..., inside a container keyed key: the layout of block_columns, on the toy
    models' renderer."""
    with st.container(key=key):
        slots = st.columns(HEAD_COLUMNS)
        for c, figure in enumerate(figures):
            with slots[c]:
                chart(figure, key=f"{key}_{c}")


def column_figures(H: int, figure) -> list:
    """figure(heads, with_last_block, show_scale) for each of column_blocks(H)'s columns."""
    return [figure(heads, last, c == 0) for c, heads, last in column_blocks(H)]


def many_heads(n_layers: int, n_heads: int) -> bool:
    """Too many heads for one grid: show a layer at a time, in columns (MiniLM)."""
    return n_layers * n_heads > MAX_GRID_HEADS


def weight_scale(key: str, default: str = plots.FIXED) -> str:
    """A view's picker of how attention weights are coloured (default until one is picked: 0..1,
    a decoder's log, for its first token's sink), widget `key`; the choice is the session's
    (state.WEIGHT_SCALE), so every attention view keeps it."""
    options = plots.WEIGHT_SCALES
    chosen = state.WEIGHT_SCALE.get(default)
    if state.widget_value(key) != chosen:
        state.set_widget(key, chosen)  # another view changed it: this picker shows it too
    lang = current()  # for format_func, which Streamlit may call outside this run
    st.radio(
        t("attention.colours"),
        options,
        format_func=lambda s: t(f"attention.colours.{s}", lang=lang),
        key=key,
        horizontal=True,
        help=t("attention.colours_help"),
        on_change=lambda: state.WEIGHT_SCALE.set(state.widget_value(key)),
    )
    return state.WEIGHT_SCALE.get(default)


def default_scale(view) -> str:
    """The colour scale a model's attention opens with: log for a decoder, whose first token
    takes most of every row (an attention sink), 0..1 for every other."""
    return plots.LOG if view.is_decoder else plots.FIXED


def weight_scale_caption(scale: str, values) -> None:
    """Which colour scale the charts above use, and its range (a fitted one's, from values)."""
    low, high = plots.weight_range(values, scale)
    floor = f"{plots.LOG_FLOOR:g}"
    st.caption(
        t(f"attention.colours_caption.{scale}", low=f"{low:.3g}", high=f"{high:.3g}", floor=floor)
    )
