"""Attention figures: every layer x head as a grid, a layer's heads in columns, one head
enlarged, and the W_o-aware views of the same weights (norm-based attention, rollout)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.mosaic import GAP_ROWS, _mosaic, labelled
from tfviz.plots.style import (
    ATTENTION_SCALE,
    MARGIN,
    NORM_SCALE,
    Words,
    _escape,
    _figure,
    _heatmap,
    _hover,
    _is_wide,
    _token_square,
    english,
    escape_labels,
    hover_labels,
)


def _attention_axis(words: Words) -> dict:
    """The colour axis of attention weights: 0..1, its bar titled "weight" in words."""
    return dict(
        colorscale=ATTENTION_SCALE,
        cmin=0.0,
        cmax=1.0,
        # Labels just below their ticks: the "1" at the bar's top then clears the title above
        # it (centred on its tick, it overlapped the title).
        colorbar=dict(
            title=dict(text=words("chart.word.weight")), ticklabelposition="outside bottom"
        ),
    )


# How attention weights are coloured, the attention views' choice (tfviz.ui.state.WEIGHT_SCALE):
# FIXED from 0 to 1, the same for every model and input (the default: colours compare across
# charts); FITTED from the smallest to the largest weight shown, for a random or weakly trained
# model whose weights all lie near 1/T and look uniform on 0..1; LOG, decades from LOG_FLOOR to
# 1, for a model that gives one token (a decoder's first) most of every row, which leaves every
# other cell white on 0..1. The colour bar's title says which is on.
FIXED, FITTED, LOG = "fixed", "fitted", "log"
WEIGHT_SCALES = (FIXED, FITTED, LOG)
LOG_FLOOR = 1e-3  # weights below it are drawn as it (the colour bar's "≤ 0.001")
FITTED_MIN_SPAN = 1e-6  # all weights equal (one token): still a valid range


def weight_range(values: np.ndarray, scale: str) -> tuple[float, float]:
    """The weights the colours span under scale: (0, 1) fixed, the values' (min, max) fitted
    (gaps' NaN left out), (LOG_FLOOR, 1) log."""
    if scale == FIXED:
        return 0.0, 1.0
    if scale == LOG:
        return LOG_FLOOR, 1.0
    if scale != FITTED:
        raise ValueError(f"a weight scale is one of {WEIGHT_SCALES}, not {scale!r}")
    values = np.asarray(values, dtype=np.float32)
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    return low, max(high, low + FITTED_MIN_SPAN)


def _weight_scale(fig: go.Figure, values: np.ndarray, scale: str, words: Words) -> go.Figure:
    """fig's weights (its first trace, a heatmap on the colour axis) coloured under scale, the
    colour bar titled with it. values: every weight the chart's scale must span (a layer's, when
    its heads are several charts: they share one range). LOG draws log10 of each weight and keeps
    the weight itself in customdata for the hover."""
    low, high = weight_range(values, scale)
    bar = fig.layout.coloraxis.colorbar
    if scale == FIXED:
        return fig
    if scale == FITTED:
        fig.layout.coloraxis.update(cmin=low, cmax=high)
        bar.title.text = words("chart.scale.fitted")
        return fig
    heatmap = fig.data[0]
    weights = np.asarray(heatmap.z, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        heatmap.z = np.log10(np.maximum(weights, LOG_FLOOR))  # NaN gaps stay NaN
    heatmap.customdata = weights
    heatmap.hovertemplate = heatmap.hovertemplate.replace("%{z:", "%{customdata:")
    decades = list(range(int(round(np.log10(LOG_FLOOR))), 1))
    fig.layout.coloraxis.update(cmin=decades[0], cmax=0)
    bar.update(tickvals=decades, ticktext=[f"{10.0**d:g}" for d in decades])
    bar.ticktext = ["≤ " + bar.ticktext[0], *bar.ticktext[1:]]
    bar.title.text = words("chart.scale.log")
    return fig


def attention_grid(
    attn: np.ndarray,
    labels: Sequence[str],
    layer_ids: Sequence[int] | None = None,
    title: str = "",
    with_mean: bool = False,
    *,
    words: Words = english,
    scale: str = FIXED,
) -> go.Figure:
    """Every layer x head as a heatmap: rows are layers, columns heads, colours 0..1.

    Args:
        attn: (L, H, T, T) attention weights, queries on rows and keys on columns.
        labels: T token labels.
        layer_ids: the layer number of each row (default 0..L-1), for a slice of layers.
        title: figure title.
        with_mean: add a last column with the mean of each layer's heads (what one big head
            averaging them would look like).
        words: the figure's own words (tfviz.plots.style); English by default.
        scale: how the weights are coloured, one of WEIGHT_SCALES (FIXED: 0..1).
    """
    attn = _attention(attn, labels, ndim=4)
    L, H = attn.shape[:2]
    layer_ids = list(range(L)) if layer_ids is None else list(layer_ids)
    if len(layer_ids) != L:
        raise ValueError(f"attention has {L} layers but {len(layer_ids)} layer ids were given")
    cols = [f"H{h}" for h in range(H)]
    if with_mean:
        attn = np.concatenate([attn, attn.mean(axis=1, keepdims=True)], axis=1)  # (L, H+1, T, T)
        cols.append(words("chart.block.mean"))
    fig = _mosaic(
        attn,
        labels,
        labels,
        rows=[f"L{lay}" for lay in layer_ids],
        cols=cols,
        hover=_hover(words, "query", "key", "weight"),
        coloraxis=_attention_axis(words),
        title=title,
        block_words=_hover(words, "layer", "head"),
    )
    return _weight_scale(fig, attn, scale, words)


# A layer of a many-headed model (MiniLM: 12 heads and their mean) is drawn as a few columns of
# heads, one chart each, side by side on a desktop and one under the other on a phone (the UI
# puts them in st.columns, which stack on a narrow screen). A column's plot is sized for
# COLUMN_PX: about what each of three columns leaves for cells at 1024 px and more, and less
# than a phone's whole width, so its cells fit on both. Its column labels are rotated text
# MIN_LABEL_PX apart at least (a 10 px font's line), every k-th token when the cells are narrower.
COLUMN_PX = 200
MIN_LABEL_PX = 14
COLUMN_ROW_PX = 16  # a row of cells: a 10 px token label, with room to spare
# Every tick label costs the browser a text measurement on every redraw: at 32 word-pieces a
# column of 5 squares labelled on every row took 160 labels, and a keystroke on MiniLM was slow
# to repaint its three columns (bench/ui_latency.py --models reverse,minilm). Beyond this many
# rows per square, every k-th row is labelled (the hover names each cell anyway).
MAX_ROW_LABELS = 16
COLUMN_TOP_PX = 64  # the top margin of every column: the colour bar and the first block's title
BLOCKS_META = "blocks"  # layout.meta's key for a column of blocks (see _square_column)


def attention_column(
    attn: np.ndarray,
    labels: Sequence[str],
    layer: int,
    heads: Sequence[int],
    with_mean: bool = False,
    show_scale: bool = True,
    title: str = "",
    *,
    words: Words = english,
    scale: str = FIXED,
) -> go.Figure:
    """Some heads of one layer, one above the other, each titled ("L0 H3") and readable.

    Args:
        attn: (H, T, T) one layer's attention weights, queries on rows, keys on columns.
        labels: T token labels (under the last block, and beside every block's rows).
        layer: the layer's number, for the block titles.
        heads: the heads this column shows, in order (e.g. 0..4 of 12).
        with_mean: add the mean of ALL the layer's heads as a last block.
        show_scale: draw the colour bar (0..1, across the top): one column of a layer has it,
            the others keep its place empty so that their blocks line up.
        title: figure title (none by default: the page titles the layer once).
        words: the figure's own words (tfviz.plots.style); English by default.
        scale: how the weights are coloured, one of WEIGHT_SCALES; a fitted range spans the
            whole layer (attn), so that the layer's columns share it.
    """
    attn = _token_square(attn, labels, "attention", "(heads, queries, keys)")
    return attention_grid_column(
        attn[None], labels, [layer], heads, with_mean, show_scale, title, words=words, scale=scale
    )


def attention_grid_column(
    attn: np.ndarray,
    labels: Sequence[str],
    layer_ids: Sequence[int],
    heads: Sequence[int],
    with_mean: bool = False,
    show_scale: bool = True,
    title: str = "",
    *,
    words: Words = english,
    scale: str = FIXED,
) -> go.Figure:
    """Some heads of every layer given, one above the other ("L0 H0", "L0 H1", "L1 H0"...): a
    column of a layout that puts a few such columns side by side on a wide screen and one under
    the other on a phone (tfviz.ui.heads), where one mosaic of every head (attention_grid)
    left each head a sliver.

    Args:
        attn: (L, H, T, T) attention weights of the layers shown.
        layer_ids: the layer number of each of attn's layers.
        heads, with_mean, show_scale, title, words, scale: as attention_column (with_mean: each
            layer's mean of all its heads after its heads; a fitted scale spans all of attn).
    """
    attn = _token_square(attn, labels, "attention", "(layers, heads, queries, keys)")
    layer_ids = list(layer_ids)
    if len(layer_ids) != attn.shape[0]:
        raise ValueError(f"attention has {attn.shape[0]} layers but {len(layer_ids)} layer ids")
    heads = _column_heads(attn.shape[1], heads, with_mean)
    blocks, names, starts = [], [], []
    for i, layer in enumerate(layer_ids):
        starts.append(len(blocks))  # each layer's first block opens a row of the grid
        blocks += [attn[i, h] for h in heads]
        names += [f"L{layer} H{h}" for h in heads]
        if with_mean:
            blocks.append(attn[i].mean(axis=0))
            names.append(f"L{layer} {words('chart.block.mean')}")
    fig = _square_column(
        np.stack(blocks),
        labels,
        names,
        hover=_hover(words, "query", "key", "weight"),
        coloraxis=_attention_axis(words),
        scale_title=words("chart.word.weight"),
        show_scale=show_scale,
        title=title,
        block_word=words("chart.word.head"),
        row_starts=starts,
    )
    return _weight_scale(
        fig, np.concatenate([attn, attn.mean(axis=1, keepdims=True)], 1), scale, words
    )


def norm_attention_column(
    norms: np.ndarray,
    summed: np.ndarray,
    labels: Sequence[str],
    layer: int,
    heads: Sequence[int],
    with_total: bool,
    top: float,
    show_scale: bool = True,
    *,
    words: Words = english,
) -> go.Figure:
    """Some heads' norm-based attention, one above the other, as attention_column lays them out
    (for many-headed layers: MiniLM's 12 heads in one row left ~6 px a word-piece).

    Args:
        norms, summed, labels, layer: as norm_attention_grid.
        heads: the heads this column shows; with_total: add the all-heads block last.
        top: the colour scale's top, the same for every column of the layer (the largest norm).
        words: the figure's own words (tfviz.plots.style); English by default.
    """
    norms = _token_square(norms, labels, "per-head norm-based attention", "(heads, queries, keys)")
    summed = _token_square(summed, labels, "summed norm-based attention", "(queries, keys)")
    heads = _column_heads(norms.shape[0], heads, with_total)
    blocks = [norms[h] for h in heads] + ([summed] if with_total else [])
    names = [f"H{h}" for h in heads] + ([words("chart.block.all_heads")] if with_total else [])
    if not np.isfinite(np.stack(blocks)).all() or min(b.min() for b in blocks) < 0:
        raise ValueError("norm-based attention is a length: it must be finite and non-negative")
    return _square_column(
        np.stack(blocks),
        labels,
        [f"L{layer} {name}" for name in names],
        hover=_hover(words, "query", "key", "norm"),
        coloraxis=dict(colorscale=NORM_SCALE, cmin=0.0, cmax=float(top) or 1.0),
        scale_title="‖αf(x)‖",
        show_scale=show_scale,
        title="",
        block_word=words("chart.word.head"),
    )


def _column_heads(H: int, heads: Sequence[int], with_extra: bool) -> list[int]:
    heads = [int(h) for h in heads]
    bad = [h for h in heads if not 0 <= h < H]
    if bad:
        raise ValueError(f"the layer has heads 0..{H - 1}, not {bad}")
    if not heads and not with_extra:
        raise ValueError("a column needs at least one head, or the mean")
    return heads


def _square_column(
    blocks: np.ndarray,
    labels: Sequence[str],
    names: list[str],
    hover: tuple[str, str, str],
    coloraxis: dict,
    scale_title: str,
    show_scale: bool,
    title: str,
    block_word: str,
    row_starts: Sequence[int] = (0,),
) -> go.Figure:
    """(N, T, T) blocks one above the other, titled by names, sized for COLUMN_PX; block_word:
    what a block is ("head"), for the hover's line that names it.

    The figure says it is such a column in layout.meta["blocks"] (BLOCKS_META): rows (T), gap
    (the empty rows between two blocks) and starts (the blocks that open a new row of a grid, a
    layer's first). The app's canvas charts (tfviz.ui.widgets.canvas_charts) draw each block
    as a chart of its own and lay them out row by row: on a wide screen the first row reads
    "L0 H0, L0 H1, L0 H2", and a phone's one column reads them in order too (as one chart per
    column, a wide screen's first row read H0, H5, H9). A page that draws the figure whole
    (plotly, an exported page) shows the blocks in the same order, one above the other."""
    T = len(labels)
    every = max(1, math.ceil(MIN_LABEL_PX / (COLUMN_PX / T)))
    every_row = max(1, math.ceil(T / MAX_ROW_LABELS))
    fig = _mosaic(
        blocks[:, None],  # (blocks, 1, T, T): one block per row
        labels,
        labels,
        rows=names,
        cols=[""],
        hover=hover,
        coloraxis=dict(
            coloraxis,
            showscale=show_scale,
            colorbar=dict(
                title=dict(text=scale_title, side="right"),
                orientation="h",
                x=0.5,
                xanchor="center",
                y=1.0,
                yref="container",
                yanchor="top",
                ypad=8,
                thickness=10,
                len=0.7,
            ),
        ),
        title=title,
        x_tick_every=every,
        width_px=COLUMN_PX,
        row_px=COLUMN_ROW_PX if every_row == 1 else MIN_LABEL_PX / every_row + 6,
        y_tick_every=every_row,
        block_words=(block_word, ""),
    )
    # Margins sized here from the longest label instead of plotly's automargin, which measures
    # every tick label and lays the chart out again: three columns of them on every keystroke.
    # 7 px a letter at the 10 px font, and the tick and its gap: plotly's SVG text (a toy
    # model's columns) needs that much; 6 px a letter let its "BOS" stick out at the bottom.
    room = 16 + 7 * max(sum(2 if _is_wide(c) else 1 for c in label) for label in labels)
    fig.layout.margin.update(t=COLUMN_TOP_PX, l=room + 4, b=room)
    fig.layout.xaxis.automargin = False
    fig.layout.yaxis.automargin = False
    fig.layout.xaxis.tickfont.size = 10
    # Upright at every width: where there is room plotly tilts them, and tilted labels' boxes
    # overlap their neighbours'.
    fig.layout.xaxis.tickangle = -90
    fig.layout.yaxis.tickfont.size = 10
    fig.layout.meta = {BLOCKS_META: dict(rows=T, gap=GAP_ROWS, starts=[int(s) for s in row_starts])}
    return fig


def attention_map(
    weights: np.ndarray,
    labels: Sequence[str],
    title: str = "",
    *,
    words: Words = english,
    scale: str = FIXED,
) -> go.Figure:
    """One head's attention, enlarged: (T, T) weights, queries on rows, keys on columns; scale:
    how they are coloured (WEIGHT_SCALES)."""
    weights = _attention(weights, labels, ndim=2)
    ticks, names = escape_labels(labels), hover_labels(labels)  # shown; hovered (exact pieces)
    query, key, weight = _hover(words, "query", "key", "weight")
    trace = _heatmap(
        weights, names, names, f"{query} %{{y}}<br>{key} %{{x}}<br>{weight} %{{z:.3f}}"
    )
    T = len(labels)
    # Rows of 24 px up to MAP_MAX_PX in all; a longer input (hundreds of word-pieces) keeps the
    # map that tall, one image, and labels every k-th token on both axes (the hover names each).
    rows_px = min(24 * T, MAP_MAX_PX)
    shown = labelled(ticks, math.ceil(MIN_LABEL_PX / (rows_px / T)))
    axis = dict(
        type="category", tickvals=[names[i] for i in shown], ticktext=[ticks[i] for i in shown]
    )
    layout = dict(
        title=dict(text=title),
        height=max(360, rows_px + 140),
        margin=MARGIN,
        coloraxis=_attention_axis(words),
        xaxis=axis,
        yaxis=dict(axis, autorange="reversed"),
        # Zoomable in the app's canvas charts (tfviz/plots/standalone.js), which thin every
        # token's label for the cells shown: zooming in names the tokens the whole map had no
        # room for. plotly, which draws its given ticks only, gets the thinned ones above.
        dragmode="zoom",
        meta=dict(labels=ticks),
    )
    return _weight_scale(_figure(trace, layout), weights, scale, words)


MAP_MAX_PX = 900  # the tallest an enlarged attention map is drawn (a long input's whole map)


def norm_attention_grid(
    norms: np.ndarray,
    summed: np.ndarray,
    labels: Sequence[str],
    layer: int,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """Norm-based attention of one layer: one block per head, and one for all heads together.

    Args:
        norms: (H, T, T) ||alpha_ij^h f^h(x_j)|| per head (queries on rows, keys on columns).
        summed: (T, T) ||sum_h alpha_ij^h f^h(x_j)||: everything j sends to i through the layer.
        labels: T token labels.
        layer: the layer's number (names the blocks).
        title: figure title.
    The colour scale runs from 0 to the largest value shown, shared by every block (they are all
    lengths in the same residual-stream space), so heads that write little look faint.
    """
    norms = _token_square(norms, labels, "per-head norm-based attention", "(heads, queries, keys)")
    summed = _token_square(summed, labels, "summed norm-based attention", "(queries, keys)")
    blocks = np.concatenate([norms, summed[None]], axis=0)[None]  # (1, H+1, T, T)
    if not np.isfinite(blocks).all() or (blocks < 0).any():
        raise ValueError("norm-based attention is a length: it must be finite and non-negative")
    top = float(blocks.max(initial=0.0)) or 1.0  # all zero (W_o zeroed): still a valid scale
    H = norms.shape[0]
    return _mosaic(
        blocks,
        labels,
        labels,
        rows=[f"L{layer}"],
        cols=[f"H{h}" for h in range(H)] + [words("chart.block.all_heads")],
        hover=_hover(words, "query", "key", "norm"),
        coloraxis=dict(
            colorscale=NORM_SCALE, cmin=0.0, cmax=top, colorbar=dict(title=dict(text="‖αf(x)‖"))
        ),
        title=title,
        block_words=_hover(words, "layer", "head"),
    )


def rollout_grid(
    raw: np.ndarray,
    norm: np.ndarray,
    labels: Sequence[str],
    names: tuple[str, str] | None = None,
    title: str | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """Attention rollout per layer (rows) from two kinds of weights (columns), colours 0..1.

    Args:
        raw, norm: (L, T, T) rollout after each layer; row i of layer l says how much of token i's
            representation there traces back to each input token (rows sum to 1).
        labels: T token labels.
        names: the two columns' names (default "from raw attention" and "from norm-based" in
            words); title: the figure's (default "Attention rollout through the layers").
    """
    if names is None:
        names = (words("chart.block.from_raw"), words("chart.block.from_norm"))
    if title is None:
        title = words("chart.title.rollout")
    raw = _token_square(raw, labels, "raw rollout", "(layers, tokens, inputs)")
    norm = _token_square(norm, labels, "norm-based rollout", "(layers, tokens, inputs)")
    if raw.shape != norm.shape:
        raise ValueError(f"the two rollouts differ in shape: {raw.shape} and {norm.shape}")
    L = raw.shape[0]
    return _mosaic(
        np.stack([raw, norm], axis=1),  # (L, 2, T, T)
        labels,
        labels,
        rows=[words("chart.block.after_layer", layer=lay) for lay in range(L)],
        cols=[_escape(n) for n in names],
        hover=_hover(words, "token", "input", "share"),
        coloraxis=dict(
            colorscale=ATTENTION_SCALE,
            cmin=0.0,
            cmax=1.0,
            colorbar=dict(title=dict(text=words("chart.word.share"))),
        ),
        title=title,
    )


def _attention(attn, labels: Sequence[str], ndim: int) -> np.ndarray:
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim != ndim:
        axes = "(layers, heads, queries, keys)" if ndim == 4 else "(queries, keys)"
        raise ValueError(f"attention must be {ndim}-d {axes}, got shape {attn.shape}")
    queries, keys = attn.shape[-2:]
    if keys != len(labels):
        raise ValueError(f"attention has {keys} keys but {len(labels)} tokens were given")
    if queries != len(labels):
        raise ValueError(f"attention has {queries} queries but {len(labels)} tokens were given")
    return attn
