"""Taking W_o apart: one measure under every W_o mode, W_o's spectrum, two inputs' attention
and head terms compared, and a class's guesses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.mosaic import _mosaic
from tfviz.plots.style import (
    ATTENTION_SCALE,
    BOTTOM_LEGEND,
    LEGEND_MARGIN,
    MARGIN,
    MODE_COLOURS,
    MODE_DASHES,
    RANK_COLOUR,
    TITLE_UNITS,
    Words,
    _diverging,
    _escape,
    _figure,
    _figure_of,
    _float32,
    _heatmap,
    _hover,
    _token_axis,
    _token_square,
    _wrap,
    english,
)


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
    widths = _line_widths(whole, numbers)
    traces = [
        _reference_line(mode, value, _escape(names[mode]), x_range, widths[mode])
        for mode, value in whole.items()
    ]
    rank_name = _escape(names["rank"])
    hover = f"{rank_name}<br>k = %{{x}}<br>%{{y:.4g}}<extra></extra>"
    traces.append(
        dict(
            type="scatter",
            x=ranks,
            y=values,
            mode="lines+markers",
            name=rank_name,
            line=dict(color=f"rgb({RANK_COLOUR})", width=2),
            hovertemplate=hover,
        )
    )
    shapes = []
    if chosen_k is not None and chosen_k in set(ranks.tolist()):
        at = float(values[list(ranks).index(chosen_k)])
        traces.append(_chosen_marker(chosen_k, at, hover))
        shapes.append(_k_marker(chosen_k))
    layout = dict(
        title=dict(text="<br>".join(_wrap(title, TITLE_UNITS))),
        height=400,
        margin=LEGEND_MARGIN,
        legend=BOTTOM_LEGEND,
        shapes=shapes,
        xaxis=_rank_axis(ranks, x_range, x_title),
        yaxis=dict(title=dict(text=_escape(y_title))),
    )
    return _figure_of(traces, layout)


def _reference_line(mode: str, value: float, name: str, x_range: list, width: float) -> dict:
    """A whole-matrix mode's measure as a horizontal line across the plot, in the mode's colour
    and dash, its value in the legend (name already escaped)."""
    rgb = MODE_COLOURS.get(mode, "99, 99, 99")
    return dict(
        type="scatter",
        x=x_range,
        y=[value, value],
        mode="lines",
        name=f"{name}: {value:.3g}",
        line=dict(color=f"rgb({rgb})", dash=MODE_DASHES.get(mode, "dash"), width=width),
        hovertemplate=f"{name}<br>%{{y:.4g}}<extra></extra>",
    )


def _chosen_marker(k: int, at: float, hover: str) -> dict:
    """A bigger marker on the rank-k curve at the chosen k, not in the legend."""
    return dict(
        type="scatter",
        x=[k],
        y=[at],
        mode="markers",
        marker=dict(size=14, color=f"rgb({RANK_COLOUR})", line=dict(width=2)),
        showlegend=False,
        hovertemplate=hover,
    )


LINE_PX = 2  # a reference line's width when no other line shares its value
LINE_STEP_PX = 4  # how much wider a line is than the one drawn over it at the same value
SAME_VALUE = 0.01  # two values this share of the plot's span apart are drawn on one height


def _line_widths(whole: dict[str, float], numbers: np.ndarray) -> dict[str, float]:
    """Each reference line's width: LINE_PX, wider by LINE_STEP_PX for every later line at (about)
    its value. Lines are drawn in whole's order, so a later one lies on top: the identity line
    hid under the zero line where both were 0 (a model that needs W_o). Wider below, each shows
    as a band around the next, the top one in its own dash."""
    span = float(numbers.max() - numbers.min()) or 1.0
    modes = list(whole)
    return {
        mode: LINE_PX
        + LINE_STEP_PX
        * sum(abs(whole[later] - whole[mode]) <= SAME_VALUE * span for later in modes[i + 1 :])
        for i, mode in enumerate(modes)
    }


LOG_RANKS = 32  # a sweep to a larger rank is drawn on a log axis


def _rank_axis(ranks: np.ndarray, x_range: list[float], title: str) -> dict:
    """The k axis: linear up to LOG_RANKS; beyond, logarithmic with a tick at each power of ten
    and at the largest rank only. plotly's own log ticks label 2 and 5 between decades too,
    with the decade's digit alone ("5 1 2 5 10 2 5"), which read as a jumble of numbers."""
    axis = dict(title=dict(text=_escape(title)))
    top = int(ranks.max())
    if top <= LOG_RANKS:
        return dict(axis, type="linear", range=x_range)
    ticks = [10**e for e in range(len(str(top))) if 10**e <= top]
    if top >= 2 * ticks[-1]:  # far enough from the last decade not to touch its label
        ticks.append(top)
    return dict(
        axis, type="log", tickmode="array", tickvals=ticks, ticktext=[str(v) for v in ticks]
    )


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
        block_words=_hover(words, "layer", "head"),
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
