"""The Before/after W_o view: concat against attn_out, W_o itself, and each head's term.

Per layer: the heads side by side before W_o (concat), what W_o makes of them (attn_out), their
cosine per token, the (D, D) matrix, and z_h W_o^h at one token with the check that these terms
and b_o add up to attn_out exactly. Every W_o mode of the sidebar is shown as the map it applies
(block-diagonal and rank-k included), so the same identities can be checked in each. Last, each
head's share of attn_out (tfviz.analysis.shares), layer by layer and learned beside switched, and
per token in the layer.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import plots
from tfviz.core import wo
from tfviz.core.trace import cosine_per_token, decomposition_error
from tfviz.ui.compute import cached_shares, cached_w_o, cached_w_o_figure
from tfviz.ui.downloads import download_before_after
from tfviz.ui.i18n import current, t
from tfviz.ui.standalone import download_button
from tfviz.ui.switches import w_o_label
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, per_model
from tfviz.ui.widgets import canvas_charts, chart, drop_stale_index, index_picker, plot_words

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model("wo_layer", "wo_token", "wo_share_token")


def shown(
    drawn: list,
    figure,
    key: str,
    caption_key: str,
    axes_key: str | None = None,
    on_canvas: bool = True,
) -> None:
    """Draw one chart with its caption below it, and keep both for the web page (drawn);
    axes_key: a line before the caption that says which way the chart reads (W_o's rows).

    on_canvas: a chart a keystroke redraws is a canvas chart (widgets.canvas_charts, as the
    Attention grid): drawn by plotly.js, this view's six made a keystroke cost more than a bare
    page drawing the same numbers (bench/README.md). W_o itself, which no keystroke changes,
    stays plotly's, with the toolbar's SVG for slides, and so does the shares' flow (bars the
    canvas does not draw)."""
    if on_canvas:
        canvas_charts([figure], key, columns=1)
    else:
        chart(figure, key=key)
    caption = t(caption_key)
    if axes_key is not None:
        st.caption(t(axes_key))
        caption = f"{t(axes_key)} {caption}"
    st.caption(t(caption_key))
    drawn.append((caption, figure))


def render(view: View) -> None:
    tr = view.trace
    H = tr.n_heads
    layer = index_picker(t("w_o.layer"), tr.n_layers, "wo_layer", "L")
    mode = tr.w_o_modes[layer]
    # One slot whether or not there is a note: an element that comes and goes would move every
    # chart after it, and the browser would redraw concat, which no W_o mode changes.
    note = st.empty()
    if mode != "learned":
        note.info(md_escape(t("w_o.switched", mode=w_o_label(mode))))
    drawn = []  # (caption, figure) of every chart below, for the web page
    concat = plots.activation_map(
        tr.concat[layer], tr.labels, n_heads=H, title=t("w_o.concat_title"), words=plot_words()
    )
    attn_out = plots.activation_map(
        tr.attn_out[layer], tr.labels, title=t("w_o.out_title"), words=plot_words()
    )
    # Side by side in one canvas element (one below the other on a phone): each element brings
    # its own drawing code with every keystroke.
    canvas_charts([concat, attn_out], "before_after", columns=2)
    before, after = st.columns(2)
    for column, figure, caption in (
        (before, concat, "w_o.concat_caption"),
        (after, attn_out, "w_o.out_caption"),
    ):
        column.caption(t(caption))
        drawn.append((t(caption), figure))
    cosine = cosine_per_token(tr.concat[layer], tr.attn_out[layer])  # (T,)
    W_o = cached_w_o(view.entry.digest, tuple(tr.w_o_modes), view.model)  # (L, D, D)
    shown(
        drawn,
        plots.cosine_bars(cosine, tr.labels, title=t("w_o.cosine_title"), words=plot_words()),
        "cosine",
        "w_o.cosine_caption",
    )
    w_o_and_terms(view, drawn, W_o, layer)
    shares_section(view, drawn, layer)
    download_before_after(view)
    title = t("standalone.title.w_o", model=view.entry.name, layer=layer)
    download_button(view, title, drawn, key="w_o")  # the figures drawn above, in the page's words


def w_o_and_terms(view: View, drawn: list, W_o: np.ndarray, layer: int) -> None:
    """The layer's W_o as applied beside each head's term z_h W_o^h at one token, with the check
    that the terms and b_o add up to attn_out."""
    tr = view.trace
    H = tr.n_heads
    left, right = st.columns(2)
    with left:
        title = t("w_o.matrix_title", layer=layer)
        words = plot_words()
        figure = cached_w_o_figure(
            view.entry.digest,
            tuple(tr.w_o_modes),
            layer,
            title,
            current(),
            lambda: plots.w_o_matrix(W_o[layer], H, title=title, words=words),
        )
        shown(
            drawn,
            figure,
            "w_o",
            "w_o.matrix_caption",
            axes_key="w_o.matrix_axes",  # rows = concat dims, as lesson 1's table
            on_canvas=False,
        )
    with right:
        token = st.select_slider(t("w_o.token"), options=tr.labels, key="wo_token")
        i = tr.labels.index(token)
        (shown_token,) = plots.escape_labels([token])  # a title is HTML to plotly
        shown(
            drawn,
            plots.head_contributions(
                wo.head_contributions(tr.z[layer], W_o[layer])[:, i],
                token,
                title=t("w_o.terms_title", token=shown_token),
                words=plot_words(),
            ),
            "head_contributions",
            "w_o.terms_caption",
        )
        st.metric(
            t("w_o.check_label"),
            f"{decomposition_error(tr, W_o, layer):.1e}",
            help=t("w_o.check_help"),
        )


def shares_section(view: View, drawn: list, layer: int) -> None:
    """Each head's share of attn_out (its term's length over the heads' terms' lengths): every
    layer as one bar, averaged over the tokens or at one token, the learned model's above the
    switched one when a switch is on; and the layer picked above, per token."""
    tr = view.trace
    st.markdown(f"**{md_escape(t('w_o.shares.title'))}**")
    st.caption(t("w_o.shares.intro"))
    now = cached_shares(view, tr)
    switched = not tr.interventions.is_default and view.base is not None
    learned = cached_shares(view, view.base) if switched else None
    T = len(tr.labels)
    drop_stale_index("wo_share_token", T + 1)
    lang = current()  # for format_func, which Streamlit may call outside this run
    at = st.selectbox(
        t("w_o.shares.at"),
        [T, *range(T)],  # T: the mean over the tokens, shown first
        format_func=lambda i: t("w_o.shares.mean", lang=lang) if i == T else f"{i}: {tr.labels[i]}",
        key="wo_share_token",
    )

    def at_token(shares) -> np.ndarray:  # (L, H)
        return shares.norm_share.mean(axis=-1) if at == T else shares.norm_share[..., at]

    if at == T:
        where = t("w_o.shares.mean")
    else:
        where = t("w_o.shares.at_token", token=plots.escape_labels([tr.labels[at]])[0])
    flow = plots.head_share_flow(
        at_token(now),
        None if learned is None else at_token(learned),
        title=t("w_o.shares.flow_title", at=where),
        words=plot_words(),
    )
    shown(drawn, flow, "head_share_flow", "w_o.shares.flow_caption", on_canvas=False)
    if switched:
        st.caption(t("w_o.shares.pair_note"))
    tokens = plots.head_share_tokens(
        now.norm_share[layer],
        tr.labels,
        title=t("w_o.shares.tokens_title", layer=layer),
        words=plot_words(),
    )
    shown(drawn, tokens, "head_share_tokens", "w_o.shares.tokens_caption")
