"""W_o's freedom in the page (Take W_o apart, and lesson 4's why): a change of basis inside one
head's value space moves W_v and W_o while no output moves, and where each head writes, learned
W_o against identity (tfviz.analysis.ov).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

import tfviz.analysis as analysis
from tfviz import plots
from tfviz.ui import compute
from tfviz.ui.i18n import t
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, plot_words


def basis_change(view: View, layer: int, head: int, key: str = "parts_free") -> None:
    """A change of basis A inside one head's value space, picked by the student: W_v and W_o
    before and after, how far W_o moved, and the outputs' largest difference (learned W_o: float
    rounding; identity: A is not undone). key: the widgets' and charts' key prefix."""
    st.markdown(f"**{md_escape(t('parts.freedom.basis_title'))}**")
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    kind = left.segmented_control(
        t("parts.freedom.kind"),
        analysis.BASIS_KINDS,
        default="random",
        required=True,
        key=f"{key}_kind",
        format_func=lambda k: t(f"parts.freedom.kind.{k}"),
    )
    seed = int(right.number_input(t("parts.freedom.seed"), 0, 9999, 0, key=f"{key}_seed"))
    change = compute.cached_basis_change(view, layer, head, kind, seed)
    diff = compute.cached_basis_outputs(view, layer, head, kind, seed)
    names = (t("parts.freedom.before"), t("parts.freedom.after"))
    W_V0, _ = analysis.value_block(view.model, layer, change.kv_head)
    W_V1, _ = analysis.value_block(change.model, layer, change.kv_head)
    W_O0 = analysis.output_block(view.model, layer, head)
    W_O1 = analysis.output_block(change.model, layer, head)
    for what, pair in (("w_v", (W_V0.T, W_V1.T)), ("w_o", (W_O0, W_O1))):
        title = t(f"parts.freedom.{what}_chart", layer=layer, head=head, kv=change.kv_head)
        chart(plots.weight_pair(*pair, names, title, words=plot_words()), f"{key}_{what}")
    with st.container(horizontal=True):
        st.metric(t("parts.freedom.w_o_moved"), f"{change.w_o_relative:.0%}")
        st.metric(t("parts.freedom.out_learned"), f"{diff['learned']:.1e}")
        st.metric(t("parts.freedom.out_identity"), f"{diff['identity']:.1e}")
    st.markdown(
        md_escape(
            t(
                "parts.freedom.verdict",
                diff=f"{diff['learned']:.1e}",
                moved=f"{change.w_o_relative:.0%}",
                identity=f"{diff['identity']:.1e}",
                cond=f"{change.condition:.2f}",
            )
        )
    )


def write_spaces(view: View, layer: int, key: str = "parts_free") -> float:
    """The smallest angle between every two heads' write spaces in one layer, learned W_o beside
    identity; returns the learned W_o's smallest (degrees). key: the charts' key prefix."""
    st.markdown(f"**{md_escape(t('parts.freedom.spaces_title', layer=layer))}**")
    digest = view.entry.digest
    learned = compute.cached_write_spaces(digest, "learned", _model=view.model)
    identity = compute.cached_write_spaces(digest, "identity", _model=view.model)
    cols = st.columns(2)
    for col, (mode, spaces) in zip(
        cols, (("learned", learned), ("identity", identity)), strict=True
    ):
        with col:
            title = t(f"parts.freedom.spaces_{mode}", layer=layer)
            figure = plots.angle_map(spaces.smallest[layer], title, words=plot_words())
            chart(figure, key=f"{key}_angles_{mode}")
    H = view.meta.config.n_heads
    off = ~np.eye(H, dtype=bool)
    low = float(np.nanmin(learned.smallest[layer][off])) if H > 1 else 90.0
    st.caption(t("parts.freedom.spaces_caption", low=f"{low:.1f}"))
    return low
