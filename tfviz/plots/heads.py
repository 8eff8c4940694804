"""Head analysis figures: one score per head, the metric left with the top k heads kept,
ablation's change per token, OV circuits' singular values and composition between layers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.mosaic import _mosaic
from tfviz.plots.style import (
    BOTTOM_LEGEND,
    LEGEND_MARGIN,
    MARGIN,
    SEQUENTIAL_SCALE,
    Words,
    _diverging,
    _escape,
    _figure,
    _figure_of,
    _float32,
    _heatmap,
    _hover,
    _token_axis,
    english,
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


def induction_losses(
    curves: dict[str, np.ndarray], period: int, title: str = "", *, words: Words = english
) -> go.Figure:
    """The next-token loss along repeated random tokens, one line per switch: flat and high on
    the first copy (nothing to predict from), lower on the repeat where a model copies.

    Args:
        curves: name shown -> (T-1,) loss in nats of predicting token t + 1 at position t.
        period: n, the length of one copy: a dashed line marks where the repeat starts.
    """
    if not curves:
        raise ValueError("give at least one loss curve")
    lengths = {len(_float32(c, "loss", ndim=1)) for c in curves.values()}
    if len(lengths) != 1:
        raise ValueError(f"the loss curves differ in length: {sorted(lengths)}")
    (n_positions,) = lengths
    if not 1 <= period < n_positions + 1:
        raise ValueError(f"a period of {period} does not fit {n_positions + 1} positions")
    x = np.arange(1, n_positions + 1)  # the position of the token predicted
    traces = [
        dict(
            type="scatter",
            x=x,
            y=_float32(c, "loss", ndim=1),
            mode="lines",
            name=_escape(name),
            hovertemplate=f"{_escape(name)}<br>%{{x}}: %{{y:.3f}}<extra></extra>",
        )
        for name, c in curves.items()
    ]
    layout = dict(
        title=dict(text=title),
        height=340,
        margin=MARGIN,
        legend=BOTTOM_LEGEND,
        xaxis=dict(title=dict(text=words("chart.axis.probe_position"))),
        yaxis=dict(title=dict(text=words("chart.axis.loss_nats")), rangemode="tozero"),
        shapes=[
            dict(
                type="line",
                x0=period,
                x1=period,
                y0=0,
                y1=1,
                yref="paper",
                line=dict(dash="dash", width=1, color="#888"),
            )
        ],  # fmt: skip
    )
    return _figure_of(traces, layout)
