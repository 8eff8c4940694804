"""Take W_o apart, 2: head permutation. Shuffling the heads in concat changes the output, unless
W_o's column blocks are shuffled alike."""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz.core import dissect
from tfviz.core.interventions import NONE
from tfviz.ui import state
from tfviz.ui.compute import trace_for
from tfviz.ui.i18n import t
from tfviz.ui.text import md_escape, prediction_table
from tfviz.ui.view import View
from tfviz.ui.widgets import index_picker


def shuffle_order(key: str, n_heads: int) -> None:
    order = dissect.shuffled_order(n_heads, np.random.default_rng())
    state.set_widget(key, ",".join(str(h) for h in order))


def permutation_section(view: View) -> None:
    st.caption(t("parts.perm.intro"))
    H = view.meta.config.n_heads
    layer = index_picker(t("parts.layer"), view.meta.config.n_layers, "parts_perm_layer", "L")
    example = dissect.example_order(H)
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    typed = left.text_input(
        t("parts.perm.order", last=H - 1),
        value=example,
        key="parts_order",  # no max_chars: a browser drops a longer paste without a word
        help=t("parts.perm.order_help", last=H - 1, example=example),
    )
    right.button(
        t("parts.perm.shuffle"),
        key="parts_shuffle",
        on_click=shuffle_order,
        args=("parts_order", H),
    )
    try:
        order = dissect.parse_order(typed, H)
    except ValueError:
        st.error(md_escape(t("parts.perm.bad_order", last=H - 1, example=example)))
        return
    if order == tuple(range(H)):
        st.info(t("parts.perm.unmoved"))
    text = view.text
    base = trace_for(view, text, NONE)
    shuffled = trace_for(view, text, dissect.permuted(layer, order, False))
    matched = trace_for(view, text, dissect.permuted(layer, order, True))
    check = dissect.permutation_check(base, shuffled, matched)
    with st.container(horizontal=True):
        st.metric(t("parts.perm.shuffled", layer=layer), f"{check.shuffled_attn_out:.2e}")
        st.metric(t("parts.perm.matched", layer=layer), f"{check.matched_attn_out:.2e}")
        st.metric(t("parts.perm.shuffled_out"), f"{check.shuffled_output:.2e}")
        st.metric(t("parts.perm.matched_out"), f"{check.matched_output:.2e}")
    if view.kind.has_answers:
        st.code(
            prediction_table(
                [
                    (t("parts.row.answer"), base.answer),
                    (t("parts.row.learned"), base.prediction),
                    (t("parts.row.shuffled"), shuffled.prediction),
                    (t("parts.row.matched"), matched.prediction),
                ],
                base.answer,
                marked_row=2,
            ),
            language=None,
        )
    verdict = "parts.perm.identical" if check.identical else "parts.perm.not_identical"
    st.markdown(md_escape(t(verdict, gap=f"{max(check.matched_output, 0.0):.1e}")))
    st.caption(t("parts.perm.why"))
