"""The Attention view: every layer x head as heatmaps, one head enlarged, the weights as CSV.

A long input (more than LONG_PIECES word-pieces: a model reads up to 256 or 512) stays readable:
the heads' squares show a window of the input (WINDOW pieces at first, moved and widened with a
slider), the layer's mean can be drawn whole as one image (hover names every cell), and "which
tokens does token i attend to" is a ranked list.

A model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, picked
above the grid: 72 squares in one figure are too small to read and slow to draw. That layer's
heads and their mean are laid out as a grid of squares read row by row (tfviz.ui.heads): three
to a row on a desktop, one under the other on a phone, drawn on canvases (widgets.canvas_charts).
In one row, 13 squares left about 5 px per word-piece, and their labels an illegible pile.

Below them, once switched on, one head's attention for one query is opened up as BertViz's neuron
view lays it out (tfviz.analysis.neuron): the query vector, every key vector, their elementwise
product, the dot products, the scaled scores and the softmax, from the same trace as the grid.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from tfviz import plots
from tfviz.plots.export import attention_csv
from tfviz.ui import state
from tfviz.ui.compute import cached_neuron
from tfviz.ui.heads import (
    attention_columns,
    default_scale,
    grid_columns,
    head_columns,
    many_heads,
    weight_scale,
    weight_scale_caption,
)
from tfviz.ui.i18n import current, t
from tfviz.ui.neuron import neuron_charts
from tfviz.ui.standalone import download_button
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, per_model
from tfviz.ui.widgets import canvas_charts, drop_stale_index, index_picker, plot_words

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model(
    "attn_layer",
    "attn_head",
    "attn_grid_layer",
    "attn_zoom",
    "attn_rank_query",
    "attn_rank_head",
    "attn_neuron_layer",
    "attn_neuron_head",
    "attn_neuron_query",
)


LONG_PIECES = 48  # a longer input is a long one (module docstring)
WINDOW = 32  # the word-pieces a long input's squares show at first: as fast as a short input's
RANKED = 10  # keys in the ranked list


def head_label(head: int) -> str:
    """How the app names a head, e.g. H3: a technical name, the same in every language."""
    return f"H{head}"


def layer_head_label(layer: int, head: int) -> str:
    """The enlarged head's title, e.g. "L1 H3" (technical names, as on the grid's squares)."""
    return f"L{layer} {head_label(head)}"


def position_label(labels, i: int) -> str:
    """A word-piece as the long-input pickers name it: its position and its label."""
    return f"{i}: {labels[i]}"


def zoom(labels) -> slice:
    """The word-pieces a layer's squares show: all of a short input; of a long one, the range
    picked on a slider (WINDOW pieces at first). Its value is dropped when the input got too
    short for it, so typing a shorter text never meets a range it does not have."""
    T = len(labels)
    if T <= LONG_PIECES:
        return slice(0, T)
    drop_stale_index("attn_zoom", T)
    first, last = st.select_slider(
        t("attention.zoom"),
        options=range(T),
        value=(0, WINDOW - 1),
        format_func=lambda i: position_label(labels, i),
        key="attn_zoom",
        help=t("attention.zoom_help", n=T, window=WINDOW),
    )
    return slice(first, last + 1)


def whole_layer(tr, layer: int) -> None:
    """A long input's whole layer: the mean of its heads as one image, and the keys one token
    attends to most, ranked (its own head or the mean)."""
    T, H = len(tr.labels), tr.n_heads
    mean = tr.attn[layer].mean(axis=0)  # ranked below; drawn with a decoder's mask (tr.shown)
    # Off by default, like "Enlarge one head": at 256 word-pieces the map is ~400 KB a keystroke,
    # more than everything else the view sends.
    if st.toggle(t("attention.whole", n=T), key="attn_whole"):
        title = t("attention.whole_title", layer=layer, n=T)
        scale = state.WEIGHT_SCALE.get(plots.FIXED)
        figure = plots.attention_map(
            tr.shown(mean), tr.labels, title=title, words=plot_words(), scale=scale
        )
        canvas_charts([figure], "attention_whole", columns=1)  # zoomable, labels thinned anew
        st.caption(t("attention.zoom_hint"))
    drop_stale_index("attn_rank_query", T)
    drop_stale_index("attn_rank_head", H + 1)
    left, right = st.columns(2)
    query = left.selectbox(
        t("attention.ranked_query"),
        range(T),
        format_func=lambda i: position_label(tr.labels, i),
        key="attn_rank_query",
    )
    lang = current()  # for format_func, which Streamlit may call outside this run
    head = right.selectbox(
        t("attention.ranked_head"),
        range(H + 1),  # H: the mean of the heads, the map above, shown first
        index=H,
        format_func=lambda h: t("attention.ranked_mean", lang=lang) if h == H else head_label(h),
        key="attn_rank_head",
    )
    from tfviz import analysis  # here: the first page must not wait for the analyses' module

    weights = mean if head == H else tr.attn[layer, head]
    ranked = analysis.ranked_keys(weights, query, RANKED)
    table = pd.DataFrame(
        {
            t("attention.ranked.key"): [tr.labels[j] for j, _ in ranked],
            t("attention.ranked.position"): [j for j, _ in ranked],
            t("attention.ranked.weight"): [round(w, 4) for _, w in ranked],
        }
    )
    token = md_escape(position_label(tr.labels, query))  # user text: shown inert
    st.caption(t("attention.ranked_caption", n=len(ranked), token=token))
    st.dataframe(table, hide_index=True, key="attention_ranked")


def render(view: View) -> None:
    tr = view.trace
    st.caption(t("attention.intro"))
    scale = weight_scale("attn_weight_scale", default_scale(view))
    if not many_heads(tr.n_layers, tr.n_heads):
        every_layer_grid(tr, scale)
        layer_shown, window = None, slice(None)  # every layer, every word-piece
    else:
        layer_shown, window = one_layer_grid(tr, scale)
    view.kind.attention_notes(view)  # a decoder's mask, an encoder's frame
    left, right = st.columns(2)
    with left:
        enlarged = enlarged_head(tr, scale)
    with right:
        download_buttons(view, tr, layer_shown, enlarged, window, scale)
    neuron_section(view)


def every_layer_grid(tr, scale: str) -> None:
    """A model with few heads: every layer x head in one grid of squares."""
    layers = list(range(tr.n_layers))
    st.markdown(f"**{md_escape(t('attention.grid_title'))}**")
    grid_columns(tr.shown(tr.attn), tr.labels, layers, "attention_grid", scale)
    weight_scale_caption(scale, tr.shown(tr.attn))


def one_layer_grid(tr, scale: str) -> tuple[int, slice]:
    """A model with many heads: the heads of the layer picked above them, of a long input the
    word-pieces picked on a slider (zoom) and then its whole layer; returns the layer and the
    word-pieces shown."""
    layer = index_picker(
        t("attention.layer_shown"),
        tr.n_layers,
        "attn_grid_layer",
        "L",
        help=t("attention.layer_shown_help", layers=tr.n_layers, heads=tr.n_heads),
    )
    st.markdown(f"**{md_escape(t('attention.layer_title', layer=layer))}**")
    window = zoom(tr.labels)
    shown = tr.shown(tr.attn[layer][:, window, window])
    head_columns(shown, tr.labels[window], layer, "attention_grid", scale)
    weight_scale_caption(scale, shown)
    if len(tr.labels) > LONG_PIECES:
        whole_layer(tr, layer)
    return layer, window


def enlarged_head(tr, scale: str) -> tuple[int, int] | None:
    """One head picked and drawn enlarged, once switched on: its (layer, head), else None."""
    # Off by default: a second heatmap costs the browser a redraw on every keystroke.
    if not st.toggle(t("attention.enlarge"), key="attn_enlarge"):
        return None
    a, b = st.columns(2)
    layer = a.selectbox(
        t("attention.layer"),
        range(tr.n_layers),
        format_func=lambda x: f"L{x}",
        key="attn_layer",
    )
    head = b.selectbox(
        t("attention.head"), range(tr.n_heads), format_func=head_label, key="attn_head"
    )
    figure = plots.attention_map(
        tr.shown(tr.attn[layer, head]),
        tr.labels,
        title=layer_head_label(layer, head),
        words=plot_words(),
        scale=scale,
    )
    canvas_charts([figure], "attention_head", columns=1)  # zoomable, as the whole map
    st.caption(t("attention.zoom_hint"))
    return layer, head


def download_buttons(
    view: View,
    tr,
    layer_shown: int | None,
    enlarged: tuple[int, int] | None,
    window: slice,
    scale: str,
) -> None:
    """The weights as CSV and the charts drawn as a web page, both built on click only."""
    st.caption(t("attention.csv_intro"))
    st.download_button(
        t("attention.csv"),
        functools.partial(attention_csv, tr.attn, tr.labels),  # built on click only
        file_name=f"attention_{view.entry.name}.csv",
        mime="text/csv",
        key="download_attention",
        on_click="ignore",
    )
    download_button(
        view,
        t("standalone.title.attention", model=view.entry.name),
        # Drawn on click; the captions now, while the session's language is known.
        functools.partial(
            exported_figures,
            tr,
            layer_shown,
            enlarged,
            window=window,
            caption=t("attention.grid_title")
            if layer_shown is None
            else t("attention.layer_title", layer=layer_shown),
            words=plot_words(),
            scale=scale,
        ),
        key="attention",
    )


def exported_figures(
    tr,
    layer_shown: int | None,
    enlarged: tuple[int, int] | None,
    caption: str,
    words: plots.Words = plots.english,
    window: slice = slice(None),
    scale: str = plots.FIXED,
) -> list:
    """The charts render() drew, as (caption, figure) for the web page (tfviz.ui.standalone):
    the grid (or the shown layer's column of heads) and the enlarged head, if any. words: the
    charts' words, bound while the script ran (this runs on click, outside it); window: the
    word-pieces the squares showed (a long input's); scale: how their weights were coloured."""
    if layer_shown is None:
        layers = list(range(tr.n_layers))
        figures = [
            (
                caption,
                plots.attention_grid(
                    tr.shown(tr.attn),
                    tr.labels,
                    layers,
                    title=caption,
                    with_mean=True,
                    words=words,
                    scale=scale,
                ),
            )
        ]
    else:
        attn, labels = tr.shown(tr.attn[layer_shown][:, window, window]), tr.labels[window]
        columns = attention_columns(attn, labels, layer_shown, words, scale)
        figures = [(caption, figure) for figure in columns]
    if enlarged is not None:
        layer, head = enlarged
        title = layer_head_label(layer, head)
        figure = plots.attention_map(
            tr.shown(tr.attn[layer, head]), tr.labels, title=title, words=words, scale=scale
        )
        figures.append((title, figure))
    return figures


# ---- inside one head: queries and keys (BertViz's neuron view) --------------------------------


def neuron_section(view: View) -> None:
    """One head's attention for one query opened up: q, every k, q x k, the dot products, the
    scaled scores and the softmax, from the view's trace (the sidebar's switches), with the check
    that this softmax is the trace's attention row."""
    # Off by default, like "Enlarge one head": three more charts would be redrawn a keystroke.
    if not st.toggle(t("attention.neuron.toggle"), key="attn_neuron"):
        return
    tr = view.trace
    st.caption(t("attention.neuron.intro"))
    cfg = view.model.config
    layer, head, query, rotated = neuron_pickers(tr, rotary=cfg.positions == "rotary")
    nv = cached_neuron(view, tr, layer, head, query, rotated)
    switched = not tr.interventions.is_default
    notes = [t("attention.neuron.switched" if switched else "attention.neuron.learned")]
    if cfg.kv_heads < cfg.n_heads:
        shared = [head_label(h) for h in range(cfg.n_heads) if cfg.kv_head(h) == nv.kv_head]
        notes.append(
            t(
                "attention.neuron.kv_head",
                head=head_label(head),
                kv=nv.kv_head,
                shared=", ".join(shared),
            )
        )
    if not nv.rotated and cfg.positions == "rotary":
        notes.append(t("attention.neuron.unrotated"))
    st.caption(" ".join(notes))
    neuron_charts(nv, tr.labels)
    gap = float(np.abs(nv.weights - np.nan_to_num(tr.attn[layer, head, query])).max())
    said = "attention.neuron.replaced" if nv.replaced else "attention.neuron.matches"
    st.markdown(t(said, diff=f"{gap:.1e}", head=layer_head_label(layer, head)))


def neuron_pickers(tr, rotary: bool) -> tuple[int, int, int, bool]:
    """The layer, query head and query position picked, and whether q and k are shown after the
    rotary turn (a rotary model may show them before it)."""
    a, b, c = st.columns(3)
    with a:
        layer = index_picker(t("attention.layer"), tr.n_layers, "attn_neuron_layer", "L")
    with b:
        head = index_picker(t("attention.neuron.head"), tr.n_heads, "attn_neuron_head", "H")
    T = len(tr.labels)
    drop_stale_index("attn_neuron_query", T)
    with c:
        query = st.selectbox(
            t("attention.neuron.query"),
            range(T),
            index=T - 1,  # the last token reads every key, a decoder's too
            format_func=lambda i: position_label(tr.labels, i),
            key="attn_neuron_query",
        )
    rotated = True
    if rotary:
        rotated = not st.toggle(
            t("attention.neuron.before_rotation"),
            key="attn_neuron_unrotated",
            help=t("attention.neuron.before_rotation_help"),
        )
    return layer, head, query, rotated
