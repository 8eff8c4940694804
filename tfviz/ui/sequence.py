"""Above every view: the sequence box with its example buttons, and the model's prediction.

For the pretrained sentence encoder: two sentence boxes (A is the one traced), the word-pieces the
model reads, and the cosine similarity of A and B with the learned model and under the switches.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import get_task
from tfviz.tasks import Task
from tfviz.ui.common import View, describe, md_escape, similarity_for
from tfviz.ui.text import changed_tokens, prediction_table

MAX_TYPED = 256  # the text box refuses more; the task's own limit is checked with a message
# A sentence box takes far more than the model reads (128 word-pieces), so a long text is run
# cut, with a note saying where, rather than silently clipped by the box.
MAX_TYPED_SENTENCE = 20_000
SPECIALS_HELP = (
    "[CLS] and [SEP] are not typed: the model frames every text with them ([CLS] first, [SEP] "
    "last) and attends to them like any word-piece; '##' marks a piece that continues a word."
)


def set_sequence(text: str) -> None:
    st.session_state["sequence"] = text


def set_random_sequence(task_name: str) -> None:
    st.session_state["sequence"] = get_task(task_name).random_example(np.random.default_rng())


def set_pair(text_a: str, text_b: str) -> None:
    st.session_state["sequence"] = text_a
    st.session_state["sentence_b"] = text_b


def sequence_input(task: Task) -> tuple[str | None, str | None]:
    """The text box(es) and example buttons: (sequence, sentence B), each None if refused.

    A toy task has one box, so its second value is always None.
    """
    if task.kind == "sentence":
        return sentence_inputs(task)
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
    return checked(task, text), None


def checked(task: Task, text: str, what: str = "") -> str | None:
    """text if the task accepts it, else None after an error saying why."""
    try:
        return task.validate(text)
    except ValueError as e:
        st.error(md_escape(f"{what}{e}"))
        return None


def sentence_inputs(task: Task) -> tuple[str | None, str | None]:
    """Sentence A (traced by every view) and sentence B (compared with A), with example pairs."""
    help_text = (
        f"Any text; the model reads its first {task.max_pieces - 2} word-pieces (lower-case "
        "English pieces) and says where it cut a longer one."
    )
    left, right = st.columns(2)
    a = left.text_input(
        "Sentence A (traced)",
        value=task.examples[0],
        key="sequence",
        max_chars=MAX_TYPED_SENTENCE,
        help=help_text + " Every view shows what happens inside the model on this one.",
    )
    b = right.text_input(
        "Sentence B (compared with A)",
        value=task.examples[1],
        key="sentence_b",
        max_chars=MAX_TYPED_SENTENCE,
        help=help_text,
    )
    with st.container(horizontal=True):
        for i, (label, pair) in enumerate(task.pairs.items()):
            st.button(label, key=f"example_{i}", on_click=set_pair, args=pair)
    with left:
        text_a = checked(task, a, "Sentence A: ")
    with right:
        text_b = checked(task, b, "Sentence B: ")
    return text_a, text_b


def show_prediction(view: View) -> None:
    """Input, right answer and the model's answer (learned and switched if a switch is on)."""
    if view.is_sentence:
        show_sentences(view)
        return
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


def show_sentences(view: View) -> None:
    """Sentence A's word-pieces, what was cut or unknown, and the similarity of A and B."""
    task = view.task
    pieces = task.pieces(view.text)
    with st.container(key="pieces"):  # a stable hook for browser tests
        st.code(" ".join(pieces.pieces), language=None, wrap_lines=True)
    st.caption(
        md_escape(f"Sentence A as the model reads it: {len(pieces.ids)} word-pieces. ")
        + md_escape(SPECIALS_HELP)
    )
    notes = [("A", pieces)]
    if view.text_b is not None:
        notes.append(("B", task.pieces(view.text_b)))
    for name, p in notes:
        for note in p.notes:
            # A cut changes what is measured, so it is a warning; the rest is information.
            show = st.warning if note is p.notes[0] and p.truncated else st.info
            show(md_escape(f"Sentence {name}: {note}"))
    show_similarity(view, key="similarity")


def show_similarity(view: View, key: str) -> None:
    """The cosine similarity of A and B (learned, and switched with its change), and how far the
    switch moved each sentence's embedding. key: the container's, unique on the page."""
    sim = similarity_for(view)
    if sim is None:
        return  # sentence B is refused: its box says why
    help_text = (
        "Cosine of the two sentence embeddings (mean of the last layer over the word-pieces, "
        "normalised): near 1 = same meaning to the model, near 0 = unrelated."
    )
    with st.container(key=key, horizontal=True):
        if view.interventions.is_default:
            st.metric("Similarity of A and B", f"{sim.learned:.3f}", help=help_text)
            return
        st.metric("Similarity, learned W_o", f"{sim.learned:.3f}", help=help_text)
        st.metric(
            "Similarity, switched",
            f"{sim.switched:.3f}",
            delta=f"{sim.switched - sim.learned:+.3f}",
            delta_color="off",
            help=help_text + " The change is against the learned model.",
        )
        for name, moved in zip("AB", sim.moved, strict=True):
            st.metric(
                f"Embedding of {name}: cosine to learned",
                f"{moved:.3f}",
                help="How far the switch moved the sentence's own embedding: 1 = not at all, "
                "0 = to an unrelated direction.",
            )
    st.caption(md_escape(f"Switched: {describe(view.interventions)}."))
