"""Above every view: the sequence box with its example buttons, and the model's prediction.

For the pretrained sentence encoder: two sentence boxes (A is the one traced), the word-pieces the
model reads, and the cosine similarity of A and B with the learned model and under the switches.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import get_task
from tfviz.core.tasks import Task
from tfviz.hf import pretrained
from tfviz.ui import masked, next_token, state
from tfviz.ui.i18n import t, why
from tfviz.ui.labels import describe
from tfviz.ui.text import changed_tokens, cut, md_escape, prediction_table
from tfviz.ui.view import View, similarity_for

# The longest sentence a box takes and a link carries (tfviz.ui.share): one limit, so that every
# view can be linked. Far more than the model reads (128 word-pieces), so a long text is run cut,
# with a note saying where; and a link with two such sentences, in any script, still opens (two
# of 5,000 four-byte characters, percent-encoded, make 120 KB; Streamlit's server answers 400
# to an address above about 125 KB).
MAX_SENTENCE_CHARS = 5_000
# No box sets Streamlit's max_chars: the browser then drops a longer paste without a word and the
# box keeps its old text. A long text reaches the script and is refused with a message instead
# (a toy task's by task.validate, which names the task's lengths; a sentence's by checked).
# The example pairs of the sentence task (tfviz.hf.pretrained.SentenceTask.pairs) by catalogue key.
PAIR_LABELS = {
    "paraphrase pair": "minilm.pair.paraphrase",
    "unrelated pair": "minilm.pair.unrelated",
}


def set_sequence(text: str) -> None:
    state.SEQUENCE.set(text)


def set_random_sequence(task_name: str) -> None:
    state.SEQUENCE.set(get_task(task_name).random_example(np.random.default_rng()))


def set_pair(text_a: str, text_b: str) -> None:
    state.SEQUENCE.set(text_a)
    state.SENTENCE_B.set(text_b)


def sequence_input(task: Task) -> tuple[str | None, str | None]:
    """The text box(es) and example buttons: (sequence, sentence B), each None if refused.

    A toy task has one box, so its second value is always None.
    """
    if getattr(task, "causal", False):
        return decoder_input(task), None
    if task.kind == "sentence":
        return sentence_inputs(task)
    text = st.text_input(
        t("sequence.label"),
        value=task.examples[0],
        key=state.SEQUENCE.name,
        help=t("sequence.help", min_len=task.min_len, max_len=task.max_len, alphabet=task.alphabet),
    )
    with st.container(horizontal=True):
        for i, example in enumerate(task.examples):
            st.button(
                md_escape(example), key=f"example_{i}", on_click=set_sequence, args=(example,)
            )
        st.button(
            t("sequence.random"),
            key="random_example",
            on_click=set_random_sequence,
            args=(task.name,),
        )
    return checked(task, text), None


def checked(task: Task, text: str, box: str | None = None) -> str | None:
    """text if the task accepts it, else None after an error saying why; box: "A" or "B", the
    sentence box it came from, named in the error."""
    if box is not None and len(text) > MAX_SENTENCE_CHARS:
        reason = t("minilm.too_long", n=f"{len(text):,}", limit=f"{MAX_SENTENCE_CHARS:,}")
        st.error(md_escape(t("minilm.refused", name=box, why=reason)))
        return None
    try:
        return task.validate(text)
    except ValueError as e:
        said = why(e)
        st.error(said if box is None else t("minilm.refused", name=md_escape(box), why=said))
        return None


def decoder_input(task: Task) -> str | None:
    """A decoder's one text (read left to right: no sentence B)."""
    text = st.text_input(
        t("next.box"),
        value=task.examples[0],
        key=state.SEQUENCE.name,
        help=t("next.box_help", n=task.max_pieces - len(task.tokenizer.before)),
    )
    return checked(task, text)


def sentence_inputs(task: Task) -> tuple[str | None, str | None]:
    """Sentence A (traced by every view) and sentence B (compared with A), with example pairs."""
    # MiniLM's words name its vocabulary; another model's (tfviz.ui.folders) say only its limit.
    minilm = bool(task.tokenizer.vocabulary)
    help_text = t("minilm.box_help" if minilm else "folder.box_help", n=task.max_pieces - 2)
    help_text += " " + t("minilm.box_limit", limit=f"{MAX_SENTENCE_CHARS:,}")
    left, right = st.columns(2)
    a = left.text_input(
        t("minilm.sentence_a"),
        value=task.examples[0],
        key=state.SEQUENCE.name,
        help=help_text + " " + t("minilm.box_help_a"),
    )
    b = right.text_input(
        t("minilm.sentence_b"),
        value=task.examples[1],
        key=state.SENTENCE_B.name,
        help=help_text,
    )
    with st.container(horizontal=True):
        for i, (label, pair) in enumerate(task.pairs.items()):
            st.button(t(PAIR_LABELS[label]), key=f"example_{i}", on_click=set_pair, args=pair)
    with left:
        text_a = checked(task, a, "A")
    with right:
        text_b = checked(task, b, "B")
    return text_a, text_b


def show_prediction(view: View) -> None:
    """Input, right answer and the model's answer (learned and switched if a switch is on)."""
    if view.is_decoder:
        next_token.show(view)
        return
    if view.is_sentence:
        show_sentences(view)
        return
    trace, base, task = view.trace, view.base, view.task
    inputs = list(view.text) if task.kind == "token" else [view.text]
    rows = [(t("sequence.row.input"), inputs), (t("sequence.row.answer"), trace.answer)]
    if not view.interventions.is_default:
        rows.append((t("sequence.row.learned"), base.prediction))
        rows.append((t("sequence.row.switched"), trace.prediction))
    else:
        rows.append((t("sequence.row.model"), trace.prediction))
    with st.container(key="prediction"):  # a stable hook for browser tests
        st.code(prediction_table(rows, trace.answer), language=None)
    wrong = changed_tokens(trace.prediction, trace.answer)
    note = t("sequence.wrong", n=len(wrong), total=len(trace.answer))
    if not view.interventions.is_default:
        note += " " + t("sequence.switched", what=describe(view.interventions))
    st.caption(md_escape(note))


def show_sentences(view: View) -> None:
    """Sentence A's word-pieces, what was cut or unknown, and the similarity of A and B."""
    task = view.task
    pieces = task.pieces(view.text)
    with st.container(key="pieces"):  # a stable hook for browser tests
        st.code(" ".join(pieces.pieces), language=None, wrap_lines=True)
    sp = task.tokenizer.specials
    specials = (
        t("minilm.specials")
        if task.tokenizer.vocabulary
        else t("folder.specials", cls=sp.cls, sep=sp.sep)
    )
    st.caption(md_escape(t("minilm.pieces", n=len(pieces.ids)) + " " + specials))
    texts = [("A", pieces)]
    if view.text_b is not None:
        texts.append(("B", task.pieces(view.text_b)))
    for name, p in texts:
        if p.truncated:  # a cut changes what is measured: a warning; the rest is information
            st.warning(md_escape(cut_note(name, p)))
        for note in other_notes(task, name, p):
            st.info(md_escape(note))
    show_similarity(view, key="similarity")
    masked.show(view)  # a model with a masked-LM head: the top words for its mask, if typed


def cut_note(name: str, p: pretrained.Pieces) -> str:
    """Where a text too long for the model was cut, and the start of what was not read."""
    room = len(p.ids) - 2  # the word-pieces read, between [CLS] and [SEP]
    rest = " ".join(p.text[p.cut_at :].split())  # what was not read, spaces collapsed
    return t(
        "minilm.cut",
        name=name,
        room=room,
        piece=p.pieces[-2],
        at=p.cut_at,
        length=len(p.text),
        rest=cut(rest, 40),
    )


def other_notes(task: pretrained.SentenceTask, name: str, p: pretrained.Pieces) -> list[str]:
    """The notes on a text besides a cut: pieces the vocabulary lacks, special names typed.

    Built here from the Pieces' fields, in the student's language (Pieces.notes says the same
    in English for library users).
    """
    notes = []
    if p.n_unknown:
        unk = task.tokenizer.unk_id
        stretches = dict.fromkeys(  # each unknown stretch of text once, in order
            p.text[a:b] for i, (a, b) in zip(p.ids, p.spans, strict=True) if i == unk
        )
        what = cut(" ".join(stretches), 40)
        key = "minilm.unknown" if task.tokenizer.vocabulary else "folder.unknown"
        unk = task.tokenizer.specials.unk
        values = dict(name=name, n=p.n_unknown, total=len(p.ids) - 2, what=what, unk=unk)
        notes.append(t(key, **values))
    # The model's own special names (RoBERTa's "<s>"), but not its mask marker where typing it
    # asks the masked-LM head for the word (tfviz.ui.masked).
    names = [n for n in task.tokenizer.specials.names if n != getattr(task, "mask", None)]
    typed = [special for special in names if special.upper() in p.text.upper()]
    if typed:
        notes.append(t("minilm.typed_special", name=name, names=", ".join(typed)))
    return notes


def show_similarity(view: View, key: str) -> None:
    """The cosine similarity of A and B (learned, and switched with its change), and how far the
    switch moved each sentence's embedding. key: the container's, unique on the page."""
    sim = similarity_for(view)
    if sim is None:
        return  # sentence B is refused: its box says why
    help_text = t("minilm.similarity_help")
    with st.container(key=key, horizontal=True):
        if view.interventions.is_default:
            st.metric(t("minilm.similarity"), f"{sim.learned:.3f}", help=help_text)
            return
        st.metric(t("minilm.similarity_learned"), f"{sim.learned:.3f}", help=help_text)
        st.metric(
            t("minilm.similarity_switched"),
            f"{sim.switched:.3f}",
            delta=f"{sim.switched - sim.learned:+.3f}",
            delta_color="off",
            help=help_text + " " + t("minilm.similarity_change_help"),
        )
        for name, moved in zip("AB", sim.moved, strict=True):
            st.metric(
                t("minilm.moved", name=name),
                f"{moved:.3f}",
                help=t("minilm.moved_help"),
            )
    st.caption(md_escape(t("sequence.switched", what=describe(view.interventions))))
