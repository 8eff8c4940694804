"""How a view lays out a layer's many heads: columns of squares, drawn on canvases.

Shared by the Attention, "W_o off" and Analysis views (a view imports nothing from another view):
a model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, laid out
in HEAD_COLUMNS columns (side by side on a desktop, one under the other on a phone). In one row,
13 squares left about 5 px per word-piece, and their labels an illegible pile.
"""

from __future__ import annotations

import numpy as np

from tfviz import plots
from tfviz.ui.widgets import canvas_charts, plot_words

MAX_GRID_HEADS = 32  # more heads than this in all: the grid shows one layer at a time
HEAD_COLUMNS = 3  # columns of a many-headed layer (each sized for tfviz.plots.COLUMN_PX)


def head_columns(attn, labels, layer: int, key: str) -> None:
    """One layer's heads and their mean, readable: HEAD_COLUMNS charts of squares one above the
    other, in st.columns (stacked on a phone). The first column carries the colour bar.

    attn: (H, T, T) the layer's attention; key: the charts' keys are key_0, key_1, ...
    """
    words = plot_words()
    block_columns(
        attn.shape[0],
        lambda heads, last, scale: plots.attention_column(
            attn, labels, layer, heads, with_mean=last, show_scale=scale, words=words
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


def attention_columns(attn, labels, layer: int, words: plots.Words = plots.english) -> list:
    """The figures head_columns draws, one per column (for a web page or a bench), in words."""
    return [
        plots.attention_column(
            attn, labels, layer, heads, with_mean=last, show_scale=c == 0, words=words
        )
        for c, heads, last in column_blocks(attn.shape[0])
    ]


def block_columns(H: int, figure, key: str) -> None:
    """H heads and one more block (their mean, or their sum) in HEAD_COLUMNS columns, drawn on
    canvases (widgets.canvas_charts: a keystroke redraws them all).

    figure(heads, with_last_block, show_scale) draws one column (tfviz.plots.attention_column,
    norm_attention_column); key: the element's key.
    """
    figures = [figure(heads, last, c == 0) for c, heads, last in column_blocks(H)]
    canvas_charts(figures, key=key, columns=HEAD_COLUMNS)


def many_heads(n_layers: int, n_heads: int) -> bool:
    """Too many heads for one grid: show a layer at a time, in columns (MiniLM)."""
    return n_layers * n_heads > MAX_GRID_HEADS
