"""Take W_o apart, 3: pattern override. One head's attention replaced by a fixed pattern: the
prediction and the head's term z_h W_o^h before and after."""

from __future__ import annotations

import streamlit as st

from tfviz import hf, plots
from tfviz.core import wo
from tfviz.core.interventions import COPY_PREFIX, PATTERNS, READS_AHEAD, Interventions
from tfviz.ui.i18n import current, t
from tfviz.ui.text import changed_tokens, prediction_table
from tfviz.ui.view import View, cached_w_o, similarity, trace_for
from tfviz.ui.widgets import chart, index_picker, plot_words

COPY = "copy"  # the pattern picker's value for "copy another head's pattern"


def pattern_section(view: View) -> None:
    st.caption(t("parts.pattern.intro"))
    layer, head, pattern = pattern_picked(view.meta.config)
    text = view.text
    base = view.base
    overridden = trace_for(view, text, Interventions(patterns=((layer, head, pattern),)))
    prediction_change(view, text, base, overridden)
    name = f"L{layer} H{head}"
    attention_before_after(base, overridden, layer, head, name)
    term_before_after(view, base, overridden, layer, head, name)
    st.caption(t("parts.pattern.reading"))


def pattern_picked(cfg) -> tuple[int, int, str]:
    """The head and the pattern its attention is replaced by, picked in a row of four: layer,
    head, pattern and, for a copy, the head copied; returns (layer, head, pattern)."""
    lang = current()  # for format_func, which Streamlit may call outside this run
    a, b, c, d = st.columns(4)
    with a:
        layer = index_picker(t("parts.layer"), cfg.n_layers, "parts_pat_layer", "L")
    with b:
        head = index_picker(t("parts.head"), cfg.n_heads, "parts_pat_head", "H")
    # A decoder's query cannot read a later token: no pattern that reads ahead for it.
    offered = [p for p in PATTERNS if not (cfg.causal and p in READS_AHEAD)]
    with c:
        kind = st.selectbox(
            t("parts.pattern.pattern"),
            [*offered, COPY],
            format_func=lambda p: t(f"parts.pattern.{p}", lang=lang),
            key="parts_pattern",
        )
    if kind != COPY:
        return layer, head, kind
    with d:
        source = index_picker(t("parts.pattern.source"), cfg.n_heads, "parts_pat_source", "H")
    if source == head:
        st.info(t("parts.pattern.same_head"))
    return layer, head, f"{COPY_PREFIX}{source}"


def prediction_change(view: View, text: str, base, overridden) -> None:
    """What the override did to the model's output: a decoder's next-token agreement, a
    sentence encoder's similarity of A and B, a toy model's predictions and changed tokens."""
    if view.is_decoder:
        agree = hf.agreement(base.top_ids, overridden.top_ids)
        st.metric(t("parts.pattern.agreement"), f"{agree:.0%}", help=t("next.agreement_help"))
    elif view.is_sentence:
        if view.text_b is not None:
            sim = similarity(view, text, view.text_b, overridden.interventions)
            with st.container(horizontal=True):
                st.metric(t("parts.pattern.sim_learned"), f"{sim.learned:.3f}")
                st.metric(
                    t("parts.pattern.sim_overridden"),
                    f"{sim.switched:.3f}",
                    delta=f"{sim.switched - sim.learned:+.3f}",
                    delta_color="off",
                )
    else:
        st.code(
            prediction_table(
                [
                    (t("parts.row.answer"), base.answer),
                    (t("parts.row.learned"), base.prediction),
                    (t("parts.row.overridden"), overridden.prediction),
                ],
                base.answer,
            ),
            language=None,
        )
        changed = changed_tokens(base.prediction, overridden.prediction)
        st.caption(t("parts.pattern.changed", n=len(changed), total=len(base.prediction)))


def attention_before_after(base, overridden, layer: int, head: int, name: str) -> None:
    """The head's own attention and the pattern it was given, side by side."""
    left, right = st.columns(2)
    with left:
        chart(
            plots.attention_map(
                base.shown(base.attn[layer, head]),
                base.labels,
                title=t("parts.pattern.own", head=name),
                words=plot_words(),
            ),
            key="parts_pattern_own",
        )
    with right:
        chart(
            plots.attention_map(
                overridden.shown(overridden.attn[layer, head]),
                base.labels,
                title=t("parts.pattern.given", head=name),
                words=plot_words(),
            ),
            key="parts_pattern_given",
        )


def term_before_after(view: View, base, overridden, layer: int, head: int, name: str) -> None:
    """The head's term z_h W_o^h in the residual stream, with its own attention and with the
    pattern, side by side."""
    W = cached_w_o(view.entry.digest, tuple(base.w_o_modes), _model=view.model)  # (L, D, D)
    before = wo.head_contributions(base.z[layer], W[layer])[head]  # (T, D)
    after = wo.head_contributions(overridden.z[layer], W[layer])[head]
    left, right = st.columns(2)
    with left:
        chart(
            plots.activation_map(
                before,
                base.labels,
                title=t("parts.pattern.term_before", head=name),
                words=plot_words(),
            ),
            key="parts_term_before",
        )
    with right:
        chart(
            plots.activation_map(
                after,
                base.labels,
                title=t("parts.pattern.term_after", head=name),
                words=plot_words(),
            ),
            key="parts_term_after",
        )
