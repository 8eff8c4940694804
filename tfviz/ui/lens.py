"""The logit lens drawn (tfviz.analysis.lens): each component's likeliest next token at each
position, rows worded by component_label, where a page shows one: the Analysis view, and the
decoder lesson's induction head.

A canvas chart (tfviz.ui.widgets.canvas_charts), as every chart a keystroke redraws there: drawn
by plotly.js a keystroke cost more than a bare page drawing the same numbers (bench/README.md).
"""

from __future__ import annotations

from tfviz import plots
from tfviz.ui.labels import component_label
from tfviz.ui.widgets import canvas_charts, plot_words


def lens_chart(lens, title: str, key: str) -> None:
    """One lens (a LensResult's learned or switched side) as a map of guesses, titled."""
    figure = plots.lens_map(
        lens.tokens[:, :, 0],
        lens.probs[:, :, 0],
        [component_label(r) for r in lens.rows],
        [lens.labels[p] for p in lens.positions],
        title=title,
        words=plot_words(),
    )
    canvas_charts([figure], key, columns=1)
