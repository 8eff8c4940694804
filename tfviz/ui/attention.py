"""The Attention view: every layer x head as heatmaps, one head enlarged, the weights as CSV.

A model with many heads (MiniLM: 6 layers x 12 heads) shows one layer's heads at a time, picked
above the grid: 72 squares in one figure are too small to read and slow to draw. That layer's
heads and their mean are laid out in HEAD_COLUMNS columns of squares (head_columns): side by
side on a desktop, one under the other on a phone, where st.columns stack. In one row, 13
squares left about 5 px per word-piece, and their labels an illegible pile.
"""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from tfviz import plots
from tfviz.export import attention_csv
from tfviz.ui import ranked, zoom
from tfviz.ui.common import View, chart, index_picker, md_escape, per_model, plot_words
from tfviz.ui.i18n import t
from tfviz.ui.standalone import download_button

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model("attn_layer", "attn_head", "attn_grid_layer")


MAX_GRID_HEADS = 32  # more heads than this in all: the grid shows one layer at a time
HEAD_COLUMNS = 3  # columns of a many-headed layer (each sized for tfviz.plots.COLUMN_PX)


def head_label(head: int) -> str:
    """How the app names a head, e.g. H3: a technical name, the same in every language."""
    return f"H{head}"


def layer_head_label(layer: int, head: int) -> str:
    """The enlarged head's title, e.g. "L1 H3" (technical names, as on the grid's squares)."""
    return f"L{layer} {head_label(head)}"


def head_columns(attn, labels, layer: int, key: str) -> None:
    """One layer's heads and their mean, readable: HEAD_COLUMNS charts of squares one above the
    other, in st.columns (stacked on a phone). The first column carries the colour bar.

    attn: (H, T, T) the layer's attention; key: the charts' keys are key_0, key_1, ...
    """
    words = plot_words()
    block_columns(
        attn.shape[0],
        lambda heads, last, scale: plots.attention_column(
            attn, labels, layer, heads, with_mean=last, show_scale=scale, words=words
        ),
        key,
    )


def column_blocks(H: int) -> list[tuple[int, list[int], bool]]:
    """(column, its heads, whether it ends with the extra block) for H heads and one more block
    (their mean, or their sum) over HEAD_COLUMNS columns; empty columns left out."""
    # Block b < H is head b, block H the last one: in order down the columns, about as many in
    # each.
    parts = np.array_split(np.arange(H + 1), HEAD_COLUMNS)
    columns = [(c, [int(b) for b in part if b < H], H in part) for c, part in enumerate(parts)]
    return [(c, heads, last) for c, heads, last in columns if heads or last]


def attention_columns(attn, labels, layer: int, words: plots.Words = plots.english) -> list:
    """The figures head_columns draws, one per column (for a web page or a bench), in words."""
    return [
        plots.attention_column(
            attn, labels, layer, heads, with_mean=last, show_scale=c == 0, words=words
        )
        for c, heads, last in column_blocks(attn.shape[0])
    ]


def block_columns(H: int, figure, key: str) -> None:
    """H heads and one more block (their mean, or their sum) in HEAD_COLUMNS st.columns.

    figure(heads, with_last_block, show_scale) draws one column (tfviz.plots.attention_column,
    norm_attention_column); its charts' keys are key_0, key_1, ...
    """
    columns = st.columns(HEAD_COLUMNS)
    for c, heads, last in column_blocks(H):
        with columns[c]:
            chart(figure(heads, last, c == 0), key=f"{key}_{c}")


def many_heads(n_layers: int, n_heads: int) -> bool:
    """Too many heads for one grid: show a layer at a time, in columns (MiniLM)."""
    return n_layers * n_heads > MAX_GRID_HEADS


def render(view: View) -> None:
    tr = view.trace
    st.caption(t("attention.intro"))
    attn, labels = zoom.window(view)  # a long text's chosen range of word-pieces, or all of it
    layer_shown = None  # every layer in one grid
    if not many_heads(tr.n_layers, tr.n_heads):
        layers = list(range(tr.n_layers))
        chart(
            plots.attention_grid(
                attn,
                labels,
                layers,
                title=t("attention.grid_title"),
                with_mean=True,
                words=plot_words(),
            ),
            key="attention_grid",
        )
    else:
        layer = index_picker(
            t("attention.layer_shown"),
            tr.n_layers,
            "attn_grid_layer",
            "L",
            help=t("attention.layer_shown_help", layers=tr.n_layers, heads=tr.n_heads),
        )
        st.markdown(f"**{md_escape(t('attention.layer_title', layer=layer))}**")
        head_columns(attn[layer], labels, layer, key="attention_grid")
        layer_shown = layer
    if view.is_sentence:
        st.caption(t("attention.pieces"))
        ranked.show(view, layer_shown)  # long texts: one query's keys as a ranked list
    enlarged = None  # (layer, head) when one head is shown enlarged
    left, right = st.columns(2)
    with left:
        # Off by default: a second heatmap costs the browser a redraw on every keystroke.
        if st.toggle(t("attention.enlarge"), key="attn_enlarge"):
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
            chart(
                plots.attention_map(
                    tr.attn[layer, head],
                    tr.labels,
                    title=layer_head_label(layer, head),
                    words=plot_words(),
                ),
                key="attention_head",
            )
            enlarged = (layer, head)
    with right:
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
                caption=t("attention.grid_title")
                if layer_shown is None
                else t("attention.layer_title", layer=layer_shown),
                words=plot_words(),
            ),
            key="attention",
        )


def exported_figures(
    tr,
    layer_shown: int | None,
    enlarged: tuple[int, int] | None,
    caption: str,
    words: plots.Words = plots.english,
) -> list:
    """The charts render() drew, as (caption, figure) for the web page (tfviz.ui.standalone):
    the grid (or the shown layer's columns of heads) and the enlarged head, if any. words: the
    charts' words, bound while the script ran (this runs on click, outside it)."""
    if layer_shown is None:
        layers = list(range(tr.n_layers))
        figures = [
            (
                caption,
                plots.attention_grid(
                    tr.attn, tr.labels, layers, title=caption, with_mean=True, words=words
                ),
            )
        ]
    else:
        columns = attention_columns(tr.attn[layer_shown], tr.labels, layer_shown, words)
        figures = [(caption, figure) for figure in columns]
    if enlarged is not None:
        layer, head = enlarged
        title = layer_head_label(layer, head)
        figure = plots.attention_map(tr.attn[layer, head], tr.labels, title=title, words=words)
        figures.append((title, figure))
    return figures
