"""Lesson step 4: W_o switched off on the loaded model (tfviz.lessons.switch), then what the toy
atlas and the language atlas answer to "does W_o matter?".
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons
from tfviz.core import modes
from tfviz.core.metrics import compact
from tfviz.ui.i18n import current, t
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import question
from tfviz.ui.views.lessons.experiment import atlas_answer, language_text
from tfviz.ui.views.lessons.freedom import why_freedom

W_O_SWITCHES = {modes.IDENTITY: "lessons.s4.mode.identity", modes.ZERO: "lessons.s4.mode.zero"}


def step_switch(view: View) -> None:
    st.markdown(t("lessons.s4.intro"))
    st.info(t("lessons.s4.look"))
    cfg = view.meta.config
    if view.text is None:
        st.warning(t("lessons.need_sequence"))
    elif not cfg.n_out:
        st.warning(t("lessons.s4.no_head"))
    else:
        lang = current()
        left, right = st.columns(2)
        mode = left.radio(
            t("lessons.s4.mode"),
            list(W_O_SWITCHES),
            format_func=lambda m: t(W_O_SWITCHES[m], lang=lang),
            key="lesson_w_o",
        )
        layer = right.selectbox(
            t("lessons.s4.where"),
            [None, *range(cfg.n_layers)],
            format_func=lambda n: t("lessons.all_layers", lang=lang) if n is None else f"L{n}",
            key="lesson_w_o_layer",
        )
        result = lessons.w_o_switch(view.model, view.task, view.text, mode, layer)
        rows = [
            (t("lessons.s4.row.learned"), result.learned),
            (t("lessons.s4.row.switched"), result.switched),
            (t("lessons.s4.row.answer"), result.answer),
        ]
        rows = [
            {t("lessons.s4.col.what"): what, t("lessons.s4.col.prediction"): said}
            for what, said in rows
        ]
        st.dataframe(rows, hide_index=True, key="lesson_switch_table")
        st.markdown(
            t(
                "lessons.s4.changed",
                tokens=result.tokens_changed,
                change=compact(result.max_change),
            )
        )
    show_experiment(view)
    why_freedom(view)


def show_experiment(view: View) -> None:
    """The atlas's answer (the bundled toy atlas): where W_o matters, where not, and the run that
    tests why; then the same question asked of language models (the language atlas), when its
    rows are there; the step's question is answered from the toy atlas's numbers."""
    answer = atlas_answer()
    if (on_text := language_text()) is not None:
        st.markdown(on_text)
    if answer is not None:
        question("lessons.s4.question", answer)
