"""Above every view: the sequence box with its example buttons, and the model's prediction."""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import get_task
from tfviz.tasks import Task
from tfviz.ui.common import View, describe, md_escape
from tfviz.ui.text import changed_tokens, prediction_table

MAX_TYPED = 256  # the text box refuses more; the task's own limit is checked with a message


def set_sequence(text: str) -> None:
    st.session_state["sequence"] = text


def set_random_sequence(task_name: str) -> None:
    st.session_state["sequence"] = get_task(task_name).random_example(np.random.default_rng())


def sequence_input(task: Task) -> str | None:
    """The text box and example buttons; the sequence if the task accepts it, else None."""
    text = st.text_input(
        "Sequence",
        value=task.examples[0],
        key="sequence",
        max_chars=MAX_TYPED,
        help=f"{task.min_len} to {task.max_len} characters from: {task.alphabet}",
    )
    with st.container(horizontal=True):
        for i, example in enumerate(task.examples):
            st.button(
                md_escape(example), key=f"example_{i}", on_click=set_sequence, args=(example,)
            )
        st.button(
            "random example",
            key="random_example",
            on_click=set_random_sequence,
            args=(task.name,),
        )
    try:
        return task.validate(text)
    except ValueError as e:
        st.error(md_escape(str(e)))
        return None


def show_prediction(view: View) -> None:
    """Input, right answer and the model's answer (learned and switched if a switch is on)."""
    trace, base, task = view.trace, view.base, view.task
    inputs = list(view.text) if task.kind == "token" else [view.text]
    rows = [("input", inputs), ("right answer", trace.answer)]
    if not view.interventions.is_default:
        rows.append(("learned W_o", base.prediction))
        rows.append(("switched", trace.prediction))
    else:
        rows.append(("model", trace.prediction))
    with st.container(key="prediction"):  # a stable hook for browser tests
        st.code(prediction_table(rows, trace.answer), language=None)
    wrong = changed_tokens(trace.prediction, trace.answer)
    note = f"{len(wrong)} of {len(trace.answer)} answer tokens wrong (marked ^)."
    if not view.interventions.is_default:
        note += f" Switched: {describe(view.interventions)}."
    st.caption(md_escape(note))
