"""Figures of the W_o atlas: the grid of cells and one cell's loss curves (the toy atlas's
training loss, the language atlas's validation loss). Numbers and labels in, plotly figures out;
no model code, no statistics (tfviz.experiments.atlas_stats computes them).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.style import CONDITION_COLOURS, _escape

# Diverging: blue where the learned W_o does better, red where it does worse, white at no effect.
EFFECT_SCALE = [[0.0, "#b2182b"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]
ARM_COLOURS = {
    **CONDITION_COLOURS,  # learned blue, identity red, as the experiment's curves
    "block_diagonal": "44, 160, 44",
    "frozen": "140, 86, 75",
    "identity_readout": "148, 103, 189",
    "gated": "255, 127, 14",
}


def wrap_lines(text: str, width: int = 44) -> list[str]:
    """Text cut into lines of about width columns: at spaces, or for Chinese (two columns a
    character, few spaces) every width / 2 characters. For titles and hover on a phone."""
    if sum(ord(c) > 0x2E80 for c in text) > len(text) / 3:
        half = max(1, width // 2)
        return [text[i : i + half] for i in range(0, len(text), half)]
    return textwrap.wrap(text, width) or [""]


def _title(text: str, size: int = 13) -> dict:
    """A title that fits a phone's width: wrapped, escaped line by line, left-aligned."""
    lines = "<br>".join(_escape(line) for line in wrap_lines(text))
    # At the very top of the figure: the grid's column labels sit above its plot area, in the
    # top margin, where a title placed in the margin's middle would cover them.
    return dict(
        text=lines,
        x=0,
        xanchor="left",
        y=0.95,
        yref="container",
        yanchor="top",
        font=dict(size=size),
    )


def atlas_grid(
    effect: np.ndarray,
    texts: Sequence[Sequence[Sequence[str]]],
    rows: Sequence[str],
    columns: Sequence[Sequence[str]],
    hover: Sequence[Sequence[Sequence[str]]],
    title: str,
    colour_title: str,
    faint: np.ndarray | None = None,
) -> go.Figure:
    """The atlas: one square per (task, architecture), coloured by the effect, with its text.

    Laid out for a phone as for a projector: tasks down (their names are short), architectures
    across under short labels of a few lines, a horizontal colour bar below.

    Args:
        effect: (R, C) the learned W_o's advantage scaled to [-1, 1] (positive: it does better);
            NaN where nothing is to be read (not trained, no rows): drawn grey.
        texts: R x C short texts drawn in the squares, as lines (a mark, a number).
        rows: R labels (the tasks); columns: C labels, each a list of short lines.
        hover: R x C lists of lines shown on hover (plain text: escaped here, one line each).
        faint: (R, C) True where the effect is not told apart from zero: drawn pale, so that a
            large but uncertain difference does not read as a finding.
    """
    effect = np.asarray(effect, np.float64)
    R, C = effect.shape
    if len(rows) != R or len(columns) != C or len(texts) != R or len(hover) != R:
        raise ValueError(f"an atlas of {R} x {C} squares needs {R} row and {C} column labels")
    bound = float(np.nanmax(np.abs(effect))) if np.isfinite(effect).any() else 1.0
    bound = max(bound, 0.05)  # a grid of tiny effects is not painted as if they were large
    x = ["<br>".join(_escape(line) for line in lines) for lines in columns]
    y = [_escape(r) for r in rows]
    esc = [["<br>".join(_escape(line) for line in lines) for lines in row] for row in hover]
    faint = np.zeros((R, C), bool) if faint is None else np.asarray(faint, bool)
    finite = np.isfinite(effect)
    # The grey layer lies under every square, shows what has no effect to colour (not trained,
    # no runs) and carries every square's hover, so the coloured layers need none.
    grey = go.Heatmap(
        z=np.zeros((R, C)),
        x=x,
        y=y,
        colorscale=[[0, "#d9d9d9"], [1, "#d9d9d9"]],
        showscale=False,
        text=_cell_texts(texts, ~finite),
        texttemplate="%{text}",
        textfont=dict(size=10, color="#222"),
        customdata=esc,
        hovertemplate="%{customdata}<extra></extra>",
        xgap=2,
        ygap=2,
    )
    # Each coloured square is drawn by one of two layers: the sure in full, the uncertain pale.
    # One colour bar, on a layer that has squares (a layer of none is not drawn at all).
    sure_mask, unsure_mask = finite & ~faint, finite & faint
    scale_on_sure = bool(sure_mask.any())
    bar = _escape(colour_title)
    sure = _effect_squares(effect, texts, x, y, sure_mask, bound, 1.0, scale_on_sure, bar)
    scale_on_unsure = not scale_on_sure and bool(unsure_mask.any())
    unsure = _effect_squares(effect, texts, x, y, unsure_mask, bound, 0.5, scale_on_unsure, bar)
    fig = go.Figure([grey, sure, unsure])
    fig.update_layout(
        title=_title(title),
        height=190 + 38 * R,
        margin=dict(l=10, r=10, t=110, b=10),
        yaxis=dict(autorange="reversed", automargin=True, tickfont=dict(size=11)),
        xaxis=dict(side="top", automargin=True, tickfont=dict(size=9), tickangle=0),
        plot_bgcolor="white",
    )
    return fig


def _cell_texts(texts: Sequence[Sequence[Sequence[str]]], mask: np.ndarray) -> list[list[str]]:
    """The squares' texts, escaped, a line each; empty where mask is False (another layer's)."""
    R, C = mask.shape
    return [
        ["<br>".join(_escape(line) for line in texts[i][j]) if mask[i, j] else "" for j in range(C)]
        for i in range(R)
    ]


def _effect_squares(
    effect: np.ndarray,
    texts: Sequence[Sequence[Sequence[str]]],
    x: list[str],
    y: list[str],
    mask: np.ndarray,
    bound: float,
    opacity: float,
    scale: bool,
    colour_title: str,
) -> go.Heatmap:
    """One coloured layer of the atlas: the squares of mask, on the diverging scale from -bound
    to bound (its colour bar shown when scale, titled colour_title, already escaped)."""
    return go.Heatmap(
        z=np.where(mask, effect, None).tolist(),
        x=x,
        y=y,
        colorscale=EFFECT_SCALE,
        zmin=-bound,
        zmax=bound,
        opacity=opacity,
        showscale=scale,
        text=_cell_texts(texts, mask),
        texttemplate="%{text}",
        textfont=dict(size=10, color="#222"),
        hoverinfo="skip",
        colorbar=dict(
            title=dict(text=colour_title, side="top", font=dict(size=11)),
            orientation="h",
            y=-0.02,
            yanchor="top",
            thickness=10,
            len=0.9,
        ),
        xgap=2,
        ygap=2,
    )


def cell_curves(
    curves: Mapping[str, Sequence[tuple[int, Sequence[float]]]],
    every: int,
    names: Mapping[str, str],
    title: str,
    step_word: str,
    loss_word: str,
    seed_word: str,
) -> go.Figure:
    """Every seed's training loss in every arm of one cell (a point per `every` steps).

    Args:
        curves: arm -> [(seed, losses)] as tfviz.experiments.atlas_stats.curves returns.
        names: arm -> legend name.
    The y axis is linear from 0: a log axis over less than a decade reads as a row of digits.
    """
    runs = {
        arm: [(seed, every * (np.arange(len(y)) + 1), y) for seed, y in found]
        for arm, found in curves.items()
    }
    return _seed_curves(runs, names, title, step_word, loss_word, seed_word)


def step_curves(
    curves: Mapping[str, Sequence[tuple[int, Sequence[Sequence[float]]]]],
    names: Mapping[str, str],
    title: str,
    step_word: str,
    loss_word: str,
    seed_word: str,
) -> go.Figure:
    """As cell_curves, for curves measured at given steps: arm -> [(seed, [[step, loss], ...])]
    (the language atlas's validation curves, atlas_stats.curves(rows, cell, "valid_curve"))."""
    runs = {
        arm: [
            (seed, [float(p[0]) for p in points], [float(p[1]) for p in points])
            for seed, points in found
        ]
        for arm, found in curves.items()
    }
    return _seed_curves(runs, names, title, step_word, loss_word, seed_word)


def _seed_curves(
    runs: Mapping[str, Sequence[tuple[int, Sequence[float], Sequence[float]]]],
    names: Mapping[str, str],
    title: str,
    step_word: str,
    loss_word: str,
    seed_word: str,
) -> go.Figure:
    """One line per (arm, seed): runs is arm -> [(seed, steps, losses)]; an arm's colour, its
    name once in the legend."""
    fig = go.Figure()
    for arm, found in runs.items():
        rgb = ARM_COLOURS.get(arm, "99, 99, 99")
        name = _escape(names.get(arm, arm))
        for i, (seed, x, losses) in enumerate(found):
            y = np.maximum(np.asarray(losses, np.float64), 1e-6)
            fig.add_trace(
                go.Scatter(
                    x=np.asarray(x).tolist(),
                    y=y,
                    mode="lines",
                    line=dict(color=f"rgba({rgb}, 0.8)", width=1.5),
                    name=name,
                    legendgroup=name,
                    showlegend=i == 0,
                    hovertemplate=(
                        f"{name}<br>{_escape(seed_word)} {seed}<br>{_escape(step_word)} %{{x}}"
                        f"<br>{_escape(loss_word)} %{{y:.4g}}<extra></extra>"
                    ),
                )
            )
    fig.update_layout(
        title=_title(title),
        height=380,
        margin=dict(l=10, r=10, t=70, b=10),
        xaxis=dict(title=_escape(step_word), automargin=True),
        yaxis=dict(title=_escape(loss_word), rangemode="tozero", automargin=True),
        # below the step axis's title, whatever the rows a phone wraps the arms into
        legend=dict(orientation="h", y=-0.32, yanchor="top"),
        plot_bgcolor="white",
    )
    return fig


def arm_bars(
    groups: Sequence[str],
    arms: Sequence[str],
    mean: np.ndarray,
    half_width: np.ndarray,
    names: Mapping[str, str],
    title: str,
    y_title: str,
) -> go.Figure:
    """One bar per arm in each group (a cell), its mean over seeds with a 95% interval.

    Args:
        groups: G group labels (the x axis); arms: A arm keys (the bars' colours).
        mean, half_width: (G, A) bar heights and interval half-widths (NaN: no bar).
    """
    mean, half_width = np.asarray(mean, np.float64), np.asarray(half_width, np.float64)
    if mean.shape != (len(groups), len(arms)) or half_width.shape != mean.shape:
        raise ValueError(f"{len(groups)} groups x {len(arms)} arms need means of that shape")
    fig = go.Figure()
    for j, arm in enumerate(arms):
        name = _escape(names.get(arm, arm))
        fig.add_trace(
            go.Bar(
                x=[_escape(g) for g in groups],
                y=np.where(np.isfinite(mean[:, j]), mean[:, j], None).tolist(),
                error_y=dict(type="data", array=half_width[:, j].tolist(), visible=True),
                name=name,
                marker_color=f"rgb({ARM_COLOURS.get(arm, '99, 99, 99')})",
                hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        title=_title(title),
        height=400,
        margin=dict(l=10, r=10, t=70, b=10),
        yaxis=dict(title=_escape(y_title), rangemode="tozero", automargin=True),
        legend=dict(orientation="h", y=-0.2),
        plot_bgcolor="white",
    )
    return fig
