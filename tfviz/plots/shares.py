"""Each head's share of a layer's attention output (tfviz.analysis.shares): layer by layer as
stacked bars, one colour a head, learned beside switched; and one layer's shares per token.

Dimensions: L layers, H heads, T tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from tfviz.plots.style import (
    ATTENTION_SCALE,
    BOTTOM_LEGEND,
    LEGEND_MARGIN,
    MARGIN,
    Words,
    _figure,
    _float32,
    _heatmap,
    _hover,
    _token_axis,
    english,
)

LABELLED = 0.08  # a band at least this wide carries its head's name


def head_colours(n_heads: int) -> list[str]:
    """One colour a head: a colour-blind-safe set for a few heads, a larger one for many."""
    few = plotly.colors.qualitative.Safe
    many = plotly.colors.qualitative.Dark24
    palette = few if n_heads <= len(few) else many
    return [palette[h % len(palette)] for h in range(n_heads)]


def head_share_flow(
    shares: np.ndarray,
    learned: np.ndarray | None = None,
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """(L, H) shares, each layer's summing to 1 (or 0 where the layer outputs nothing), as one
    stacked bar a layer, a band a head; learned (L, H): the learned model's, drawn above each
    layer's switched bar when given."""
    shares = _float32(shares, "head shares", ndim=2)
    L, H = shares.shape
    rows = [(f"L{layer}", shares[layer]) for layer in range(L)]
    if learned is not None:
        learned = _float32(learned, "learned head shares", ndim=2)
        if learned.shape != shares.shape:
            raise ValueError(f"learned shares {learned.shape} differ from shares {shares.shape}")
        both, switched = words("chart.block.learned_w_o"), words("chart.block.switched")
        rows = [
            row
            for layer in range(L)
            for row in (
                (f"L{layer} {both}", learned[layer]),
                (f"L{layer} {switched}", shares[layer]),
            )
        ]
    y = [name for name, _ in rows]
    values = np.stack([v for _, v in rows])  # (rows, H)
    head, share = _hover(words, "head", "share")
    traces = []
    for h, colour in enumerate(head_colours(H)):
        x = values[:, h]
        traces.append(
            dict(
                type="bar", orientation="h", name=f"H{h}", x=x, y=y,
                marker=dict(color=colour, line=dict(color="#ffffff", width=1)),
                text=[f"H{h}" if v >= LABELLED else "" for v in x],
                textposition="inside", insidetextanchor="middle",
                hovertemplate=f"%{{y}}<br>{head} H{h}<br>{share} %{{x:.1%}}<extra></extra>",
            )
        )  # fmt: skip
    layout = dict(
        title=dict(text=title),
        barmode="stack",
        height=max(260, 34 * len(rows) + 190),
        margin=LEGEND_MARGIN,
        legend=dict(BOTTOM_LEGEND, traceorder="normal"),
        xaxis=dict(range=[0.0, 1.0], tickformat=".0%", title=dict(text=share), automargin=True),
        yaxis=dict(type="category", autorange="reversed", automargin=True),
    )
    return go.Figure(data=traces, layout=layout)


def head_share_tokens(
    shares: np.ndarray, labels: Sequence[str], title: str = "", *, words: Words = english
) -> go.Figure:
    """One layer's (H, T) shares as a heatmap: a row a token, a column a head, colours 0..1, the
    share written in each cell."""
    shares = _float32(shares, "head shares", ndim=2)
    H, T = shares.shape
    y = _token_axis(labels, T, "head shares", "columns")
    token, share = _hover(words, "token", "share")
    trace = _heatmap(
        np.ascontiguousarray(shares.T),
        [f"H{h}" for h in range(H)],
        y,
        f"{token} %{{y}}<br>%{{x}}<br>{share} %{{z:.3f}}",
    )
    trace["texttemplate"] = "%{z:.2f}" if H <= 12 else ""
    trace["textfont"] = dict(size=10)
    layout = dict(
        title=dict(text=title),
        height=max(260, 22 * T + 140),
        margin=MARGIN,
        coloraxis=dict(
            colorscale=ATTENTION_SCALE,
            cmin=0.0,
            cmax=1.0,
            # Tick labels below their ticks, so the "1" at the top clears the title.
            colorbar=dict(title=dict(text=share), ticklabelposition="outside bottom"),
        ),
        xaxis=dict(type="category", side="top"),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure(trace, layout)
