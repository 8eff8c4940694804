"""A grid of heatmaps (every layer x head) as ONE heatmap trace, and the titles of its blocks.

A grid is drawn as one heatmap trace on one pair of axes: the blocks are tiled into a mosaic
with empty (NaN) rows and columns between them, and every row and column gets a unique category
name ("L0 query a·1", "H2 key b·2") that the hover shows, while the tick text shows only the
token. The browser draws one trace several times faster than the same grid as 8 subplots, and a
keystroke redraws it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.style import _figure_of, _heatmap, escape_labels, hover_labels

MOSAIC_PX = 900  # width the mosaic's cells are sized for (the wide layout's main column)
LABEL_PX = 14  # the least room a column's label gets (a 10-11 px font's line, rotated)
GAP_ROWS = 2  # empty rows between two rows of blocks: room for the lower blocks' titles
GAP_COLUMNS = 1  # an empty column between two blocks side by side


CONTINUATION = "\u2026"  # how a byte piece that continues a character is labelled (tfviz.hf)


def labelled(labels: Sequence[str], every: int) -> list[int]:
    """The positions that get a tick label, at least `every` apart: all of them when every is
    1, else whole labels only, first come first served. A byte piece's continuation mark gives
    way: thinned by position alone, a Chinese sentence's pieces (three a character) kept the
    marks and dropped the characters."""
    if every <= 1:
        return list(range(len(labels)))
    shown, last = [], -every
    for i, label in enumerate(labels):
        if not str(label).startswith(CONTINUATION) and i - last >= every:
            shown.append(i)
            last = i
    return shown


def _mosaic(
    blocks: np.ndarray,
    y_labels: Sequence[str],
    x_labels: Sequence[str],
    rows: list[str],
    cols: list[str],
    hover: tuple[str, str, str],
    coloraxis: dict,
    title: str,
    x_tick_every: int = 1,
    width_px: float = MOSAIC_PX,
    row_px: float | None = None,
    y_tick_every: int = 1,
    block_words: tuple[str, str] | None = None,
) -> go.Figure:
    """A grid of (R, C, ny, nx) blocks as one heatmap, blocks titled "row col".

    Args:
        blocks: R x C blocks of ny x nx values.
        y_labels, x_labels: tick text for a block's rows and columns (repeated in every block).
        rows, cols: names of the block rows and columns ("L0", "H1"); they prefix the hover.
        hover: what a block's rows, columns and values are, for the hover ("query", "key",
            "weight", already in the figure's words).
        coloraxis: the shared colour axis.
        title: figure title.
        x_tick_every: label every k-th column only (for wide blocks such as D dimensions).
        width_px: the width the chart is drawn at, which sizes its cells.
        row_px: the height of a row of cells (default: a cell's width, at least 14 px).
        y_tick_every: label every k-th row of a block only.
        block_words: what the block rows and columns are ("layer", "head", in the figure's
            words): the hover then gives each on a line of its own ("layer L0", "query a·1",
            "key b·2", "head H2", "weight 0.25"), where it read "key H2 b·2" (see _line_names).
    """
    z = _tiled(blocks)
    # Labels at least LABEL_PX apart at the width drawn for: 12 heads of 40 word-pieces in one
    # row left each column 1.8 px, and every label drawn smeared into the next.
    x_tick_every = max(x_tick_every, math.ceil(LABEL_PX * z.shape[1] / width_px))
    y_names, x_names, template = _cell_names(y_labels, x_labels, rows, cols, hover, block_words)
    trace = _heatmap(z, x_names, y_names, template)
    trace["hoverongaps"] = False
    cell = max(5.0, min(30.0, width_px / z.shape[1]))
    if row_px is None:
        row_px = max(cell, 14.0)  # wide blocks (D columns) still get readable token rows
    xaxis, yaxis = _tick_axes(
        y_labels,
        x_labels,
        y_names,
        x_names,
        block_rows=blocks.shape[0],
        block_height=blocks.shape[2],
        y_tick_every=y_tick_every,
        x_tick_every=x_tick_every,
        font=dict(size=9 if cell < 14 else 11),
    )
    layout = dict(
        title=dict(text=title),
        height=int(z.shape[0] * row_px) + 150,
        margin=dict(l=10, r=10, t=80, b=50),
        coloraxis=coloraxis,
        plot_bgcolor="rgba(0,0,0,0)",  # the gaps show the page, not a grey band
        xaxis=xaxis,
        yaxis=yaxis,
    )
    titles = _titles_over_blocks(rows, cols, blocks.shape, z.shape, layout)
    return _figure_of([trace, titles], layout)


def _tiled(blocks: np.ndarray) -> np.ndarray:
    """The (R, C, ny, nx) blocks tiled into one float32 array, GAP_ROWS empty (NaN) rows and
    GAP_COLUMNS empty columns between them: the gaps leave room for the block titles."""
    R, C, ny, nx = blocks.shape
    z = np.full(
        (R * (ny + GAP_ROWS) - GAP_ROWS, C * (nx + GAP_COLUMNS) - GAP_COLUMNS),
        np.nan,
        dtype=np.float32,
    )
    for r in range(R):
        for c in range(C):
            y0, x0 = r * (ny + GAP_ROWS), c * (nx + GAP_COLUMNS)
            z[y0 : y0 + ny, x0 : x0 + nx] = blocks[r, c]
    return z


def _cell_names(
    y_labels: Sequence[str],
    x_labels: Sequence[str],
    rows: list[str],
    cols: list[str],
    hover: tuple[str, str, str],
    block_words: tuple[str, str] | None,
) -> tuple[list[str], list[str], str]:
    """The unique names of the mosaic's rows and columns, which the hover shows (the labels,
    with any exact piece: hover_labels), and the hover's template (see _mosaic's arguments)."""
    y_hovers, x_hovers = hover_labels(y_labels), hover_labels(x_labels)
    if block_words is None:
        y_names = _axis_names(rows, y_hovers, GAP_ROWS)
        x_names = _axis_names(cols, x_hovers, GAP_COLUMNS)
        template = f"{hover[0]} %{{y}}<br>{hover[1]} %{{x}}<br>{hover[2]} %{{z:.3f}}"
    else:
        y_names = _line_names(rows, y_hovers, GAP_ROWS, hover[0], block_words[0], block_first=True)
        x_names = _line_names(
            cols, x_hovers, GAP_COLUMNS, hover[1], block_words[1], block_first=False
        )
        template = f"%{{y}}<br>%{{x}}<br>{hover[2]} %{{z:.3f}}"
    return y_names, x_names, template


def _tick_axes(
    y_labels: Sequence[str],
    x_labels: Sequence[str],
    y_names: list[str],
    x_names: list[str],
    *,
    block_rows: int,
    block_height: int,
    y_tick_every: int,
    x_tick_every: int,
    font: dict,
) -> tuple[dict, dict]:
    """The mosaic's category x and y axes, ticked with the labels (escaped) of the cells that
    get one (labelled): every block row's on y, the first block column's only on x."""
    y_ticks, x_ticks = escape_labels(y_labels), escape_labels(x_labels)
    y_rows = labelled(y_labels, y_tick_every)
    y_tickvals = [
        y_names[r * (block_height + GAP_ROWS) + i] for r in range(block_rows) for i in y_rows
    ]
    # Every block has its columns in the same order, so only the first block column is ticked:
    # each tick label costs the browser a text measurement on every redraw, and the hover names
    # each cell anyway.
    x_cols = labelled(x_labels, x_tick_every)
    xaxis = dict(
        type="category",
        tickvals=[x_names[i] for i in x_cols],
        ticktext=[x_ticks[i] for i in x_cols],
        tickfont=font,
        showgrid=False,
    )
    yaxis = dict(
        type="category",
        tickvals=y_tickvals,
        ticktext=[y_ticks[i] for i in y_rows] * block_rows,
        tickfont=font,
        autorange="reversed",
        showgrid=False,
    )
    return xaxis, yaxis


def _titles_over_blocks(
    rows: list[str], cols: list[str], block_shape: tuple, z_shape: tuple, layout: dict
) -> dict:
    """The "row col" title of each of the mosaic's blocks (block_shape: R, C, ny, nx; z_shape:
    the tiled mosaic's), as _block_titles' trace; its axes are added to layout."""
    R, C, ny, nx = block_shape
    # Each title centred over its block, its foot on the top edge of the block's first row (in
    # the gap rows, or above the plot for the first block row), in cells as the heatmap's axes
    # count them: from -0.5 to n - 0.5, rows downwards. On the edge, not above it: plotly hides
    # a point outside its axes' range, and the first row's edge is the range's end.
    return _block_titles(
        [f"{rows[r]} {cols[c]}".strip() for r in range(R) for c in range(C)],
        x=[c * (nx + GAP_COLUMNS) + (nx - 1) / 2 for r in range(R) for c in range(C)],
        y=[r * (ny + GAP_ROWS) - 0.5 for r in range(R) for c in range(C)],
        x_range=[-0.5, z_shape[1] - 0.5],
        y_range=[z_shape[0] - 0.5, -0.5],
        layout=layout,
    )


def _axis_names(blocks: list[str], ticks: list[str], gap: int) -> list[str]:
    """Unique category names along one mosaic axis: "L0 a·1", then gap names."""
    names: list[str] = []
    for b, block in enumerate(blocks):
        names += [f"{block} {t}".strip() for t in ticks]
        if b < len(blocks) - 1:
            names += [f"gap {b}.{i}" for i in range(gap)]
    return names


def _line_names(
    blocks: list[str], ticks: list[str], gap: int, what: str, block_word: str, block_first: bool
) -> list[str]:
    """Category names along one mosaic axis that the hover shows as lines of their own: the
    token after what it is ("query a·1"), and the block after what it is ("head L0 H3") on its
    own line, before the token on the rows' axis and after it on the columns' (the hover reads
    rows, then columns); a nameless block adds no line. Unique as _axis_names' are."""
    names: list[str] = []
    for b, block in enumerate(blocks):
        for t in ticks:
            token = f"{what} {t}"
            if not block:
                names.append(token)
            elif block_first:
                names.append(f"{block_word} {block}<br>{token}")
            else:
                names.append(f"{token}<br>{block_word} {block}")
        if b < len(blocks) - 1:
            names += [f"gap {b}.{i}" for i in range(gap)]
    return names


# A figure's block titles ("L0 H1" over each block of a mosaic, "H2" over each head's columns of
# concat) are ONE scatter trace of text, not an annotation each: plotly.js lays every
# annotation out on its own on every draw, and the toy model's grid with ten titled blocks cost
# 1.23-1.37x a plain heatmap of its cells; as one text trace, about 1.1x (bench/figure_cost.py,
# bench/README.md). The trace is drawn on a hidden pair of linear axes laid over the figure's
# own (overlaying, so a zoom moves them together) with the heatmap's range: a title goes at a
# fractional position (between two cells of an even-sized block, or above the first row),
# which a category axis cannot take, and the heatmap's axes keep their ranges. No hover, no
# legend, not clipped to the plot (the first row of titles lies above it).
# The titles' trace says what it is in its meta, which plotly keeps in the JSON a page is sent
# (it drops uids there): block_titles finds it so.
TITLES_META = "block titles"


def _block_titles(
    texts: list[str],
    x: list[float],
    y: list[float],
    x_range: list[float],
    y_range: list[float],
    layout: dict,
    font_size: int = 11,
) -> dict:
    """The titles as one text trace at (x, y), each centred on x with its foot at y, on hidden
    axes x2 and y2 spanning x_range and y_range (added to layout); returns the trace. Every
    point must lie within the ranges (its text may stick out: it is not clipped)."""
    layout["xaxis2"] = dict(overlaying="x", range=x_range, visible=False)
    layout["yaxis2"] = dict(overlaying="y", range=y_range, visible=False)
    return dict(
        type="scatter",
        mode="text",
        meta=TITLES_META,
        x=x,
        y=y,
        text=texts,
        xaxis="x2",
        yaxis="y2",
        textposition="top center",
        textfont=dict(size=font_size),
        cliponaxis=False,
        hoverinfo="skip",
        showlegend=False,
    )


def block_titles(figure: go.Figure | dict) -> list[str]:
    """The titles of a figure's blocks ("L0 H1", or concat's "H0", "H1"...), in order, as it
    shows them (see _block_titles); empty when it has none. figure: a go.Figure or its JSON
    (what Streamlit sends, as the app tests read it)."""
    data = figure["data"] if isinstance(figure, dict) else figure.data
    for trace in data:
        meta = trace.get("meta") if isinstance(trace, dict) else trace.meta
        if meta == TITLES_META:
            return list(trace["text"])
    return []


def _head_blocks(D: int, n_heads: int, layout: dict) -> dict:
    """Dotted lines (shapes, added to layout) between n_heads equal blocks along a D-wide x axis,
    and the blocks' names H0, H1... above the plot: the titles' trace, returned."""
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"{D} dimensions cannot be split into {n_heads} equal head blocks")
    d_k = D // n_heads
    shapes = [
        dict(
            type="line",
            x0=h * d_k - 0.5,
            x1=h * d_k - 0.5,
            y0=0,
            y1=1,
            xref="x",
            yref="paper",
            line=dict(color="black", width=1.5, dash="dot"),
        )
        for h in range(1, n_heads)
    ]
    layout["shapes"] = shapes
    return _block_titles(
        [f"H{h}" for h in range(n_heads)],
        x=[(h + 0.5) * d_k - 0.5 for h in range(n_heads)],
        y=[1.0] * n_heads,  # the top of the plot: y2 spans it from 0 to 1
        x_range=[-0.5, D - 0.5],
        y_range=[0.0, 1.0],
        layout=layout,
        font_size=12,  # plotly's default, as the names had when they were annotations
    )


def _head_rows(D: int, n_heads: int, layout: dict) -> None:
    """_head_blocks along a D-high y axis (reversed: row 0 at the top): dotted lines across the
    plot between n_heads equal blocks of rows, and the blocks' names H0, H1... as the y axis's
    tick labels, each beside the middle of its block (added to layout)."""
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"{D} dimensions cannot be split into {n_heads} equal head blocks")
    d_k = D // n_heads
    layout["shapes"] = [
        dict(
            type="line",
            x0=0,
            x1=1,
            y0=h * d_k - 0.5,
            y1=h * d_k - 0.5,
            xref="paper",
            yref="y",
            line=dict(color="black", width=1.5, dash="dot"),
        )
        for h in range(1, n_heads)
    ]
    layout["yaxis"] = dict(
        layout.get("yaxis", {}),
        tickvals=[(h + 0.5) * d_k - 0.5 for h in range(n_heads)],
        ticktext=[f"H{h}" for h in range(n_heads)],
    )
