"""Plotly figures from numpy arrays and token labels: attention maps, W_o before/after, drift.

The renderer never runs a model: every function takes arrays and labels, checks their shapes at
the boundary (a mismatch raises ValueError saying which axis disagrees with what) and sends
float32. Token labels are HTML-escaped, because plotly reads tick labels and hover text as HTML:
a token "<b>x</b>" must be shown as typed, not in bold.

Figures are built as plain dicts and validated once by go.Figure. A grid of heatmaps (every
layer x head) is drawn as one heatmap trace on one pair of axes: the blocks are tiled into a
mosaic with empty (NaN) rows and columns between them, and every row and column gets a unique
category name ("L0 query a·1", "H2 key b·2") that the hover shows, while the tick text shows
only the token. The browser draws that in about 40 ms; the same grid as 8 subplots took about
170 ms, and a keystroke redraws it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

ATTENTION_SCALE = "Blues"
ATTENTION_AXIS = dict(
    colorscale=ATTENTION_SCALE, cmin=0.0, cmax=1.0, colorbar=dict(title=dict(text="weight"))
)
DIVERGING_SCALE = "RdBu_r"  # blue negative, white zero, red positive
MOSAIC_PX = 900  # width the mosaic's cells are sized for (the wide layout's main column)
MARGIN = dict(l=10, r=10, t=70, b=40)


def escape_labels(labels: Sequence[str]) -> list[str]:
    """Labels made safe for plotly: HTML-escaped, and refused if two would merge on an axis."""
    out = [html.escape(str(label), quote=False) for label in labels]
    if len(set(out)) != len(out):
        raise ValueError("token labels must be unique, or the axis merges equal tokens")
    return out


def attention_grid(
    attn: np.ndarray,
    labels: Sequence[str],
    layer_ids: Sequence[int] | None = None,
    title: str = "",
    with_mean: bool = False,
) -> go.Figure:
    """Every layer x head as a heatmap: rows are layers, columns heads, colours 0..1.

    Args:
        attn: (L, H, T, T) attention weights, queries on rows and keys on columns.
        labels: T token labels.
        layer_ids: the layer number of each row (default 0..L-1), for a slice of layers.
        title: figure title.
        with_mean: add a last column with the mean of each layer's heads (what one big head
            averaging them would look like).
    """
    attn = _attention(attn, labels, ndim=4)
    L, H = attn.shape[:2]
    layer_ids = list(range(L)) if layer_ids is None else list(layer_ids)
    if len(layer_ids) != L:
        raise ValueError(f"attention has {L} layers but {len(layer_ids)} layer ids were given")
    cols = [f"H{h}" for h in range(H)]
    if with_mean:
        attn = np.concatenate([attn, attn.mean(axis=1, keepdims=True)], axis=1)  # (L, H+1, T, T)
        cols.append("mean")
    return _mosaic(
        attn,
        labels,
        labels,
        rows=[f"L{lay}" for lay in layer_ids],
        cols=cols,
        words=("query", "key", "weight"),
        coloraxis=ATTENTION_AXIS,
        title=title,
    )


def attention_map(weights: np.ndarray, labels: Sequence[str], title: str = "") -> go.Figure:
    """One head's attention, enlarged: (T, T) weights, queries on rows, keys on columns."""
    weights = _attention(weights, labels, ndim=2)
    ticks = escape_labels(labels)
    trace = _heatmap(weights, ticks, ticks, "query %{y}<br>key %{x}<br>weight %{z:.3f}")
    layout = dict(
        title=dict(text=title),
        height=max(360, 24 * len(labels) + 140),
        margin=MARGIN,
        coloraxis=ATTENTION_AXIS,
        xaxis=dict(type="category"),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure(trace, layout)


def activation_map(
    values: np.ndarray,
    labels: Sequence[str],
    n_heads: int | None = None,
    title: str = "",
) -> go.Figure:
    """A (T, D) activation as a heatmap, tokens on rows and dimensions on columns.

    Args:
        values: (T, D) array, e.g. concat (before W_o) or attn_out (after W_o) of one layer.
        labels: T token labels.
        n_heads: if given, D is split into this many head blocks, marked with lines and H0, H1...
            (right for concat, where block h is head h's z; after W_o no block belongs to a head).
        title: figure title.
    """
    values = _float32(values, "activation", ndim=2)
    T, D = values.shape
    y = _token_axis(labels, T, "activation", "rows")
    trace = _heatmap(values, np.arange(D), y, "token %{y}<br>dim %{x}<br>value %{z:.3f}")
    layout = dict(
        title=dict(text=title),
        height=max(300, 22 * T + 130),
        margin=MARGIN,
        coloraxis=_diverging(values),
        xaxis=dict(title=dict(text="dimension")),
        yaxis=dict(type="category", autorange="reversed"),
    )
    if n_heads is not None:
        layout.update(_head_blocks(D, n_heads))
    return _figure(trace, layout)


def w_o_matrix(W_o: np.ndarray, n_heads: int, title: str = "W_o") -> go.Figure:
    """The (D, D) output projection in nn.Linear layout: rows = output dims, columns = input dims.

    Column block h reads head h's slice of concat; a row is one output dimension, and colour
    across all its blocks means that output dimension draws on every head.
    """
    W_o = _float32(W_o, "W_o", ndim=2)
    D_out, D_in = W_o.shape
    if D_out != D_in:
        raise ValueError(f"W_o must be square (D, D), got shape {W_o.shape}")
    trace = _heatmap(
        W_o,
        np.arange(D_in),
        np.arange(D_out),
        "output dim %{y}<br>input dim %{x}<br>weight %{z:.3f}",
    )
    layout = dict(
        title=dict(text=title),
        height=520,
        margin=MARGIN,
        coloraxis=_diverging(W_o),
        xaxis=dict(title=dict(text="input dim (concat: head blocks)")),
        yaxis=dict(title=dict(text="output dim (attn_out)"), autorange="reversed"),
        **_head_blocks(D_in, n_heads),
    )
    return _figure(trace, layout)


def head_contributions(contrib: np.ndarray, token: str, title: str = "") -> go.Figure:
    """(H, D) per-head terms z_h W_o^h at one token: rows = heads, columns = output dims.

    Their column sums (plus b_o) are attn_out at that token; a column coloured in every row is an
    output dimension that mixes all heads.
    """
    contrib = _float32(contrib, "head contributions", ndim=2)
    H, D = contrib.shape
    trace = _heatmap(
        contrib,
        np.arange(D),
        [f"H{h}" for h in range(H)],
        "%{y}<br>output dim %{x}<br>value %{z:.3f}",
    )
    layout = dict(
        title=dict(text=title or f"Each head's term z_h W_o^h at token {_escape(token)}"),
        height=max(260, 36 * H + 140),
        margin=MARGIN,
        coloraxis=_diverging(contrib),
        xaxis=dict(title=dict(text="output dim (attn_out)")),
        yaxis=dict(type="category", autorange="reversed"),
    )
    return _figure(trace, layout)


def cosine_bars(cosine: np.ndarray, labels: Sequence[str], title: str = "") -> go.Figure:
    """One bar per token: a cosine in [-1, 1] (e.g. between concat and attn_out)."""
    cosine = _float32(cosine, "cosine", ndim=1)
    x = _token_axis(labels, len(cosine), "cosine", "values")
    trace = dict(
        type="bar", x=x, y=cosine, hovertemplate="token %{x}<br>cosine %{y:.3f}<extra></extra>"
    )
    layout = dict(
        title=dict(text=title),
        height=300,
        margin=MARGIN,
        xaxis=dict(type="category"),
        yaxis=dict(range=[-1.05, 1.05], title=dict(text="cosine")),
    )
    return _figure(trace, layout)


def residual_pair(
    base: np.ndarray,
    switched: np.ndarray,
    labels: Sequence[str],
    names: tuple[str, str] = ("learned W_o", "switched"),
) -> go.Figure:
    """Residual streams (L, T, D) of two passes side by side, one row per layer, shared colours."""
    base = _float32(base, "residual stream", ndim=3)
    switched = _float32(switched, "residual stream", ndim=3)
    if base.shape != switched.shape:
        raise ValueError(f"residual streams differ in shape: {base.shape} and {switched.shape}")
    L, T, D = base.shape
    _token_axis(labels, T, "residual stream", "tokens")
    return _mosaic(
        np.stack([base, switched], axis=1),  # (L, 2, T, D)
        labels,
        [str(d) for d in range(D)],
        rows=[f"L{lay} out" for lay in range(L)],
        cols=list(names),
        words=("token", "dim", "value"),
        coloraxis=_diverging(np.stack([base, switched])),
        title="Residual stream after each layer",
        x_tick_every=max(1, D // 8),
    )


def drift_bars(drift: np.ndarray) -> go.Figure:
    """(L,) cosine drift of the residual stream per layer: 0 unchanged, 1 unrelated, 2 opposite."""
    drift = _float32(drift, "drift", ndim=1)
    trace = dict(
        type="bar",
        x=[f"L{lay}" for lay in range(len(drift))],
        y=drift,
        hovertemplate="%{x}<br>drift %{y:.3f}<extra></extra>",
    )
    top = max(1.0, float(drift.max(initial=0.0)) * 1.05)
    layout = dict(
        title=dict(text="Drift of the residual stream: 1 - mean cosine(learned, switched)"),
        height=300,
        margin=MARGIN,
        yaxis=dict(range=[0, top], title=dict(text="drift")),
    )
    return _figure(trace, layout)


def loss_curve(
    losses: Sequence[float], every: int = 1, total_steps: int | None = None
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
        hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
    )
    layout = dict(
        title=dict(text="Training loss"),
        height=300,
        margin=MARGIN,
        xaxis=dict(title=dict(text="step"), range=[0, total_steps] if total_steps else None),
        yaxis=dict(title=dict(text="loss"), type="log" if positive else "linear"),
    )
    return _figure(trace, layout)


# ---- helpers --------------------------------------------------------------------------------


def _figure(trace: dict, layout: dict) -> go.Figure:
    """One-trace figure whose axes make room for their tick labels (long tokens included)."""
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, **layout.get(axis, {})}
    return go.Figure(data=[trace], layout=layout)


def _escape(text: str) -> str:
    return html.escape(str(text), quote=False)


def _float32(values, what: str, ndim: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-d, got shape {values.shape}")
    return values


def _attention(attn, labels: Sequence[str], ndim: int) -> np.ndarray:
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim != ndim:
        axes = "(layers, heads, queries, keys)" if ndim == 4 else "(queries, keys)"
        raise ValueError(f"attention must be {ndim}-d {axes}, got shape {attn.shape}")
    queries, keys = attn.shape[-2:]
    if keys != len(labels):
        raise ValueError(f"attention has {keys} keys but {len(labels)} tokens were given")
    if queries != len(labels):
        raise ValueError(f"attention has {queries} queries but {len(labels)} tokens were given")
    return attn


def _token_axis(labels: Sequence[str], n: int, what: str, axis: str) -> list[str]:
    if len(labels) != n:
        raise ValueError(f"{what} has {n} {axis} but {len(labels)} tokens were given")
    return escape_labels(labels)


def _heatmap(z: np.ndarray, x, y, hover: str) -> dict:
    return dict(
        type="heatmap",
        z=z,
        x=x,
        y=y,
        coloraxis="coloraxis",
        hovertemplate=hover + "<extra></extra>",
    )


def _diverging(values: np.ndarray) -> dict:
    """A colour axis centred on 0 (range +-1 for an all-zero array, so it still draws)."""
    limit = float(np.abs(values).max(initial=0.0)) or 1.0
    return dict(colorscale=DIVERGING_SCALE, cmin=-limit, cmax=limit)


def _mosaic(
    blocks: np.ndarray,
    y_labels: Sequence[str],
    x_labels: Sequence[str],
    rows: list[str],
    cols: list[str],
    words: tuple[str, str, str],
    coloraxis: dict,
    title: str,
    x_tick_every: int = 1,
) -> go.Figure:
    """A grid of (R, C, ny, nx) blocks as one heatmap, blocks titled "row col".

    Args:
        blocks: R x C blocks of ny x nx values.
        y_labels, x_labels: tick text for a block's rows and columns (repeated in every block).
        rows, cols: names of the block rows and columns ("L0", "H1"); they prefix the hover.
        words: what a block's rows, columns and values are, for the hover ("query", "key",
            "weight").
        coloraxis: the shared colour axis.
        title: figure title.
        x_tick_every: label every k-th column only (for wide blocks such as D dimensions).
    """
    R, C, ny, nx = blocks.shape
    y_ticks, x_ticks = escape_labels(y_labels), escape_labels(x_labels)
    gap_y, gap_x = 2, 1  # empty rows leave room for the block titles
    z = np.full((R * (ny + gap_y) - gap_y, C * (nx + gap_x) - gap_x), np.nan, dtype=np.float32)
    for r in range(R):
        for c in range(C):
            y0, x0 = r * (ny + gap_y), c * (nx + gap_x)
            z[y0 : y0 + ny, x0 : x0 + nx] = blocks[r, c]
    y_names = _axis_names(rows, words[0], y_ticks, gap_y)
    x_names = _axis_names(cols, words[1], x_ticks, gap_x)
    y_tickvals = [y_names[r * (ny + gap_y) + i] for r in range(R) for i in range(ny)]
    # Every block has its columns in the same order, so only the first block column is ticked:
    # each tick label costs the browser a text measurement on every redraw (about 65 ms for the
    # 85 of a 2 x 5 grid at T=17), and the hover names each cell anyway.
    x_tickvals = [x_names[i] for i in range(0, nx, x_tick_every)]
    trace = _heatmap(z, x_names, y_names, f"%{{y}}<br>%{{x}}<br>{words[2]} %{{z:.3f}}")
    trace["hoverongaps"] = False
    annotations = [
        dict(
            text=f"{rows[r]} {cols[c]}".strip(),
            x=c * (nx + gap_x) + (nx - 1) / 2,
            y=r * (ny + gap_y) - 0.6,
            xref="x",
            yref="y",
            yanchor="bottom",
            showarrow=False,
            font=dict(size=11),
        )
        for r in range(R)
        for c in range(C)
    ]
    cell = max(5.0, min(30.0, MOSAIC_PX / z.shape[1]))
    row_px = max(cell, 14.0)  # wide blocks (D columns) still get readable token rows
    tick_font = dict(size=9 if cell < 14 else 11)
    layout = dict(
        title=dict(text=title),
        height=int(z.shape[0] * row_px) + 150,
        margin=dict(l=10, r=10, t=80, b=50),
        coloraxis=coloraxis,
        plot_bgcolor="rgba(0,0,0,0)",  # the gaps show the page, not a grey band
        xaxis=dict(
            type="category",
            tickvals=x_tickvals,
            ticktext=[x_ticks[i] for i in range(0, nx, x_tick_every)],
            tickfont=tick_font,
            showgrid=False,
        ),
        yaxis=dict(
            type="category",
            tickvals=y_tickvals,
            ticktext=y_ticks * R,
            tickfont=tick_font,
            autorange="reversed",
            showgrid=False,
        ),
        annotations=annotations,
    )
    return _figure(trace, layout)


def _axis_names(blocks: list[str], word: str, ticks: list[str], gap: int) -> list[str]:
    """Unique category names along one mosaic axis: "L0 query a·1", then gap names."""
    names: list[str] = []
    for b, block in enumerate(blocks):
        names += [f"{block} {word} {t}".strip() for t in ticks]
        if b < len(blocks) - 1:
            names += [f"gap {b}.{i}" for i in range(gap)]
    return names


def _head_blocks(D: int, n_heads: int) -> dict:
    """Layout shapes and annotations marking n_heads equal blocks along a D-wide x axis."""
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"{D} dimensions cannot be split into {n_heads} equal head blocks")
    d_k = D // n_heads
    shapes = [
        dict(
            type="line",
            x0=h * d_k - 0.5,
            x1=h * d_k - 0.5,
            y0=0,
            y1=1,
            xref="x",
            yref="paper",
            line=dict(color="black", width=1.5, dash="dot"),
        )
        for h in range(1, n_heads)
    ]
    annotations = [
        dict(
            text=f"H{h}",
            x=(h + 0.5) * d_k - 0.5,
            y=1.0,
            xref="x",
            yref="paper",
            yanchor="bottom",
            showarrow=False,
        )
        for h in range(n_heads)
    ]
    return dict(shapes=shapes, annotations=annotations)
