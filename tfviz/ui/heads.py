"""How a view lays out many heads: a grid of squares, HEAD_COLUMNS side by side on a wide
screen and one under the other on a phone, read row by row; and how their weights are coloured.

Shared by the Attention, "W_o off" and Analysis views (a view imports nothing from another view):
a model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, laid out
HEAD_COLUMNS to a row, drawn on canvases. In one row, 13 squares left about 5 px per
word-piece, and their labels an illegible pile. A toy model's every layer (grid_columns) is laid
out the same way, on canvases too, each layer's first head opening a row: as one mosaic of every
head, a phone's 390 px left each of its ten squares about 60 px.

The heads are one figure, a column of blocks (tfviz.plots.attention_column: "L0 H0", "L0 H1"...,
the mean last), which the canvas charts (tfviz.ui.widgets.canvas_charts) draw a block to a cell
of a grid, row by row: "L0 H0, L0 H1, L0 H2" on a wide screen's first row, and in the same order
down a phone's one column. (As HEAD_COLUMNS charts of a column each, a wide screen's first row
read H0, H5, H9.) The server builds one figure where it built HEAD_COLUMNS.
"""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.plots.standalone import GRID_COLUMNS
from tfviz.ui import state
from tfviz.ui.i18n import current, t
from tfviz.ui.widgets import canvas_charts, plot_words

MAX_GRID_HEADS = 32  # more heads than this in all: the grid shows one layer at a time
# Heads to a row of the grid (each sized for tfviz.plots.COLUMN_PX): on a 1280 px screen with the
# sidebar open, three leave each head's squares about 200 px; below 640 px the canvas charts' CSS
# puts them one under the other, each the phone's whole width.
HEAD_COLUMNS = GRID_COLUMNS  # an exported page's column of heads is laid out so too


def head_columns(attn, labels, layer: int, key: str, scale: str = plots.FIXED) -> None:
    """One layer's heads and their mean, readable: HEAD_COLUMNS squares to a row, row by row
    (one under the other on a phone). The first head carries the colour bar.

    attn: (H, T, T) the layer's attention; key: the element's key (its charts save as key_0,
    key_1, ...); scale: how the weights are coloured (tfviz.plots.WEIGHT_SCALES).
    """
    canvas_charts(attention_columns(attn, labels, layer, plot_words(), scale), key, HEAD_COLUMNS)


def attention_columns(
    attn, labels, layer: int, words: plots.Words = plots.english, scale: str = plots.FIXED
) -> list:
    """The figures head_columns draws (for a web page or a bench), in words: one, the layer's
    heads and their mean as a column of blocks (tfviz.plots.attention_column)."""
    heads = range(attn.shape[0])
    return [
        plots.attention_column(attn, labels, layer, heads, with_mean=True, words=words, scale=scale)
    ]


def block_columns(H: int, figure, key: str) -> None:
    """H heads and one more block (their mean, or their sum) HEAD_COLUMNS to a row, drawn on
    canvases (widgets.canvas_charts: a keystroke redraws them all).

    figure(heads, with_last_block, show_scale) draws them as a column of blocks
    (tfviz.plots.attention_column, norm_attention_column); key: the element's key.
    """
    canvas_charts([figure(list(range(H)), True, True)], key=key, columns=HEAD_COLUMNS)


def grid_figures(
    attn, labels, layer_ids, words: plots.Words = plots.english, scale: str = plots.FIXED
) -> list:
    """Every layer's heads and means as the figures grid_columns draws: one column of blocks
    (tfviz.plots.attention_grid_column), layer by layer ("L0 H0" ... "L0 mean", "L1 H0" ...),
    each layer's first head opening a row of the grid. attn: (L, H, T, T)."""
    heads = range(attn.shape[1])
    return [
        plots.attention_grid_column(
            attn, labels, layer_ids, heads, with_mean=True, words=words, scale=scale
        )
    ]


def grid_columns(attn, labels, layer_ids, key: str, scale: str = plots.FIXED) -> None:
    """A few layers' heads (a toy model's every layer) readable at any width: grid_figures in a
    grid read row by row, on canvases as a many-headed layer's are (a page that opens on them
    then fetches no plotly.js, and a keystroke redraws them in a few ms:
    tests/browser/test_browser_pagespeed.py)."""
    figures = grid_figures(attn, labels, list(layer_ids), plot_words(), scale)
    canvas_charts(figures, key=key, columns=HEAD_COLUMNS)


def many_heads(n_layers: int, n_heads: int) -> bool:
    """Too many heads for one grid: show a layer at a time (MiniLM)."""
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
    """The colour scale a model's attention opens with, its kind's: log for a decoder, whose
    first token takes most of every row (an attention sink), 0..1 for every other."""
    return view.kind.heat_scale


def weight_scale_caption(scale: str, values) -> None:
    """Which colour scale the charts above use, and its range (a fitted one's, from values)."""
    low, high = plots.weight_range(values, scale)
    floor = f"{plots.LOG_FLOOR:g}"
    st.caption(
        t(f"attention.colours_caption.{scale}", low=f"{low:.3g}", high=f"{high:.3g}", floor=floor)
    )
