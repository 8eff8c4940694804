"""Lesson step 7, an induction head on a repeated sentence: a sentence (or the probe's kind of
random letters) typed twice, the best induction head's stripe, and the loss and next-character
accuracy on each copy (tfviz.lessons.repeated_sentence).
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons, plots
from tfviz.analysis import induction
from tfviz.core.interventions import NONE, head_name
from tfviz.ui import compute
from tfviz.ui import induction as induction_view
from tfviz.ui.i18n import current, t, why
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import question
from tfviz.ui.views.lessons.decoder import head_map, lesson_lm, lm_intro, score_text
from tfviz.ui.views.lessons.inside import inside_induction
from tfviz.ui.widgets import chart, plot_words

SENTENCE_EXAMPLE = "The king is dead."
SENTENCE_CHARS = (2, 60)  # one copy of step 7's sentence (typed twice it must fit the context)
REPEAT_SOURCES = {"sentence": "lessons.s7.source.sentence", "letters": "lessons.s7.source.letters"}
# What step 7 says of the model's best induction head, by induction.head_verdict.
INDUCTION_ANSWERS = {
    "formed": "lessons.s7.answer_formed",
    "weak": "lessons.s7.answer_weak",
    "none": "lessons.s7.answer_none",
}


def repeat_source(lm: View) -> str | None:
    """One copy of step 7's text: the student's sentence or the probe's kind of random letters;
    None after an error saying why a sentence is refused."""
    lang = current()
    source = st.radio(
        t("lessons.s7.source"),
        list(REPEAT_SOURCES),
        format_func=lambda k: t(REPEAT_SOURCES[k], lang=lang),
        key="lesson_repeat_source",
        horizontal=True,
    )
    if source == "letters":
        ids = induction_view.probe_token_ids(lm)
        return lessons.random_letters(lm.task.tokenizer, ids)
    low, high = SENTENCE_CHARS
    sentence = st.text_input(
        t("lessons.s7.sentence"),
        value=SENTENCE_EXAMPLE,
        key="lesson_sentence",
        help=t("lessons.s7.sentence_help", low=low, high=high),
    )
    if not low <= len(sentence) <= high:
        st.error(t("lessons.s5.line_length", low=low, high=high, n=len(sentence)))
        return None
    return sentence


def step_induction(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    st.markdown(t("lessons.s7.intro"))
    sentence = repeat_source(lm)
    if sentence is None:
        return
    try:
        rep = compute.cached_repeat(lm.entry.digest, sentence, _model=lm.model, _task=lm.task)
    except ValueError as e:
        st.error(why(e))
        return
    st.markdown(t("lessons.s7.text", n=rep.period))
    st.code(rep.text, language=None, wrap_lines=True)  # typed text: shown inert
    learned = induction_view.scores_for(lm, NONE)
    layer, head, best = learned.best()
    name = head_name(layer, head)
    even = learned.even()
    s = rep.scores
    drop = s.in_context_drop
    parts = [
        t(
            "lessons.s7.answer_losses",
            first=f"{s.loss_first:.2f}",
            repeat=f"{s.loss_repeat:.2f}",
            acc_first=f"{rep.acc_first:.0%}",
            acc_repeat=f"{rep.acc_repeat:.0%}",
        ),
        t("lessons.s7.better" if drop > 0 else "lessons.s7.not_better", drop=f"{drop:.2f}"),
        t(
            INDUCTION_ANSWERS[induction.head_verdict(best, even)],
            head=name,
            score=score_text(best),
            here=score_text(float(s.induction[layer, head])),
            even=score_text(even),
            k=f"{induction.WEAK_OVER_EVEN:g}",
        ),
    ]
    question("lessons.s7.question", "\n\n".join(parts))
    title = t("lessons.s7.map_title", head=name)
    head_map(rep.trace, layer, head, title, key="lesson_induction_map")
    st.caption(t("lessons.s7.map_caption", head=name))
    st.caption(t("induction.stripe_caption", period=rep.period))
    curves = {t("lessons.s7.curve"): s.loss_by_position}
    chart(
        plots.induction_losses(curves, rep.period, t("lessons.s7.loss_title"), words=plot_words()),
        key="lesson_induction_losses",
    )
    st.caption(t("lessons.loss_caption"))
    inside_induction(lm, rep, layer, head)
