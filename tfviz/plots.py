"""Plotly figures from numpy arrays and token labels: attention maps, W_o before/after, drift.

The renderer never runs a model: every function takes arrays and labels, checks their shapes at
the boundary (a mismatch raises ValueError saying which axis disagrees with what) and sends
float32. Token labels are HTML-escaped, because plotly reads tick labels and hover text as HTML:
a token "<b>x</b>" must be shown as typed, not in bold.

Figures are built as plain dicts and validated once by go.Figure. A grid of heatmaps (every
layer x head) is drawn as one heatmap trace on one pair of axes: the blocks are tiled into a
mosaic with empty (NaN) rows and columns between them, and every row and column gets a unique
category name ("L0 query a·1", "H2 key b·2") that the hover shows, while the tick text shows
only the token. The browser draws that in about 40 ms; the same grid as 8 subplots took about
170 ms, and a keystroke redraws it.

The words a figure writes itself (axis and colour-bar titles, block names, legend names, hover
labels, default titles) are not written here: every figure function takes `words`, a function
words(key, **values) -> text of a catalogue key under "chart." (see Words). The default,
`english`, reads the English text from the app's catalogue; the app passes its own for the
student's language. Text a caller passes (a title, legend names) is used as given.
"""

from __future__ import annotations

import functools
import html
import json
import math
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import plotly.colors
import plotly.graph_objects as go

# ---- the words a figure is written in --------------------------------------------------------

# words(key, **values) -> text: a chart text by its catalogue key ("chart.word.query"), with its
# {placeholders} filled ("chart.block.layer_out", layer=0 -> "L0 out"). Each English chart text
# is written once, in the app's English catalogue tfviz/ui/locales/en.json, next to the same key
# in every other language (tests/test_i18n.py keeps the catalogues' keys and placeholders equal):
# `english` reads it from there as a plain JSON file, so the library imports no UI code and no
# streamlit. The app passes tfviz.ui.widgets.plot_words() (tfviz.ui.i18n.translate in the
# student's language); a figure's words are then right when it is built, with nothing to
# translate back afterwards.
Words = Callable[..., str]
CHART_KEYS = "chart."  # every key a figure asks words for starts with this
ENGLISH_CATALOGUE = Path(__file__).resolve().parent / "ui" / "locales" / "en.json"


@functools.cache
def _english_texts() -> dict[str, str]:
    data = json.loads(ENGLISH_CATALOGUE.read_text(encoding="utf-8"))
    return {key: text for key, text in data.items() if key.startswith(CHART_KEYS)}


def english(key: str, **values) -> str:
    """The default words: key's English text from the catalogue, its placeholders filled from
    values. A key the catalogue lacks raises KeyError (a bug in this module, not a blank)."""
    return _english_texts()[key].format(**values)


def _hover(words: Words, *labels: str) -> tuple[str, ...]:
    """The hover labels of chart.word.<label>, e.g. ("query", "key", "weight") in words."""
    return tuple(words(f"chart.word.{label}") for label in labels)


def _scale(colours: Sequence[str], start: float = 0.0) -> list[list]:
    """A plotly colour scale: colours evenly spaced from start to 1."""
    n = len(colours) - 1
    # min(): plotly refuses a last stop of 1.0000000000000002.
    return [[min(1.0, start + (1.0 - start) * i / n), c] for i, c in enumerate(colours)]


# Colour scales readable with colour-vision deficiency (tests/test_share.py simulates the three
# kinds). Sequential (weights, shares, norms, scores: 0 and up): white for 0, then cividis
# reversed, light yellow to dark blue. Cividis varies along the blue-yellow axis that red-green
# colour blindness keeps (Nuñez et al. 2018), and its lightness falls steadily, so "darker =
# more" holds in every kind of vision and in grey print; the white start keeps empty cells white.
SEQUENTIAL_SCALE = [[0.0, "#ffffff"]] + _scale(plotly.colors.sequential.Cividis[::-1], 0.08)
# Diverging (signed values, centred on 0): ColorBrewer's PuOr, purple negative, white zero,
# orange positive: the two sides differ in hue along the blue-yellow axis and in lightness, so
# the sign stays readable without red-green vision (where red and green would merge).
DIVERGING_SCALE = _scale(plotly.colors.diverging.PuOr[::-1])
ATTENTION_SCALE = SEQUENTIAL_SCALE  # attention weights, and every other 0..1 share


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


MOSAIC_PX = 900  # width the mosaic's cells are sized for (the wide layout's main column)
MARGIN = dict(l=10, r=10, t=70, b=40)
# A legend under a chart, at the bottom of the figure, in rows as the width allows: placed at a
# share of the plot's height under it, it ran into the x axis's title once a phone's width put
# it on two or three rows. The bottom margin holds the axis title and three rows.
BOTTOM_LEGEND = dict(
    orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.0, xanchor="left"
)
LEGEND_MARGIN = dict(MARGIN, b=120)
TITLE_UNITS = 40  # a chart title's line: about a phone's width at plotly's 17 px title font


def escape_labels(labels: Sequence[str]) -> list[str]:
    """Labels made safe for plotly: HTML-escaped, and refused if two would merge on an axis."""
    out = [html.escape(str(label), quote=False) for label in labels]
    if len(set(out)) != len(out):
        raise ValueError("token labels must be unique, or the axis merges equal tokens")
    return out


def attention_grid(
    attn: np.ndarray,
    labels: Sequence[str],
    layer_ids: Sequence[int] | None = None,
    title: str = "",
    with_mean: bool = False,
    *,
    words: Words = english,
) -> go.Figure:
    """Every layer x head as a heatmap: rows are layers, columns heads, colours 0..1.

    Args:
        attn: (L, H, T, T) attention weights, queries on rows and keys on columns.
        labels: T token labels.
        layer_ids: the layer number of each row (default 0..L-1), for a slice of layers.
        title: figure title.
        with_mean: add a last column with the mean of each layer's heads (what one big head
            averaging them would look like).
        words: the figure's own words (module docstring); English by default.
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
    return _mosaic(
        attn,
        labels,
        labels,
        rows=[f"L{lay}" for lay in layer_ids],
        cols=cols,
        hover=_hover(words, "query", "key", "weight"),
        coloraxis=_attention_axis(words),
        title=title,
    )


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
# column of 5 squares labelled on every row took 160 labels, and a keystroke on MiniLM about 2 s
# to repaint its three columns (bench/ui_latency.py --models reverse,minilm). Beyond this many
# rows per square, every k-th row is labelled (the hover names each cell anyway).
MAX_ROW_LABELS = 16
COLUMN_TOP_PX = 64  # the top margin of every column: the colour bar and the first block's title


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
        words: the figure's own words (module docstring); English by default.
    """
    attn = _token_square(attn, labels, "attention", "(heads, queries, keys)")
    heads = _column_heads(attn.shape[0], heads, with_mean)
    blocks = [attn[h] for h in heads]
    names = [f"H{h}" for h in heads]
    if with_mean:
        blocks.append(attn.mean(axis=0))
        names.append(words("chart.block.mean"))
    return _square_column(
        np.stack(blocks),
        labels,
        [f"L{layer} {name}" for name in names],
        hover=_hover(words, "query", "key", "weight"),
        coloraxis=_attention_axis(words),
        scale_title=words("chart.word.weight"),
        show_scale=show_scale,
        title=title,
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
        words: the figure's own words (module docstring); English by default.
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
) -> go.Figure:
    """(N, T, T) blocks one above the other, titled by names, sized for COLUMN_PX."""
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
    )
    # Margins sized here from the longest label instead of plotly's automargin, which measures
    # every tick label and lays the chart out again: three columns of them on every keystroke.
    room = 12 + 6 * max(sum(2 if _is_wide(c) else 1 for c in label) for label in labels)
    fig.layout.margin.update(t=COLUMN_TOP_PX, l=room + 4, b=room)
    fig.layout.xaxis.automargin = False
    fig.layout.yaxis.automargin = False
    fig.layout.xaxis.tickfont.size = 10
    # Upright at every width: where there is room plotly tilts them, and tilted labels' boxes
    # overlap their neighbours'.
    fig.layout.xaxis.tickangle = -90
    fig.layout.yaxis.tickfont.size = 10
    return fig


def attention_map(
    weights: np.ndarray, labels: Sequence[str], title: str = "", *, words: Words = english
) -> go.Figure:
    """One head's attention, enlarged: (T, T) weights, queries on rows, keys on columns."""
    weights = _attention(weights, labels, ndim=2)
    ticks = escape_labels(labels)
    query, key, weight = _hover(words, "query", "key", "weight")
    trace = _heatmap(
        weights, ticks, ticks, f"{query} %{{y}}<br>{key} %{{x}}<br>{weight} %{{z:.3f}}"
    )
    T = len(labels)
    # Rows of 24 px up to MAP_MAX_PX in all; a longer input (hundreds of word-pieces) keeps the
    # map that tall, one image, and labels every k-th token on both axes (the hover names each).
    rows_px = min(24 * T, MAP_MAX_PX)
    shown = _every(T, MIN_LABEL_PX / (rows_px / T))
    axis = dict(
        type="category", tickvals=[ticks[i] for i in shown], ticktext=[ticks[i] for i in shown]
    )
    layout = dict(
        title=dict(text=title),
        height=max(360, rows_px + 140),
        margin=MARGIN,
        coloraxis=_attention_axis(words),
        xaxis=axis,
        yaxis=dict(axis, autorange="reversed"),
    )
    return _figure(trace, layout)


MAP_MAX_PX = 900  # the tallest an enlarged attention map is drawn (a long input's whole map)


def _every(n: int, cells_per_label: float) -> range:
    """Which of n positions get a label when one label needs cells_per_label cells."""
    return range(0, n, max(1, math.ceil(cells_per_label)))


def activation_map(
    values: np.ndarray,
    labels: Sequence[str],
    n_heads: int | None = None,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """A (T, D) activation as a heatmap, tokens on rows and dimensions on columns.

    Args:
        values: (T, D) array, e.g. concat (before W_o) or attn_out (after W_o) of one layer.
        labels: T token labels.
        n_heads: if given, D is split into this many head blocks, marked with lines and H0, H1...
            (right for concat, where block h is head h's z; after W_o no block belongs to a head).
        title: figure title.
        words: the figure's own words (module docstring); English by default.
    """
    values = _float32(values, "activation", ndim=2)
    T, D = values.shape
    y = _token_axis(labels, T, "activation", "rows")
    token, dim, value = _hover(words, "token", "dim", "value")
    trace = _heatmap(
        values, np.arange(D), y, f"{token} %{{y}}<br>{dim} %{{x}}<br>{value} %{{z:.3f}}"
    )
    layout = dict(
        title=dict(text=title),
        height=max(300, 22 * T + 130),
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.dimension"))),
        yaxis=dict(type="category", autorange="reversed"),
    )
    titles = None
    if n_heads is not None:
        titles = _head_blocks(D, n_heads, layout)
    return _signed_figure(trace, layout, words, titles)  # MiniLM's L0 has outlier dimensions


def w_o_matrix(
    W_o: np.ndarray, n_heads: int, title: str = "W_o", *, words: Words = english
) -> go.Figure:
    """The (D, D) output projection in nn.Linear layout: rows = output dims, columns = input dims.

    Column block h reads head h's slice of concat; a row is one output dimension, and colour
    across all its blocks means that output dimension draws on every head.
    """
    W_o = _float32(W_o, "W_o", ndim=2)
    D_out, D_in = W_o.shape
    if D_out != D_in:
        raise ValueError(f"W_o must be square (D, D), got shape {W_o.shape}")
    output, input_, weight = _hover(words, "output_dim", "input_dim", "weight")
    trace = _heatmap(
        W_o,
        np.arange(D_in),
        np.arange(D_out),
        f"{output} %{{y}}<br>{input_} %{{x}}<br>{weight} %{{z:.3f}}",
    )
    layout = dict(
        title=dict(text=title),
        height=520,
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.input_dim_concat"))),
        yaxis=dict(title=dict(text=words("chart.axis.output_dim_attn_out")), autorange="reversed"),
    )
    titles = _head_blocks(D_in, n_heads, layout)
    return _signed_figure(trace, layout, words, titles)  # MiniLM's L0 W_o: a few outlier weights


def head_contributions(
    contrib: np.ndarray, token: str, title: str = "", *, words: Words = english
) -> go.Figure:
    """(H, D) per-head terms z_h W_o^h at one token: rows = heads, columns = output dims.

    Their column sums (plus b_o) are attn_out at that token; a column coloured in every row is an
    output dimension that mixes all heads.
    """
    contrib = _float32(contrib, "head contributions", ndim=2)
    H, D = contrib.shape
    trace = _heatmap(
        contrib,
        np.arange(D),
        [f"H{h}" for h in range(H)],
        "%{{y}}<br>{} %{{x}}<br>{} %{{z:.3f}}".format(*_hover(words, "output_dim", "value")),
    )
    layout = dict(
        title=dict(text=title or words("chart.title.head_terms", token=_escape(token))),
        height=max(260, 36 * H + 140),
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.output_dim_attn_out"))),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _signed_figure(trace, layout, words)  # MiniLM's L0: a term 25x the 99th percentile


def cosine_bars(
    cosine: np.ndarray, labels: Sequence[str], title: str = "", *, words: Words = english
) -> go.Figure:
    """One bar per token: a cosine in [-1, 1] (e.g. between concat and attn_out)."""
    cosine = _float32(cosine, "cosine", ndim=1)
    x = _token_axis(labels, len(cosine), "cosine", "values")
    token, cos = _hover(words, "token", "cosine")
    trace = dict(
        type="bar",
        x=x,
        y=cosine,
        hovertemplate=f"{token} %{{x}}<br>{cos} %{{y:.3f}}<extra></extra>",
    )
    layout = dict(
        title=dict(text=title),
        height=300,
        margin=MARGIN,
        xaxis=dict(type="category"),
        yaxis=dict(range=[-1.05, 1.05], title=dict(text=cos)),
    )
    return _figure(trace, layout)


# A few dimensions of a real model's activations are outliers (MiniLM's residual dimension 99
# reaches about 10 where 99% of all values are below 1.9; its layer-0 attn_out 4.3 against 0.54):
# a colour scale spanning them leaves every other cell near white. When the largest |value|
# exceeds ROBUST_RATIO times the ROBUST_PERCENTILE of |value|, colours stop at that percentile
# instead, the cells beyond are drawn at the scale's ends and ringed, and the colour bar's end
# labels say "≥". The bundled toy models' largest values stay under 2.3 times their 99th
# percentile (residual stream, concat, attn_out, learned and W_o off), so their scale stays the
# full range.
ROBUST_PERCENTILE = 99.0
ROBUST_RATIO = 3.0
CLIPPED_KEY = "chart.word.beyond_range"  # the hover line of a cell drawn at the scale's end


def colour_limit(values: np.ndarray) -> tuple[float, bool]:
    """The symmetric colour range +-limit for signed values, and whether it clips any.

    Returns:
        (limit, clipped): the largest |value|, or the ROBUST_PERCENTILE of |value| when the
        largest exceeds it ROBUST_RATIO times (then clipped is True); 1.0 for all zeros.
    """
    magnitude = np.abs(np.asarray(values, dtype=np.float32))
    top = float(magnitude.max(initial=0.0))
    if top == 0.0 or not np.isfinite(top):
        return (top if top else 1.0), False
    robust = float(np.percentile(magnitude, ROBUST_PERCENTILE))
    if robust > 0.0 and top > ROBUST_RATIO * robust:
        return robust, True
    return top, False


def residual_pair(
    base: np.ndarray,
    switched: np.ndarray,
    labels: Sequence[str],
    names: tuple[str, str] | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """Residual streams (L, T, D) of two passes side by side, one row per layer, shared colours.

    The colour range is colour_limit's: for a model with outlier dimensions, the 99th
    percentile, with the cells beyond it ringed (their hover says so) and the colour bar's ends
    labelled "≤ -limit" and "≥ limit". names: the two columns' names (default "learned W_o" and
    "switched" in words).
    """
    if names is None:
        names = (words("chart.block.learned_w_o"), words("chart.block.switched"))
    base = _float32(base, "residual stream", ndim=3)
    switched = _float32(switched, "residual stream", ndim=3)
    if base.shape != switched.shape:
        raise ValueError(f"residual streams differ in shape: {base.shape} and {switched.shape}")
    L, T, D = base.shape
    _token_axis(labels, T, "residual stream", "tokens")
    blocks = np.stack([base, switched], axis=1)  # (L, 2, T, D)
    coloraxis, clipped_at = _signed_axis(blocks)
    fig = _mosaic(
        blocks,
        labels,
        [str(d) for d in range(D)],
        rows=[words("chart.block.layer_out", layer=lay) for lay in range(L)],
        cols=list(names),
        hover=_hover(words, "token", "dim", "value"),
        coloraxis=coloraxis,
        title=words("chart.title.residual_stream"),
        x_tick_every=max(1, D // 8),
    )
    if clipped_at is not None:
        fig.add_trace(_clipped_cells(fig.data[0], clipped_at, words))
    return fig


def _signed_axis(values: np.ndarray) -> tuple[dict, float | None]:
    """A colour axis centred on 0 over colour_limit's range, and the limit when it clips (then
    the colour bar's end labels read "≤ -limit" and "≥ limit"), else None."""
    limit, clipped = colour_limit(values)
    axis = dict(colorscale=DIVERGING_SCALE, cmin=-limit, cmax=limit)
    if not clipped:
        return axis, None
    ticks = [-limit, -limit / 2, 0.0, limit / 2, limit]
    text = [f"{v:.2g}" for v in ticks]
    text[0], text[-1] = f"≤ {text[0]}", f"≥ {text[-1]}"
    axis["colorbar"] = dict(tickvals=ticks, ticktext=text)
    return axis, limit


def _signed_figure(
    trace: dict, layout: dict, words: Words, titles: dict | None = None
) -> go.Figure:
    """A one-heatmap figure of signed values on _signed_axis's colours, with the clipped cells
    ringed when the range clips; titles: a _block_titles trace drawn last, if given."""
    layout["coloraxis"], clipped_at = _signed_axis(trace["z"])
    traces = [trace]
    if clipped_at is not None:
        traces.append(_clipped_cells(trace, clipped_at, words))
    if titles is not None:
        traces.append(titles)
    return _figure_of(traces, layout)


def _clipped_cells(heatmap, limit: float, words: Words) -> dict:
    """A scatter of small rings on a mosaic heatmap's cells whose |value| exceeds limit; its
    hover (which wins over the heatmap's near a ring) gives the value and says it is clipped."""
    z = np.asarray(heatmap["z"], dtype=np.float32)
    rows, cols = np.nonzero(np.nan_to_num(np.abs(z)) > limit)
    x, y = np.asarray(heatmap["x"]), np.asarray(heatmap["y"])
    # The mark goes on a line of its own before the value (the last line carries plotly's
    # <extra></extra>).
    lines = heatmap["hovertemplate"].replace("%{z:", "%{customdata:").split("<br>")
    template = "<br>".join([*lines[:-1], words(CLIPPED_KEY), lines[-1]])
    return dict(
        type="scatter",
        x=x[cols].tolist(),
        y=y[rows].tolist(),
        customdata=z[rows, cols],
        mode="markers",
        marker=dict(symbol="circle-open", size=4, color="rgba(0,0,0,0.7)", line=dict(width=1)),
        showlegend=False,
        hovertemplate=template,
    )


def drift_bars(drift: np.ndarray, *, words: Words = english) -> go.Figure:
    """(L,) cosine drift of the residual stream per layer: 0 unchanged, 1 unrelated, 2 opposite."""
    drift = _float32(drift, "drift", ndim=1)
    (name,) = _hover(words, "drift")
    trace = dict(
        type="bar",
        x=[f"L{lay}" for lay in range(len(drift))],
        y=drift,
        hovertemplate=f"%{{x}}<br>{name} %{{y:.3f}}<extra></extra>",
    )
    top = max(1.0, float(drift.max(initial=0.0)) * 1.05)
    layout = dict(
        title=dict(text=words("chart.title.drift")),
        height=300,
        margin=MARGIN,
        yaxis=dict(range=[0, top], title=dict(text=name)),
    )
    return _figure(trace, layout)


def loss_curve(
    losses: Sequence[float],
    every: int = 1,
    total_steps: int | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """Training loss against step (log scale); losses[i] is the mean near step (i + 1) * every."""
    losses = _float32(losses, "loss", ndim=1)
    steps = (np.arange(len(losses)) + 1) * max(1, int(every))
    positive = len(losses) > 0 and bool((losses > 0).all())
    trace = dict(
        type="scatter",
        x=steps,
        y=losses,
        mode="lines",
        hovertemplate="{} %{{x}}<br>{} %{{y:.4f}}<extra></extra>".format(
            *_hover(words, "step", "loss")
        ),
    )
    layout = dict(
        title=dict(text=words("chart.title.training_loss")),
        height=300,
        margin=MARGIN,
        xaxis=dict(
            title=dict(text=words("chart.word.step")),
            range=[0, total_steps] if total_steps else None,
        ),
        yaxis=dict(title=dict(text=words("chart.word.loss")), type="log" if positive else "linear"),
    )
    return _figure(trace, layout)


# ---- helpers --------------------------------------------------------------------------------


def _figure(trace: dict, layout: dict) -> go.Figure:
    """One-trace figure whose axes make room for their tick labels (long tokens included)."""
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, **layout.get(axis, {})}
    return go.Figure(data=[trace], layout=layout)


def _escape(text: str) -> str:
    return html.escape(str(text), quote=False)


def _float32(values, what: str, ndim: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-d, got shape {values.shape}")
    return values


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


def _token_axis(labels: Sequence[str], n: int, what: str, axis: str) -> list[str]:
    if len(labels) != n:
        raise ValueError(f"{what} has {n} {axis} but {len(labels)} tokens were given")
    return escape_labels(labels)


def _heatmap(z: np.ndarray, x, y, hover: str) -> dict:
    return dict(
        type="heatmap",
        z=z,
        x=x,
        y=y,
        coloraxis="coloraxis",
        hovertemplate=hover + "<extra></extra>",
    )


def _diverging(values: np.ndarray) -> dict:
    """A colour axis centred on 0 (range +-1 for an all-zero array, so it still draws)."""
    limit = float(np.abs(values).max(initial=0.0)) or 1.0
    return dict(colorscale=DIVERGING_SCALE, cmin=-limit, cmax=limit)


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
    """
    R, C, ny, nx = blocks.shape
    y_ticks, x_ticks = escape_labels(y_labels), escape_labels(x_labels)
    gap_y, gap_x = 2, 1  # empty rows leave room for the block titles
    z = np.full((R * (ny + gap_y) - gap_y, C * (nx + gap_x) - gap_x), np.nan, dtype=np.float32)
    for r in range(R):
        for c in range(C):
            y0, x0 = r * (ny + gap_y), c * (nx + gap_x)
            z[y0 : y0 + ny, x0 : x0 + nx] = blocks[r, c]
    y_names = _axis_names(rows, y_ticks, gap_y)
    x_names = _axis_names(cols, x_ticks, gap_x)
    y_rows = range(0, ny, y_tick_every)
    y_tickvals = [y_names[r * (ny + gap_y) + i] for r in range(R) for i in y_rows]
    # Every block has its columns in the same order, so only the first block column is ticked:
    # each tick label costs the browser a text measurement on every redraw (about 65 ms for the
    # 85 of a 2 x 5 grid at T=17), and the hover names each cell anyway.
    x_tickvals = [x_names[i] for i in range(0, nx, x_tick_every)]
    template = f"{hover[0]} %{{y}}<br>{hover[1]} %{{x}}<br>{hover[2]} %{{z:.3f}}"
    trace = _heatmap(z, x_names, y_names, template)
    trace["hoverongaps"] = False
    cell = max(5.0, min(30.0, width_px / z.shape[1]))
    if row_px is None:
        row_px = max(cell, 14.0)  # wide blocks (D columns) still get readable token rows
    tick_font = dict(size=9 if cell < 14 else 11)
    layout = dict(
        title=dict(text=title),
        height=int(z.shape[0] * row_px) + 150,
        margin=dict(l=10, r=10, t=80, b=50),
        coloraxis=coloraxis,
        plot_bgcolor="rgba(0,0,0,0)",  # the gaps show the page, not a grey band
        xaxis=dict(
            type="category",
            tickvals=x_tickvals,
            ticktext=[x_ticks[i] for i in range(0, nx, x_tick_every)],
            tickfont=tick_font,
            showgrid=False,
        ),
        yaxis=dict(
            type="category",
            tickvals=y_tickvals,
            ticktext=[y_ticks[i] for i in y_rows] * R,
            tickfont=tick_font,
            autorange="reversed",
            showgrid=False,
        ),
    )
    # Each title centred over its block, its foot on the top edge of the block's first row (in
    # the gap rows, or above the plot for the first block row), in cells as the heatmap's axes
    # count them: from -0.5 to n - 0.5, rows downwards. On the edge, not above it: plotly hides
    # a point outside its axes' range, and the first row's edge is the range's end.
    titles = _block_titles(
        [f"{rows[r]} {cols[c]}".strip() for r in range(R) for c in range(C)],
        x=[c * (nx + gap_x) + (nx - 1) / 2 for r in range(R) for c in range(C)],
        y=[r * (ny + gap_y) - 0.5 for r in range(R) for c in range(C)],
        x_range=[-0.5, z.shape[1] - 0.5],
        y_range=[z.shape[0] - 0.5, -0.5],
        layout=layout,
    )
    return _figure_of([trace, titles], layout)


def _axis_names(blocks: list[str], ticks: list[str], gap: int) -> list[str]:
    """Unique category names along one mosaic axis: "L0 a·1", then gap names."""
    names: list[str] = []
    for b, block in enumerate(blocks):
        names += [f"{block} {t}".strip() for t in ticks]
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


# ---- analysis views: W_o-aware attention, head importance, OV circuits, the experiment --------

NORM_SCALE = SEQUENTIAL_SCALE  # norms are lengths (>= 0, no fixed top)
CONDITION_COLOURS = {"learned": "31, 119, 180", "identity": "214, 39, 40"}  # RGB, experiment plot


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


def head_score_map(
    scores: np.ndarray, title: str = "", value: str | None = None, *, words: Words = english
) -> go.Figure:
    """One number per head: (L, H) as a heatmap, layers on rows, heads on columns, values written.

    Signed scores (loss or accuracy change) get a diverging scale centred on 0. value: what a
    score is, for the hover (default "score" in words).
    """
    if value is None:
        value = words("chart.word.score")
    scores = _float32(scores, "head scores", ndim=2)
    L, H = scores.shape
    if not np.isfinite(scores).all():
        raise ValueError("head scores must be finite")
    trace = _heatmap(
        scores,
        [f"H{h}" for h in range(H)],
        [f"L{lay}" for lay in range(L)],
        f"%{{y}} %{{x}}<br>{_escape(value)} %{{z:.4g}}",
    )
    trace.update(texttemplate="%{z:.3g}", textfont=dict(size=12))
    layout = dict(
        title=dict(text=title),
        height=max(220, 48 * L + 140),
        margin=MARGIN,
        coloraxis=_diverging(scores),
        xaxis=dict(type="category", side="top"),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure(trace, layout)


def keep_top_k_plot(
    curve: np.ndarray, k: int, metric: str | None = None, title: str = "", *, words: Words = english
) -> go.Figure:
    """The task metric left when only the k most important heads are kept, for every k.

    Args:
        curve: (N + 1,) metric for k = 0..N heads kept (N = L * H).
        k: the k to mark.
        metric: the metric's name, for the axis and hover (default "accuracy" in words).
    """
    if metric is None:
        metric = words("chart.word.accuracy")
    curve = _float32(curve, "keep-top-k curve", ndim=1)
    if len(curve) < 2:
        raise ValueError("the keep-top-k curve needs a value for k = 0 and at least one head")
    if not 0 <= k < len(curve):
        raise ValueError(f"k must be in 0..{len(curve) - 1}, got {k}")
    name = _escape(metric)
    ks = np.arange(len(curve))
    line = dict(
        type="scatter",
        x=ks,
        y=curve,
        mode="lines+markers",
        name=name,
        hovertemplate=f"{words('chart.word.heads_keep', n=len(curve) - 1)} %{{x}}<br>"
        f"{name} %{{y:.4g}}<extra></extra>",
    )
    mark = dict(
        type="scatter",
        x=[k],
        y=[curve[k]],
        mode="markers",
        name=f"k = {k}",
        marker=dict(size=14, symbol="circle-open", line=dict(width=3)),
        hoverinfo="skip",
    )
    layout = dict(
        title=dict(text=title),
        height=320,
        margin=MARGIN,
        showlegend=False,
        xaxis=dict(title=dict(text=words("chart.axis.heads_kept")), dtick=1),
        yaxis=dict(title=dict(text=name)),
    )
    return _figure_of([line, mark], layout)


def ablation_change_bars(
    before: np.ndarray,
    after: np.ndarray,
    labels: Sequence[str],
    names: tuple[str, str] | None = None,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """Per token, how far attn_out moved under two ways of removing a head: grouped bars.

    Args:
        before, after: (T,) ||attn_out - attn_out without ablation|| per token.
        labels: T token labels.
        names: the two bars' legend names (default "zeroed before W_o (right)" and "zeroed after
            W_o (mistake)" in words).
    """
    if names is None:
        names = (words("chart.name.zeroed_before"), words("chart.name.zeroed_after"))
    token, change = _hover(words, "token", "change")
    before = _float32(before, "change before W_o", ndim=1)
    after = _float32(after, "change after W_o", ndim=1)
    if before.shape != after.shape:
        raise ValueError(f"the two changes differ in shape: {before.shape} and {after.shape}")
    x = _token_axis(labels, len(before), "the change", "tokens")
    traces = [
        dict(
            type="bar",
            x=x,
            y=values,
            name=_escape(name),
            hovertemplate=f"{_escape(name)}<br>{token} %{{x}}<br>{change} %{{y:.3f}}"
            "<extra></extra>",
        )
        for values, name in ((before, names[0]), (after, names[1]))
    ]
    layout = dict(
        title=dict(text=title),
        height=320,
        margin=LEGEND_MARGIN,
        barmode="group",
        legend=BOTTOM_LEGEND,
        xaxis=dict(type="category"),
        yaxis=dict(title=dict(text="‖Δ attn_out‖"), rangemode="tozero"),
    )
    return _figure_of(traces, layout)


def singular_value_lines(sv: np.ndarray, title: str = "", *, words: Words = english) -> go.Figure:
    """Singular values of every head's OV circuit: one line per (layer, head), largest first.

    Args:
        sv: (L, H, d_k) singular values, descending along the last axis.
    """
    sv = _float32(sv, "singular values", ndim=3)
    if (sv < 0).any() or not np.isfinite(sv).all():
        raise ValueError("singular values must be finite and non-negative")
    L, H, d_k = sv.shape
    x = np.arange(1, d_k + 1)
    traces = [
        dict(
            type="scatter",
            x=x,
            y=sv[lay, h],
            mode="lines+markers",
            name=f"L{lay}H{h}",
            line=dict(dash="solid" if lay % 2 == 0 else "dot"),
            hovertemplate=f"L{lay}H{h}<br>σ_%{{x}} = %{{y:.4g}}<extra></extra>",
        )
        for lay in range(L)
        for h in range(H)
    ]
    layout = dict(
        title=dict(text=title),
        height=360,
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.sv_index")), dtick=max(1, d_k // 8)),
        yaxis=dict(title=dict(text=words("chart.axis.singular_value")), rangemode="tozero"),
    )
    return _figure_of(traces, layout)


def composition_grid(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    baseline: float,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """Q-, K- and V-composition from each head of layer l to each head of layer l + 1.

    Args:
        q, k, v: (L-1, H, H) scores; [l, h, g] is head h of layer l (rows, "writer") into head g
            of layer l + 1 (columns, "reader"), in [0, 1].
        baseline: what unrelated random matrices score (about 1/sqrt(D)), named in the title.
    """
    q = _float32(q, "Q-composition", ndim=3)
    k = _float32(k, "K-composition", ndim=3)
    v = _float32(v, "V-composition", ndim=3)
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"Q, K and V scores differ in shape: {q.shape}, {k.shape}, {v.shape}")
    pairs, H, H2 = q.shape
    if pairs == 0:
        raise ValueError("composition needs at least two layers (scores have 0 layer pairs)")
    if H != H2:
        raise ValueError(f"scores must be (layer pairs, H, H), got {q.shape}")
    heads = [f"H{h}" for h in range(H)]
    blocks = np.stack([q, k, v], axis=1)  # (L-1, 3, H, H)
    top = max(float(blocks.max(initial=0.0)), 2.0 * baseline, 1e-6)
    return _mosaic(
        blocks,
        heads,
        heads,
        rows=[f"L{lay}→L{lay + 1}" for lay in range(pairs)],
        cols=["Q", "K", "V"],
        hover=_hover(words, "writer", "reader", "score"),
        coloraxis=dict(
            colorscale=SEQUENTIAL_SCALE,
            cmin=0.0,
            cmax=top,
            colorbar=dict(title=dict(text=words("chart.word.score"))),
        ),
        title=title or words("chart.title.composition", baseline=f"{baseline:.3f}"),
    )


def head_shares_map(shares: np.ndarray, title: str = "", *, words: Words = english) -> go.Figure:
    """(D, H) share of each W_o output dimension's weight that reads each head, colours 0..1.

    A W_o that keeps heads apart (identity or block-diagonal) shows one coloured head per row:
    a staircase of blocks; a W_o that mixes shows colour across every row.
    """
    shares = _float32(shares, "head shares", ndim=2)
    D, H = shares.shape
    if not np.isfinite(shares).all() or (shares < 0).any():
        raise ValueError("head shares must be finite and non-negative")
    trace = _heatmap(
        shares,
        [f"H{h}" for h in range(H)],
        np.arange(D),
        "{} %{{y}}<br>{} %{{x}}<br>{} %{{z:.3f}}".format(
            *_hover(words, "output_dim", "reads", "share")
        ),
    )
    layout = dict(
        title=dict(text=title),
        height=max(300, min(640, 6 * D + 140)),
        margin=MARGIN,
        coloraxis=dict(
            colorscale=ATTENTION_SCALE,
            cmin=0.0,
            cmax=1.0,
            colorbar=dict(title=dict(text=words("chart.word.share"))),
        ),
        xaxis=dict(type="category", side="top"),
        yaxis=dict(title=dict(text=words("chart.axis.output_dim_w_o")), autorange="reversed"),
    )
    return _figure(trace, layout)


# The dependency maps' text above the cells, from the top of the plot up: tick labels (H0, H1),
# the axis title ("head"), then a panel's own title. Each band's height in px at the fonts used
# (12 px ticks and axis title, 14 px titles), with the gap plotly leaves between them.
DEP_TICKS_PX = 22
DEP_AXIS_TITLE_PX = 22
DEP_TITLE_LINE_PX = 19
# A panel title is wrapped to this many width units (a Latin letter 1, a CJK character 2): about
# the 130 px a panel of the pair gets on a 390 px phone at 14 px, so it never runs into the
# other panel's title, at any screen width (the figure cannot know the screen's).
DEP_TITLE_UNITS = 20


def dependency_map(
    dependency: np.ndarray,
    title: str = "",
    head_label: str | None = None,
    output_label: str | None = None,
    value_label: str | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """(D, H) how much output dimension d draws on head h (>= 0): output dims on rows, heads on
    columns, white (0) to dark blue (the largest value).

    Concatenation alone gives a staircase (one coloured head per row); a W_o that mixes colours
    every row. Small maps (up to 64 cells) have their numbers written in. The labels are passed
    in so the caller can give them in the student's language. The heads' names and the head
    axis title sit above the map, and the title above them (wrapped to fit a phone), so that no
    two texts share a place. A label not given is "head", "output dim" or "size" in words.
    """
    head_label, output_label, value_label = _dependency_labels(
        words, head_label, output_label, value_label
    )
    dependency = _float32(dependency, "dependency", ndim=2)
    D, H = dependency.shape
    if not np.isfinite(dependency).all() or (dependency < 0).any():
        raise ValueError("a dependency map must be finite and non-negative")
    top = float(dependency.max(initial=0.0)) or 1.0
    trace = _heatmap(
        dependency,
        [f"H{h}" for h in range(H)],
        [str(d) for d in range(D)],
        f"{_escape(output_label)} %{{y}}<br>{_escape(head_label)} %{{x}}<br>"
        f"{_escape(value_label)} %{{z:.3g}}",
    )
    if D * H <= 64:
        trace.update(texttemplate="%{z:.3g}", textfont=dict(size=13))
    title_lines = _wrap(title, DEP_TITLE_UNITS * 2)  # a whole figure's width: twice a panel's
    layout = dict(
        height=max(240, min(640, (40 if D <= 16 else 6) * D + 140))
        + DEP_TITLE_LINE_PX * max(0, len(title_lines) - 1),
        margin=dict(
            l=10, r=10, t=_dependency_top(len(title_lines)), b=MARGIN["b"] if D > 16 else 20
        ),
        coloraxis=dict(
            colorscale=ATTENTION_SCALE,
            cmin=0.0,
            cmax=top,
            colorbar=dict(title=dict(text=_escape(value_label))),
        ),
        xaxis=dict(
            type="category",
            side="top",
            tickfont=dict(size=12),
            title=dict(text=_escape(head_label), font=dict(size=12), standoff=4),
        ),
        yaxis=dict(type="category", autorange="reversed", title=dict(text=_escape(output_label))),
        annotations=[_dependency_title(title_lines, 0.5)] if title else [],
    )
    return _figure(trace, layout)


def _dependency_labels(words: Words, *labels: str | None) -> tuple[str, ...]:
    """The dependency maps' head, output and value labels, each defaulting to its word."""
    defaults = _hover(words, "head", "output_dim", "size")
    return tuple(d if label is None else label for label, d in zip(labels, defaults, strict=True))


def _dependency_title(lines: list[str], x: float) -> dict:
    """A dependency map's title (lines already escaped), centred on x (paper), its last line
    just above the head names and the head axis title, which plotly puts in the top margin.
    An annotation, not the layout's title: a title's lines are placed from the figure's top,
    and a wrapped one then runs into the axis title."""
    return dict(
        text="<br>".join(lines),
        x=x,
        y=1.0,
        xref="paper",
        yref="paper",
        xanchor="center",
        yanchor="bottom",
        yshift=DEP_TICKS_PX + DEP_AXIS_TITLE_PX + 4,
        showarrow=False,
        font=dict(size=14),
    )


def _dependency_top(title_lines: int) -> int:
    """The top margin of a dependency map: the head names, the head axis title and title_lines
    lines of title, stacked without touching."""
    return DEP_TICKS_PX + DEP_AXIS_TITLE_PX + DEP_TITLE_LINE_PX * title_lines + 12


def dependency_pair(
    without: np.ndarray,
    with_w: np.ndarray,
    titles: tuple[str, str] = ("", ""),
    head_label: str | None = None,
    output_label: str | None = None,
    value_label: str | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """Two dependency maps of the same shape side by side in ONE figure, on one colour scale.

    For the lesson's "without W_o" against "with W_o": one chart costs the browser one draw
    instead of two (bench/ui_latency.py --lesson-steps), and a shared scale makes the two
    comparable cell by cell. Each panel's title is wrapped to a panel's width on a phone and
    placed above its head names and head axis title; the colour bar lies under the maps, where
    it takes no width from them.
    """
    if np.shape(without) != np.shape(with_w):
        raise ValueError(f"the maps differ in shape: {np.shape(without)} and {np.shape(with_w)}")
    left, right = (
        dependency_map(m, "", head_label, output_label, value_label, words=words).to_dict()
        for m in (without, with_w)
    )
    traces = [left["data"][0], {**right["data"][0], "xaxis": "x2", "yaxis": "y2"}]
    wrapped = [_wrap(title, DEP_TITLE_UNITS) for title in titles]
    lines = max(1, *(len(w) for w in wrapped))
    layout = left["layout"]
    layout["coloraxis"]["cmax"] = max(
        left["layout"]["coloraxis"]["cmax"], right["layout"]["coloraxis"]["cmax"]
    )
    layout["coloraxis"]["colorbar"].update(
        orientation="h", x=0.5, xanchor="center", y=-0.04, yanchor="top", thickness=12, len=0.6
    )
    layout["coloraxis"]["colorbar"]["title"]["side"] = "right"
    layout["xaxis"] = {**layout["xaxis"], "domain": [0.0, 0.45]}
    layout["xaxis2"] = {**right["layout"]["xaxis"], "domain": [0.55, 1.0], "anchor": "y2"}
    layout["yaxis2"] = {**right["layout"]["yaxis"], "anchor": "x2", "title": {"text": ""}}
    layout["title"] = {"text": ""}
    layout["margin"] = {**layout["margin"], "t": _dependency_top(lines), "b": 70}
    layout["height"] = layout["height"] + DEP_TITLE_LINE_PX * (lines - 1) + 50
    layout["annotations"] = [
        _dependency_title(lines_of_title, x)
        for lines_of_title, x in zip(wrapped, (0.225, 0.775), strict=True)
    ]
    return go.Figure(data=traces, layout=layout)


def _wrap(text: str, units: int) -> list[str]:
    """text HTML-escaped and cut into lines of at most `units` width units (a CJK character
    counts 2, any other 1), at spaces, or between CJK characters; a longer word keeps a line of
    its own. Plotly does not wrap text itself."""
    lines: list[str] = []
    line, width = "", 0
    for word in _words(str(text)):
        w = sum(2 if _is_wide(c) else 1 for c in word)
        if line and width + w > units and word != " ":
            lines.append(line.rstrip())
            line, width = "", 0
        if not line and word == " ":
            continue
        line, width = line + word, width + w
    if line.strip():
        lines.append(line.rstrip())
    return [_escape(x) for x in lines] or [""]


def _words(text: str) -> list[str]:
    """text as words, spaces and single CJK characters (each a place a line may break)."""
    out: list[str] = []
    word = ""
    for c in text:
        if c == " " or _is_wide(c):
            if word:
                out.append(word)
            out.append(c)
            word = ""
        else:
            word += c
    if word:
        out.append(word)
    return out


def _is_wide(c: str) -> bool:
    """A character that takes about two Latin letters' width: CJK and full-width forms."""
    return unicodedata.east_asian_width(c) in ("W", "F")


def experiment_curves(
    step: np.ndarray,
    mean: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    conditions: Sequence[str] = ("learned", "identity"),
    names: Sequence[str] | None = None,
    title: str | None = None,
    *,
    words: Words = english,
) -> go.Figure:
    """Mean loss curve of each condition with a shaded band (e.g. mean ± std across seeds).

    Args:
        step: (S,) step numbers.
        mean, lower, upper: (C, S) per condition.
        conditions: C condition keys (pick the colours); names: their legend names (default
            "with W_o" and "without W_o" in words).
        title: default "Training loss: mean over seeds, band = mean ± 1 std" in words.
    The y axis is logarithmic when every value drawn is positive, else linear.
    """
    if names is None:
        names = (words("chart.name.with_w_o"), words("chart.name.without_w_o"))
    if title is None:
        title = words("chart.title.experiment")
    step_word, mean_loss = _hover(words, "step", "mean_loss")
    step = _float32(step, "steps", ndim=1)
    mean = _float32(mean, "mean loss curve", ndim=2)
    lower = _float32(lower, "band lower edge", ndim=2)
    upper = _float32(upper, "band upper edge", ndim=2)
    if not mean.shape == lower.shape == upper.shape:
        raise ValueError(
            f"mean, lower and upper differ in shape: {mean.shape}, {lower.shape}, {upper.shape}"
        )
    C, S = mean.shape
    if S != len(step):
        raise ValueError(f"the curves have {S} points but {len(step)} steps were given")
    if len(conditions) != C or len(names) != C:
        raise ValueError(f"{C} curves need {C} conditions and names")
    traces = []
    for c, (cond, name) in enumerate(zip(conditions, names, strict=True)):
        rgb = CONDITION_COLOURS.get(cond, "99, 99, 99")
        name = _escape(name)
        traces.append(
            dict(
                type="scatter",
                x=step,
                y=upper[c],
                mode="lines",
                line=dict(width=0),
                legendgroup=name,
                showlegend=False,
                hoverinfo="skip",
            )
        )
        traces.append(
            dict(
                type="scatter",
                x=step,
                y=lower[c],
                mode="lines",
                line=dict(width=0),
                fill="tonexty",
                fillcolor=f"rgba({rgb}, 0.2)",
                legendgroup=name,
                showlegend=False,
                hoverinfo="skip",
            )
        )
        traces.append(
            dict(
                type="scatter",
                x=step,
                y=mean[c],
                mode="lines",
                name=name,
                legendgroup=name,
                line=dict(color=f"rgb({rgb})", width=2),
                hovertemplate=f"{name}<br>{step_word} %{{x}}<br>{mean_loss} %{{y:.4g}}"
                "<extra></extra>",
            )
        )
    positive = bool((lower > 0).all() and (mean > 0).all())
    layout = dict(
        title=dict(text=title),
        height=380,
        margin=LEGEND_MARGIN,
        legend=BOTTOM_LEGEND,
        xaxis=dict(title=dict(text=step_word)),
        yaxis=dict(
            title=dict(text=words("chart.axis.training_loss")),
            type="log" if positive else "linear",
        ),
    )
    return _figure_of(traces, layout)


def _figure_of(traces: list[dict], layout: dict) -> go.Figure:
    """Like _figure, for several traces."""
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, **layout.get(axis, {})}
    return go.Figure(data=traces, layout=layout)


def _token_square(values, labels: Sequence[str], what: str, axes: str) -> np.ndarray:
    """float32 (..., T, T) with T = len(labels), or a ValueError naming the axes expected."""
    values = np.asarray(values, dtype=np.float32)
    ndim = axes.count(",") + 1
    if values.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-d {axes}, got shape {values.shape}")
    for n, axis in zip(values.shape[-2:], ("rows", "columns"), strict=True):
        if n != len(labels):
            raise ValueError(f"{what} has {n} {axis} but {len(labels)} tokens were given")
    return values


# ---- taking W_o apart: modes swept, W_o's spectrum, two inputs compared, a class's guesses ----

# RGB of each whole-matrix W_o mode's reference line in mode_sweep_plot, and of the rank-k curve:
# Okabe and Ito's colour-blind-safe palette, with a dash pattern of its own per line as well.
MODE_COLOURS = {
    "learned": "0, 114, 178",  # blue
    "block_diagonal": "230, 159, 0",  # orange
    "identity": "204, 121, 167",  # reddish purple
    "zero": "0, 0, 0",  # black
}
MODE_DASHES = {"learned": "solid", "block_diagonal": "dash", "identity": "dot", "zero": "dashdot"}
RANK_COLOUR = "0, 158, 115"  # bluish green


def mode_sweep_plot(
    ranks: Sequence[int],
    rank_values: Sequence[float],
    whole: dict[str, float],
    names: dict[str, str],
    chosen_k: int | None = None,
    title: str = "",
    x_title: str = "k",
    y_title: str = "",
) -> go.Figure:
    """One measure under every W_o mode: rank-k as a curve over k, the whole-matrix modes
    (learned, block-diagonal, identity, zero) as horizontal reference lines.

    Args:
        ranks, rank_values: k (ascending) and the measure with W_o of rank k.
        whole: mode -> measure, for the modes drawn as lines (keys of MODE_COLOURS).
        names: the legend name of each key of whole and of "rank" (in the reader's language).
        chosen_k: marked with a vertical line and a bigger marker, if it is one of ranks.
        title, x_title, y_title: texts shown (passed in so they can be translated).
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    values = _float32(rank_values, "rank-k values", ndim=1)
    if ranks.ndim != 1 or len(ranks) != len(values) or len(ranks) == 0:
        raise ValueError(f"need one value per rank, got {len(values)} values for {ranks.size}")
    missing = [key for key in (*whole, "rank") if key not in names]
    if missing:
        raise ValueError(f"no legend name for {missing}")
    numbers = np.array([*whole.values(), *values], dtype=np.float64)
    if not np.isfinite(numbers).all():
        raise ValueError("mode-sweep values must be finite")
    x_range = [0.5, float(ranks.max()) + 0.5]
    traces = []
    for mode, value in whole.items():
        rgb = MODE_COLOURS.get(mode, "99, 99, 99")
        name = _escape(names[mode])
        traces.append(
            dict(
                type="scatter",
                x=x_range,
                y=[value, value],
                mode="lines",
                name=f"{name}: {value:.3g}",
                line=dict(color=f"rgb({rgb})", dash=MODE_DASHES.get(mode, "dash"), width=2),
                hovertemplate=f"{name}<br>%{{y:.4g}}<extra></extra>",
            )
        )
    rank_name = _escape(names["rank"])
    traces.append(
        dict(
            type="scatter",
            x=ranks,
            y=values,
            mode="lines+markers",
            name=rank_name,
            line=dict(color=f"rgb({RANK_COLOUR})", width=2),
            hovertemplate=f"{rank_name}<br>k = %{{x}}<br>%{{y:.4g}}<extra></extra>",
        )
    )
    shapes = []
    if chosen_k is not None and chosen_k in set(ranks.tolist()):
        at = float(values[list(ranks).index(chosen_k)])
        traces.append(
            dict(
                type="scatter",
                x=[chosen_k],
                y=[at],
                mode="markers",
                marker=dict(size=14, color=f"rgb({RANK_COLOUR})", line=dict(width=2)),
                showlegend=False,
                hovertemplate=f"{rank_name}<br>k = %{{x}}<br>%{{y:.4g}}<extra></extra>",
            )
        )
        shapes.append(_k_marker(chosen_k))
    layout = dict(
        title=dict(text="<br>".join(_wrap(title, TITLE_UNITS))),
        height=400,
        margin=LEGEND_MARGIN,
        legend=BOTTOM_LEGEND,
        shapes=shapes,
        xaxis=dict(
            title=dict(text=_escape(x_title)),
            type="log" if ranks.max() > 32 else "linear",
            range=None if ranks.max() > 32 else x_range,
        ),
        yaxis=dict(title=dict(text=_escape(y_title))),
    )
    return _figure_of(traces, layout)


def w_o_spectrum_plot(
    sv: np.ndarray,
    title: str = "",
    x_title: str = "k",
    y_title: str = "",
    layer_ids: Sequence[int] | None = None,
    chosen_k: int | None = None,
) -> go.Figure:
    """Singular values of W_o, one line per layer, largest first: (L, D) non-negative.

    Rank-k W_o keeps the first k of a line; the values right of k are what it drops.
    """
    sv = _float32(sv, "singular values", ndim=2)
    if (sv < 0).any() or not np.isfinite(sv).all():
        raise ValueError("singular values must be finite and non-negative")
    L, D = sv.shape
    layer_ids = list(range(L)) if layer_ids is None else list(layer_ids)
    if len(layer_ids) != L:
        raise ValueError(f"{L} layers of singular values but {len(layer_ids)} layer ids")
    x = np.arange(1, D + 1)
    traces = [
        dict(
            type="scatter",
            x=x,
            y=sv[i],
            mode="lines",
            name=f"L{lay}",
            hovertemplate=f"L{lay}<br>σ_%{{x}} = %{{y:.4g}}<extra></extra>",
        )
        for i, lay in enumerate(layer_ids)
    ]
    shapes = []
    if chosen_k is not None and 1 <= chosen_k <= D:
        shapes.append(_k_marker(chosen_k + 0.5))
    layout = dict(
        title=dict(text="<br>".join(_wrap(title, TITLE_UNITS))),
        height=400,
        margin=LEGEND_MARGIN,
        legend=BOTTOM_LEGEND,
        shapes=shapes,
        xaxis=dict(title=dict(text=_escape(x_title))),
        yaxis=dict(title=dict(text=_escape(y_title)), rangemode="tozero"),
    )
    return _figure_of(traces, layout)


def attention_diff_grid(
    diff: np.ndarray, labels: Sequence[str], layer: int, title: str = "", *, words: Words = english
) -> go.Figure:
    """One layer's attention of input b minus input a, every head: (H, T, T), centred on 0."""
    diff = _token_square(diff, labels, "attention difference", "(heads, queries, keys)")
    return _mosaic(
        diff[None],
        labels,
        labels,
        rows=[f"L{layer}"],
        cols=[f"H{h}" for h in range(diff.shape[0])],
        hover=_hover(words, "query", "key", "delta_weight"),
        coloraxis=_diverging(diff),
        title=_escape(title),
    )


def head_change_map(
    change: np.ndarray,
    labels: Sequence[str],
    title: str = "",
    value_title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """(H, T) how much each head's term changed at each token (>= 0): heads on rows."""
    change = _float32(change, "head change", ndim=2)
    if not np.isfinite(change).all() or (change < 0).any():
        raise ValueError("a head change map must be finite and non-negative")
    H, T = change.shape
    x = _token_axis(labels, T, "head change", "tokens")
    trace = _heatmap(
        change,
        x,
        [f"H{h}" for h in range(H)],
        "%{{y}}<br>{} %{{x}}<br>%{{z:.3g}}".format(*_hover(words, "token")),
    )
    layout = dict(
        title=dict(text=_escape(title)),
        height=max(240, 36 * H + 150),
        margin=MARGIN,
        coloraxis=dict(
            colorscale=ATTENTION_SCALE,
            cmin=0.0,
            cmax=float(change.max(initial=0.0)) or 1.0,
            colorbar=dict(title=dict(text=_escape(value_title))),
        ),
        xaxis=dict(type="category"),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure(trace, layout)


def tally_bars(
    choices: Sequence[str], counts: Sequence[int], title: str = "", y_title: str = ""
) -> go.Figure:
    """A class's guesses: one bar per choice (labels in the reader's language)."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or len(counts) != len(choices) or (counts < 0).any():
        raise ValueError(f"need one non-negative count per choice, got {counts} for {choices}")
    trace = dict(
        type="bar",
        x=[_escape(c) for c in choices],
        y=counts,
        text=counts,
        textposition="auto",
        hovertemplate="%{x}: %{y}<extra></extra>",
    )
    layout = dict(
        title=dict(text=_escape(title)),
        height=280,
        margin=MARGIN,
        xaxis=dict(type="category"),
        yaxis=dict(
            title=dict(text=_escape(y_title)),
            rangemode="tozero",
            dtick=1 if counts.max(initial=0) < 10 else None,
        ),
    )
    return _figure(trace, layout)


def _k_marker(x: float) -> dict:
    """A dotted vertical line at x across the plot: where the chosen rank k is."""
    return dict(
        type="line",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        xref="x",
        yref="paper",
        line=dict(color=f"rgb({RANK_COLOUR})", width=1, dash="dot"),
    )
