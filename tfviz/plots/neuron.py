"""Inside one head for one query, as BertViz's neuron view lays it out: the query vector above
every key vector (dimensions across), their elementwise product, and per key the dot product,
the scaled and masked score and the softmax.

A masked key (a decoder's later tokens, padding) is a gap in the product and has no bar, with a
mark saying it is masked: it is not read, which is not a weight of 0. Dimensions: T keys,
d_k dimensions of a head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.style import (
    ATTENTION_SCALE,
    MARGIN,
    Words,
    _clipped_cells,
    _figure_of,
    _float32,
    _heatmap,
    _hover,
    _signed_axis,
    _token_axis,
    _token_rows,
    english,
)

QUERY_ROW_PX = 26  # the query vector's one row, above the keys
GAP_PX = 14  # between the query's row and the keys'
PANEL_GAP = 0.06  # between the bar panels, a share of the width


def row_px(n_rows: int) -> int:
    """Pixels per key row: a label's height for a sentence, smaller for a long input."""
    return 20 if n_rows <= 48 else 12


def _masked_rows(values: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """values with the masked keys' entries (rows) made NaN: plotly leaves them a gap."""
    masked = np.asarray(masked, dtype=bool)
    if masked.shape != values.shape[:1]:
        raise ValueError(f"masked has shape {masked.shape}, want ({values.shape[0]},)")
    out = np.array(values, dtype=np.float32)
    out[masked] = np.nan
    return out


def _signed(traces: list[dict], layout: dict, words: Words) -> go.Figure:
    """Heatmaps on one signed colour axis (NaN gaps left out of its range), clipped cells
    ringed."""
    values = np.concatenate([np.asarray(t["z"], np.float32).ravel() for t in traces])
    layout["coloraxis"], clipped_at = _signed_axis(np.nan_to_num(values))
    rings = [] if clipped_at is None else [_clipped_cells(t, clipped_at, words) for t in traces]
    for ring, trace in zip(rings, traces, strict=False):
        ring["xaxis"], ring["yaxis"] = trace.get("xaxis", "x"), trace.get("yaxis", "y")
    layout["yaxis2"] = {"automargin": True, **layout.get("yaxis2", {})}
    return _figure_of([*traces, *rings], layout)


def query_key_map(
    q: np.ndarray,
    k: np.ndarray,
    labels: Sequence[str],
    query: int,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """The query vector q (d_k,) as one row above the keys' vectors k (T, d_k), one row a key,
    dimensions across, on one signed colour scale. labels: the T tokens; query: q's position."""
    q = _float32(q, "query vector", ndim=1)
    k = _float32(k, "key vectors", ndim=2)
    T, d_k = k.shape
    if q.shape[0] != d_k:
        raise ValueError(f"q has {q.shape[0]} dimensions but the keys have {d_k}")
    y = _token_axis(labels, T, "key vectors", "rows")
    dim, value = _hover(words, "dim", "value")
    hover = f"%{{y}}<br>{dim} %{{x}}<br>{value} %{{z:.3f}}"
    q_row = f"q: {y[query]}"
    keys_px = T * row_px(T)
    plot_px = QUERY_ROW_PX + GAP_PX + keys_px
    split = keys_px / plot_px
    traces = [
        dict(_heatmap(q[None], np.arange(d_k), [q_row], hover), yaxis="y2"),
        _heatmap(k, np.arange(d_k), y, hover),
    ]
    layout = dict(
        title=dict(text=title or words("chart.title.neuron_qk")),
        height=plot_px + 150,
        margin=MARGIN,
        xaxis=dict(title=dict(text=words("chart.axis.dimension")), anchor="y"),
        yaxis=dict(type="category", autorange="reversed", domain=[0.0, split]),
        yaxis2=dict(type="category", domain=[(keys_px + GAP_PX) / plot_px, 1.0], anchor="x"),
    )
    return _signed([traces[1], traces[0]], layout, words)


def product_map(
    product: np.ndarray,
    labels: Sequence[str],
    masked: np.ndarray,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """q * k_j elementwise (T, d_k), one row a key: a row's sum is the key's dot product q . k_j;
    masked keys' rows are gaps."""
    product = _masked_rows(_float32(product, "q x k", ndim=2), masked)
    T = product.shape[0]
    title = title or words("chart.title.neuron_product")
    height = T * row_px(T) + 150
    trace, layout = _token_rows(product, labels, "q x k", "key", title, height, words)
    return _signed([trace], layout, words)


def score_bars(
    dots: np.ndarray,
    scores: np.ndarray,
    weights: np.ndarray,
    labels: Sequence[str],
    masked: np.ndarray,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """Three panels side by side over the same keys (rows): the dot product q . k_j, the score
    the softmax reads (scaled by 1 / sqrt(d_k), masks applied) and the softmax, the head's
    attention. A masked key has no bar and a mark that says so."""
    T = len(labels)
    y = _token_axis(labels, T, "scores", "rows")
    panels = [
        (_masked_rows(_float32(v, name, ndim=1), masked), name, colour)
        for v, name, colour in (
            (dots, "dot", "#7f7f7f"),
            (np.where(np.isfinite(scores), scores, np.nan), "scaled", "#1f77b4"),
            (weights, "softmax", ATTENTION_SCALE[-1][1]),
        )
    ]
    key, mark = _hover(words, "key", "masked")
    width = (1.0 - 2 * PANEL_GAP) / 3
    traces, layout = [], {}
    shut = [y[j] for j in np.flatnonzero(np.asarray(masked, dtype=bool))]
    for n, (values, name, colour) in enumerate(panels):
        axis = "x" if n == 0 else f"x{n + 1}"
        heading = words(f"chart.panel.{name}")
        traces.append(
            dict(
                type="bar", orientation="h", x=values, y=y, xaxis=axis, yaxis="y",
                marker=dict(color=colour), showlegend=False,
                hovertemplate=f"{key} %{{y}}<br>{heading} %{{x:.4f}}<extra></extra>",
            )
        )  # fmt: skip
        if shut:
            traces.append(
                dict(
                    type="scatter", mode="text", x=[0.0] * len(shut), y=shut, xaxis=axis,
                    yaxis="y", text=[mark] * len(shut), textposition="middle right",
                    textfont=dict(color="#7f7f7f", size=11), showlegend=False, hoverinfo="skip",
                )
            )  # fmt: skip
        start = n * (width + PANEL_GAP)
        layout["xaxis" if n == 0 else f"xaxis{n + 1}"] = dict(
            domain=[start, start + width], anchor="y", side="top", automargin=True,
            title=dict(text=heading, font=dict(size=12)),
            range=[0.0, 1.0] if name == "softmax" else None,
            nticks=4,  # a phone's third of the width: more ticks were turned on their side
        )  # fmt: skip
    layout.update(
        # The title pinned to the top of the figure, clear of the panels' headings below it.
        title=dict(text=title, yref="container", y=1.0, yanchor="top", pad=dict(t=12)),
        height=T * row_px(T) + 180,
        margin=dict(MARGIN, t=120),
        yaxis=dict(type="category", autorange="reversed", automargin=True),
        bargap=0.25,
    )
    return go.Figure(data=traces, layout=layout)
