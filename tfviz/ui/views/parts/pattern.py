"""Take W_o apart, 3: pattern override. One head's attention replaced by a fixed pattern: the
prediction and the head's term z_h W_o^h before and after."""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.core import wo
from tfviz.core.interventions import COPY_PREFIX, PATTERNS, READS_AHEAD, Interventions
from tfviz.ui.compute import cached_w_o, trace_for
from tfviz.ui.i18n import current, t
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, index_picker, plot_words

COPY = "copy"  # the pattern picker's value for "copy another head's pattern"


def pattern_section(view: View) -> None:
    st.caption(t("parts.pattern.intro"))
    layer, head, pattern = pattern_picked(view.meta.config)
    text = view.text
    base = view.base
    overridden = trace_for(view, text, Interventions(patterns=((layer, head, pattern),)))
    # What the override did to the model's output, as its kind measures it.
    view.kind.show_override(view, text, base, overridden)
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
    W = cached_w_o(view.entry.digest, tuple(base.w_o_modes), view.model)  # (L, D, D)
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
