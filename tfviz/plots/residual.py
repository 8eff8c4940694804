"""The residual stream of two passes side by side, and how far it drifted per layer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.mosaic import _mosaic
from tfviz.plots.style import (
    MARGIN,
    Words,
    _clipped_cells,
    _figure,
    _float32,
    _hover,
    _signed_axis,
    _token_axis,
    english,
)


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
        # The rings are a scatter trace, and plotly pads a scatter's autorange by 5% each side:
        # the cells then slid away from the block titles, which are placed in cells on axes of
        # their own, and MiniLM's "L1 out" titles sat on the data. The heatmap's range, pinned.
        rows, cols = np.shape(fig.data[0].z)
        fig.layout.xaxis.range = [-0.5, cols - 0.5]
        fig.layout.yaxis.update(autorange=None, range=[rows - 0.5, -0.5])
    return fig


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
