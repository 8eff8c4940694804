"""What W_o does: activations before and after it (concat, attn_out), the matrix itself, each
head's term at one token, and how much each output dimension draws on each head."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.mosaic import _head_blocks, _head_rows
from tfviz.plots.style import (
    ATTENTION_SCALE,
    MARGIN,
    Words,
    _clipped_cells,
    _escape,
    _figure,
    _figure_of,
    _float32,
    _heatmap,
    _hover,
    _signed_axis,
    _token_axis,
    _token_rows,
    _wrap,
    english,
)


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
        words: the figure's own words (tfviz.plots.style); English by default.
    """
    values = _float32(values, "activation", ndim=2)
    T, D = values.shape
    height = max(300, 22 * T + 130)
    trace, layout = _token_rows(values, labels, "activation", "token", title, height, words)
    titles = None
    if n_heads is not None:
        titles = _head_blocks(D, n_heads, layout)
    return _signed_figure(trace, layout, words, titles)  # MiniLM's L0 has outlier dimensions


def w_o_matrix(
    W_o: np.ndarray, n_heads: int, title: str = "W_o", *, words: Words = english
) -> go.Figure:
    """The (D, D) output projection as `attn_out = concat · W_o` reads it (lesson 1's table):
    rows = concat dims (its input, in the heads' blocks), columns = output dims (attn_out).

    W_o: the matrix in nn.Linear layout (out, in), as the model keeps it; drawn transposed.
    Row block h holds head h's slice of concat; a column builds one output dimension, and
    colour in every block of a column means that output dimension draws on every head. (Drawn
    in nn.Linear's layout, its rows were outputs, the other way round from lesson 1's table.)
    """
    W_o = _float32(W_o, "W_o", ndim=2)
    D_out, D_in = W_o.shape
    if D_out != D_in:
        raise ValueError(f"W_o must be square (D, D), got shape {W_o.shape}")
    output, input_, weight = _hover(words, "output_dim", "input_dim", "weight")
    trace = _heatmap(
        np.ascontiguousarray(W_o.T),
        np.arange(D_out),
        np.arange(D_in),
        f"{input_} %{{y}}<br>{output} %{{x}}<br>{weight} %{{z:.3f}}",
    )
    layout = dict(
        title=dict(text=title),
        height=520,
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.output_dim_attn_out"))),
        yaxis=dict(title=dict(text=words("chart.axis.input_dim_concat")), autorange="reversed"),
    )
    _head_rows(D_in, n_heads, layout)
    return _signed_figure(trace, layout, words)  # MiniLM's L0 W_o: a few outlier weights


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
