"""Lesson step 7, inside the induction head: for one character of the repeat, the head's query
and keys opened up (the neuron view, tfviz.ui.neuron), then what each layer of the stream would
guess next (the logit lens) and which heads write the next character's logit (direct
contributions), all on the text typed twice, learned W_o (step 8 switches it off).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st

from tfviz.analysis.lens import NEXT
from tfviz.core.interventions import head_name
from tfviz.lessons.decoder import RepeatedSentence
from tfviz.ui import compute
from tfviz.ui.i18n import t
from tfviz.ui.labels import component_label
from tfviz.ui.lens import lens_chart
from tfviz.ui.neuron import neuron_charts
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import drop_stale_index, number_table

QUERY_KEY = "lesson_inside_query"
RANKED = 8  # components in the ranked list of direct contributions


def inside_induction(lm: View, rep: RepeatedSentence, layer: int, head: int) -> None:
    name = head_name(layer, head)
    st.markdown(f"#### {t('lessons.s7.inside_title', head=name)}")
    st.markdown(t("lessons.s7.inside_intro", head=name))
    n, labels = rep.period, rep.trace.labels
    T = len(labels)
    # A character of the repeat whose next one is in the text: the lens splits its logit.
    queries = range(n, T - 1)
    drop_stale_index(QUERY_KEY, T - 1)
    query = st.selectbox(
        t("lessons.s7.query"),
        queries,
        index=min(n // 2, len(queries) - 1),
        format_func=lambda i: labels[i],
        key=QUERY_KEY,
    )
    nv = compute.cached_neuron(lm, rep.trace, layer, head, query, rotated=True)
    neuron_charts(nv, labels, key="lesson_neuron")
    top = int(np.nanargmax(nv.weights))
    copied = query - n + 1  # the character after this one's first occurrence
    said = "lessons.s7.looks_copied" if top == copied else "lessons.s7.looks_elsewhere"
    st.markdown(
        md_escape(
            t(
                said,
                head=name,
                query=labels[query],
                top=labels[top],
                weight=f"{nv.weights[top]:.2f}",
                copied=labels[copied],
            )
        )
    )
    on_text = dataclasses.replace(lm, text=rep.text, trace=rep.trace)
    lens_part(on_text, n, query)
    contributions_part(on_text, query, name)


def lens_part(lm: View, n: int, query: int) -> None:
    """The logit lens over the repeat's characters up to the query: each layer's likeliest next
    character (the last row is the model's own guess)."""
    positions = tuple(range(max(n, query - compute.LENS_MAX_POSITIONS + 1), query + 1))
    lens = compute.cached_lens(lm, positions).learned
    lens_chart(lens, t("lessons.s7.lens_title"), "lesson_lens")  # as the Analysis view's
    st.caption(t("lessons.s7.lens_caption"))


def contributions_part(lm: View, query: int, name: str) -> None:
    """Which components write the logit of the text's next character at the query, ranked, and
    where the induction head comes among them."""
    c = compute.cached_contributions(lm, query, NEXT).learned
    ranked = list(c.ranked)
    rank = [what for what, _ in ranked].index(name) + 1  # a decoder's split names every head
    columns = (t("analysis.lens.component"), t("analysis.lens.contribution"))
    number_table(
        [{columns[0]: component_label(what), columns[1]: value} for what, value in ranked[:RANKED]],
        key="lesson_contrib",
    )
    st.markdown(
        md_escape(
            t(
                "lessons.s7.contrib",
                token=c.target_token,
                position=query,
                head=name,
                value=f"{c.named()[name]:+.2f}",
                rank=rank,
                n=len(ranked),
                logit=f"{c.logit:.2f}",
                gap=f"{abs(c.total - c.logit):.1e}",
            )
        )
    )
