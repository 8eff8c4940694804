"""What every figure of tfviz.plots shares: the words it is written in, its colours, margins and
legends, and the small helpers that check arrays and build traces. The bottom of the package:
it imports no other module of it.

The words a figure writes itself (axis and colour-bar titles, block names, legend names, hover
labels, default titles) are not written in tfviz.plots: every figure function takes `words`, a
function words(key, **values) -> text of a catalogue key under "chart." (see Words). The
default, `english`, reads the English text from the app's catalogue; the app passes its own for
the student's language. Text a caller passes (a title, legend names) is used as given.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from tfviz.core import modes
from tfviz.words import english as catalogue_english

# ---- the words a figure is written in --------------------------------------------------------

# words(key, **values) -> text: a chart text by its catalogue key ("chart.word.query"), with its
# {placeholders} filled ("chart.block.layer_out", layer=0 -> "L0 out"). The default is English
# from the one catalogue (tfviz.words); the app passes tfviz.ui.widgets.plot_words() (the
# student's language), so a figure's words are right when it is built, with nothing to
# translate back afterwards.
Words = Callable[..., str]
CHART_KEYS = "chart."  # every key a figure asks words for starts with this


def english(key: str, **values) -> str:
    """The default words: key's English text; KeyError for a key the catalogue lacks, or one
    that is not a chart's (a bug in tfviz.plots, not a blank)."""
    if not key.startswith(CHART_KEYS):
        raise KeyError(f"{key} is not a chart text")
    return catalogue_english(key, **values)


def _hover(words: Words, *labels: str) -> tuple[str, ...]:
    """The hover labels of chart.word.<label>, e.g. ("query", "key", "weight") in words."""
    return tuple(words(f"chart.word.{label}") for label in labels)


def _scale(colours: Sequence[str], start: float = 0.0) -> list[list]:
    """A plotly colour scale: colours evenly spaced from start to 1."""
    n = len(colours) - 1
    # min(): plotly refuses a last stop of 1.0000000000000002.
    return [[min(1.0, start + (1.0 - start) * i / n), c] for i, c in enumerate(colours)]


# Colour scales readable with colour-vision deficiency (tests/ui/test_share.py simulates the three
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
NORM_SCALE = SEQUENTIAL_SCALE  # norms are lengths (>= 0, no fixed top)


# ---- colours of the lines and bands that stand for a condition or a W_o mode --------------------

CONDITION_COLOURS = {modes.LEARNED: "31, 119, 180", modes.IDENTITY: "214, 39, 40"}  # RGB


# RGB of each whole-matrix W_o mode's reference line in mode_sweep_plot, and of the rank-k curve:
# Okabe and Ito's colour-blind-safe palette, with a dash pattern of its own per line as well.
MODE_COLOURS = {
    modes.LEARNED: "0, 114, 178",  # blue
    modes.BLOCK_DIAGONAL: "230, 159, 0",  # orange
    modes.IDENTITY: "204, 121, 167",  # reddish purple
    modes.ZERO: "0, 0, 0",  # black
}
MODE_DASHES = {
    modes.LEARNED: "solid",
    modes.BLOCK_DIAGONAL: "dash",
    modes.IDENTITY: "dot",
    modes.ZERO: "dashdot",
}
RANK_COLOUR = "0, 158, 115"  # bluish green


# ---- margins and legends ------------------------------------------------------------------------

MARGIN = dict(l=10, r=10, t=70, b=40)
# A legend under a chart, at the bottom of the figure, in rows as the width allows: placed at a
# share of the plot's height under it, it ran into the x axis's title once a phone's width put
# it on two or three rows. The bottom margin holds the axis title and three rows.
BOTTOM_LEGEND = dict(
    orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.0, xanchor="left"
)
LEGEND_MARGIN = dict(MARGIN, b=120)
TITLE_UNITS = 40  # a chart title's line: about a phone's width at plotly's 17 px title font


def hover_labels(labels: Sequence[str]) -> list[str]:
    """Labels as a cell's hover names them: escape_labels', and after a label that stands for a
    piece spelled otherwise (a byte-level piece decoded: tfviz.hf.tokenizer.PieceLabel, read
    here by its `spelled` alone) that exact piece in brackets, "中 [ä¸]"."""
    out = escape_labels(labels)
    for n, label in enumerate(labels):
        exact = getattr(label, "spelled", "")
        if exact:
            out[n] += f" [{html.escape(str(exact), quote=False)}]"
    return out


def escape_labels(labels: Sequence[str]) -> list[str]:
    """Labels made safe for plotly: HTML-escaped, and refused if two would merge on an axis."""
    out = [html.escape(str(label), quote=False) for label in labels]
    if len(set(out)) != len(out):
        raise ValueError("token labels must be unique, or the axis merges equal tokens")
    return out


# ---- signed values: a colour range that outlier dimensions do not wash out ----------------------

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


# ---- helpers ------------------------------------------------------------------------------------


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


def _token_rows(
    values: np.ndarray,
    labels: Sequence[str],
    what: str,
    row: str,
    title: str,
    height: int,
    words: Words,
) -> tuple[dict, dict]:
    """A (T, D) heatmap's trace and layout: one row a token (named `row` in the hover: token,
    key), dimensions across."""
    T, D = values.shape
    y = _token_axis(labels, T, what, "rows")
    row_word, dim, value = _hover(words, row, "dim", "value")
    hover = f"{row_word} %{{y}}<br>{dim} %{{x}}<br>{value} %{{z:.3f}}"
    layout = dict(
        title=dict(text=title),
        height=height,
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.dimension"))),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _heatmap(values, np.arange(D), y, hover), layout


def _diverging(values: np.ndarray) -> dict:
    """A colour axis centred on 0 (range +-1 for an all-zero array, so it still draws)."""
    limit = float(np.abs(values).max(initial=0.0)) or 1.0
    return dict(colorscale=DIVERGING_SCALE, cmin=-limit, cmax=limit)


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
