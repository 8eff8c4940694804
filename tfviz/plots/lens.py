"""The logit lens's figure: each layer's top token at each position, coloured by probability."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tfviz.plots.style import (
    MARGIN,
    SEQUENTIAL_SCALE,
    Words,
    _escape,
    _figure_of,
    _float32,
    _heatmap,
    english,
)

# A token of whitespace alone (a character model's space or line break) left its cell blank:
# drawn as the marks an editor shows for them.
WHITESPACE_MARKS = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})


def visible(token: str) -> str:
    """token as a lens cell writes it: whitespace alone as its marks, anything else as it is."""
    return token.translate(WHITESPACE_MARKS) if token.isspace() else token


def lens_map(
    tokens: np.ndarray,
    probs: np.ndarray,
    rows: Sequence[str],
    columns: Sequence[str],
    title: str = "",
    *,
    words: Words = english,
) -> go.Figure:
    """(R, P) top tokens (rows = the embedding and each layer, columns = positions), each cell
    its token written and coloured by its probability (0..1)."""
    probs = _float32(probs, "probabilities", ndim=2)
    tokens = np.asarray(tokens, dtype=str)
    if tokens.shape != probs.shape or probs.shape != (len(rows), len(columns)):
        raise ValueError(
            f"tokens {tokens.shape} and probabilities {probs.shape} must be "
            f"({len(rows)} rows, {len(columns)} positions)"
        )
    # A position's label may repeat (two "the"): numbered, so the category axis keeps both.
    x = [f"{i}·{_escape(label)}" for i, label in enumerate(columns)]
    text = [[_escape(visible(tok)[:8]) for tok in row] for row in tokens]  # a cell holds ~8
    hover = f"%{{y}} %{{x}}<br>{_escape(words('chart.word.token'))} %{{text}}"
    hover += f"<br>{_escape(words('chart.word.probability'))} %{{z:.3f}}"
    trace = _heatmap(probs, x, list(rows), hover)
    trace.update(text=text, texttemplate="%{text}", textfont=dict(size=11))
    layout = dict(
        title=dict(text=title),
        height=max(260, 30 * len(rows) + 160),
        margin=MARGIN,
        coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=0.0, cmax=1.0),
        # Positions along the bottom: tilted on top they ran into the title.
        xaxis=dict(type="category", tickangle=-45, automargin=True),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure_of([trace], layout)
