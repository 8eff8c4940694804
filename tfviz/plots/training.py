"""Training figures: one run's loss curve, and the experiment's mean curves over seeds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.core import modes
from tfviz.plots.style import (
    BOTTOM_LEGEND,
    CONDITION_COLOURS,
    LEGEND_MARGIN,
    MARGIN,
    Words,
    _escape,
    _figure,
    _figure_of,
    _float32,
    _hover,
    english,
)


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


def experiment_curves(
    step: np.ndarray,
    mean: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    conditions: Sequence[str] = (modes.LEARNED, modes.IDENTITY),
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
    hover = f"{step_word} %{{x}}<br>{mean_loss} %{{y:.4g}}"
    traces = []
    for c, (cond, name) in enumerate(zip(conditions, names, strict=True)):
        rgb = CONDITION_COLOURS.get(cond, "99, 99, 99")
        traces += _band_and_mean(step, mean[c], lower[c], upper[c], _escape(name), rgb, hover)
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


def _band_and_mean(
    step: np.ndarray,
    mean: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    name: str,
    rgb: str,
    hover: str,
) -> list[dict]:
    """One condition's three traces: the band's upper edge, its lower edge filled up to the
    upper (tonexty), then the mean line, the only one in the legend and with a hover (name and
    hover already escaped)."""
    edge = dict(type="scatter", x=step, mode="lines", line=dict(width=0), legendgroup=name)
    return [
        dict(edge, y=upper, showlegend=False, hoverinfo="skip"),
        dict(
            edge,
            y=lower,
            fill="tonexty",
            fillcolor=f"rgba({rgb}, 0.2)",
            showlegend=False,
            hoverinfo="skip",
        ),
        dict(
            type="scatter",
            x=step,
            y=mean,
            mode="lines",
            name=name,
            legendgroup=name,
            line=dict(color=f"rgb({rgb})", width=2),
            hovertemplate=f"{name}<br>{hover}<extra></extra>",
        ),
    ]
