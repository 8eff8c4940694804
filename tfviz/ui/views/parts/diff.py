"""Take W_o apart, 4: two inputs. Per head, how attention, concat and W_o's output differ
between two sequences."""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.core.trace import diff_inputs
from tfviz.ui.compute import cached_w_o, trace_for
from tfviz.ui.i18n import t, why
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, index_picker, plot_words


def diff_section(view: View) -> None:
    st.caption(t("parts.diff.intro"))
    text = view.text
    default = view.kind.second_text(text, view.task)  # a toy's: one token changed
    typed = st.text_input(
        t("parts.diff.second"),
        value=default,
        key="parts_seq_b",  # no max_chars: a browser drops a longer paste without a word
        help=t("parts.diff.second_help"),
    )
    if not typed.strip():
        st.info(t("parts.diff.type_b"))
        return
    try:
        text_b = view.task.validate(typed)
    except ValueError as e:
        st.error(t("parts.diff.bad_b", why=why(e)))
        return
    if text_b == text:
        st.error(t("parts.diff.same"))
        return
    a = view.trace
    b = trace_for(view, text_b, view.interventions)
    if len(a.labels) != len(b.labels):
        st.error(t("parts.diff.lengths", a=len(a.labels), b=len(b.labels)))
        return
    W = cached_w_o(view.entry.digest, tuple(a.w_o_modes), view.model)
    try:
        diff = diff_inputs(a, b, W)
    except ValueError as e:  # a pair diff_inputs refuses for a reason not caught above
        st.error(md_escape(str(e)))
        return
    changed = ", ".join(a.labels[i] for i in diff.positions) or "-"
    st.markdown(md_escape(t("parts.diff.where", n=len(diff.positions), tokens=changed)))
    layer = index_picker(t("parts.layer"), a.n_layers, "parts_diff_layer", "L")
    chart(
        plots.attention_diff_grid(
            diff.attn[layer],
            a.labels,
            layer,
            title=t("parts.diff.attn_title", layer=layer),
            words=plot_words(),
        ),
        key="parts_diff_attn",
    )
    left, right = st.columns(2)
    with left:
        chart(
            plots.activation_map(
                diff.concat[layer],
                a.labels,
                n_heads=a.n_heads,
                title=t("parts.diff.concat_title", layer=layer),
                words=plot_words(),
            ),
            key="parts_diff_concat",
        )
    with right:
        chart(
            plots.activation_map(
                diff.attn_out[layer],
                a.labels,
                title=t("parts.diff.out_title", layer=layer),
                words=plot_words(),
            ),
            key="parts_diff_out",
        )
    chart(
        plots.head_change_map(
            diff.head_terms[layer],
            a.labels,
            title=t("parts.diff.terms_title", layer=layer),
            value_title=t("parts.diff.terms_value"),
            words=plot_words(),
        ),
        key="parts_diff_terms",
    )
    st.caption(t("parts.diff.reading"))
