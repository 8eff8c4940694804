"""What every lesson step draws the same way: the steps and their titles, the step's one question
with its answer folded away, a difference as a number.
"""

from __future__ import annotations

import streamlit as st

from tfviz.ui import state
from tfviz.ui.i18n import t

STEPS = state.LESSON_STEPS
STEP_TITLES = {
    1: "lessons.step1.title",
    2: "lessons.step2.title",
    3: "lessons.step3.title",
    4: "lessons.step4.title",
    5: "lessons.step5.title",
    6: "lessons.step6.title",
    7: "lessons.step7.title",
    8: "lessons.step8.title",
}


def question(q_key: str, answer: str, **values) -> None:
    """The step's one question (its {placeholders} filled from values), and its answer folded
    away."""
    st.markdown(t("lessons.question", question=t(q_key, **values)))
    with st.expander(t("lessons.show_answer")):
        st.markdown(answer)


def difference_text(diff: float) -> str:
    """A difference as shown: a plain 0 when it is exactly zero (not "0.00e+00", which reads as
    a rounded value), else in scientific notation, as rounding-sized differences are."""
    return "0" if diff == 0.0 else f"{diff:.2e}"
