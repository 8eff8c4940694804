"""The OV sandbox's figures: a weight block before and after a change of basis, and the angles
between the heads' write spaces."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.style import (
    MARGIN,
    SEQUENTIAL_SCALE,
    Words,
    _diverging,
    _escape,
    _figure_of,
    _float32,
    _heatmap,
    english,
)


def weight_pair(
    before: np.ndarray,
    after: np.ndarray,
    names: Sequence[str],
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """One weight block (rows x columns) before and after, side by side on one colour scale.

    names: the two panels' titles, the caller's words (before, after)."""
    before = _float32(before, "weights before", ndim=2)
    after = _float32(after, "weights after", ndim=2)
    if before.shape != after.shape:
        raise ValueError(f"before {before.shape} and after {after.shape} differ in shape")
    hover = f"{_escape(words('chart.word.dim'))} %{{y}}, %{{x}}<br>"
    hover += f"{_escape(words('chart.word.value'))} %{{z:.3g}}"
    traces = [
        dict(_heatmap(z, None, None, hover), xaxis=f"x{i or ''}", yaxis=f"y{i or ''}")
        for i, z in ((0, before), (2, after))
    ]
    layout = dict(
        title=dict(text=title),
        height=340,
        margin=MARGIN,
        coloraxis=_diverging(np.concatenate([before.ravel(), after.ravel()])),
        xaxis=dict(domain=[0, 0.46], title=dict(text=_escape(names[0]))),
        xaxis2=dict(domain=[0.54, 1], title=dict(text=_escape(names[1]))),
        yaxis=dict(autorange="reversed"),
        yaxis2=dict(autorange="reversed", anchor="x2"),
    )
    return _figure_of(traces, layout)


def angle_map(angles: np.ndarray, title: str = "", *, words: Words = english) -> go.Figure:
    """The smallest principal angle (degrees) between every pair of heads' write spaces in one
    layer, (H, H), values written; NaN (a head that writes nothing) left blank."""
    angles = _float32(angles, "angles", ndim=2)
    H = angles.shape[0]
    if angles.shape != (H, H):
        raise ValueError(f"angles must be square (H, H), got {angles.shape}")
    heads = [f"H{h}" for h in range(H)]
    hover = f"%{{y}} %{{x}}<br>{_escape(words('chart.word.angle'))} %{{z:.1f}}°"
    trace = _heatmap(angles, heads, heads, hover)
    trace.update(texttemplate="%{z:.0f}°", textfont=dict(size=11))
    layout = dict(
        title=dict(text=title),
        height=max(260, 34 * H + 140),
        margin=MARGIN,
        coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=0.0, cmax=90.0),
        xaxis=dict(type="category", side="top"),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure_of([trace], layout)
