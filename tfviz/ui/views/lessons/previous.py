"""Lesson step 6: the head with the highest previous-token score on tfviz's probe, measured on the
typed line (tfviz.lessons.previous_token_line).
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons
from tfviz.analysis import induction
from tfviz.core.interventions import NONE, head_name
from tfviz.ui import induction as induction_view
from tfviz.ui.compute import trace_for
from tfviz.ui.i18n import t
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import question
from tfviz.ui.views.lessons.decoder import head_map, lesson_lm, lm_intro, score_text, typed_line

# What step 6 says of the model's best previous-token head, by induction.head_verdict.
PREVIOUS_ANSWERS = {
    "formed": "lessons.s6.answer_formed",
    "weak": "lessons.s6.answer_weak",
    "none": "lessons.s6.answer_none",
}


def step_previous(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    learned = induction_view.scores_for(lm, NONE)
    st.markdown(t("lessons.s6.intro", n=learned.n_seqs, period=learned.period))
    layer, head, score = lessons.previous_token_head(learned)
    name = head_name(layer, head)
    st.markdown(t("lessons.s6.found", head=name, score=score_text(score)))
    text = typed_line(lm)
    if text is None:
        return
    trace = trace_for(lm, text, NONE)
    line = lessons.previous_token_line(trace.attn[layer, head])
    even = learned.even("previous_token")
    verdict = induction.head_verdict(score, even)
    answer = t(
        PREVIOUS_ANSWERS[verdict],
        head=name,
        probe=score_text(score),
        line=score_text(line.score),
        hits=line.hits,
        queries=line.queries,
        even=score_text(even),
        k=f"{induction.WEAK_OVER_EVEN:g}",
    )
    question("lessons.s6.question", answer, head=name)
    head_map(trace, layer, head, t("lessons.s5.map_title", head=name), key="lesson_prev_map")
    st.caption(t("lessons.s6.caption"))
