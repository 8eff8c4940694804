"""The kinds of model the app shows, one adapter each: a toy task, a sentence encoder (two
sentences, their similarity), a masked LM (an encoder that also fills in a masked word) and a
decoder (one text, its next tokens).

What differs between them is owned here, once: the sequence box(es) and what is shown of the
tokens, the answer line above every view, the metric a switch is measured by (the toy task's
accuracy, the similarity of sentences A and B, next-token agreement) and its words, whether the
model has right answers, its attention's colour scale, the second input the "two inputs" part
starts from. kind_of decides a model's kind; the View carries it (view.kind), and the views ask
it rather than test which kind they hold (tests/ui/test_seam_kinds.py counts the modules that test).

To add a kind: subclass Kind, override what differs, and have kind_of return it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import streamlit as st

from tfviz import get_task, hf, plots
from tfviz.core.interventions import NONE, Interventions
from tfviz.core.metrics import metric
from tfviz.core.tasks import Task
from tfviz.hf import pretrained
from tfviz.hf.pretrained import PARAPHRASE_PAIR
from tfviz.ui import masked, next_token, state
from tfviz.ui.compute import (
    ACCURACY_N,
    accuracy_for,
    next_token_agreement,
    similarity,
    similarity_for,
)
from tfviz.ui.i18n import t, why
from tfviz.ui.labels import describe, metric_delta, metric_name
from tfviz.ui.text import changed_tokens, cut, md_escape, prediction_table
from tfviz.ui.view import View

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
# The question every student answers about the same numbers (Take W_o apart, 5): a drop of the
# task's accuracy by more than this on the fixed examples, or of the paraphrase pair's similarity.
ACCURACY_DROP = 0.10
SIMILARITY_DROP = 0.10
SINK_SHARE = 0.3  # a first token taking this much of the attention on average is named

# A measure of the model under switches, and its name: what Take W_o apart sweeps.
Measure = tuple[Callable[[Interventions], float], str]


def set_sequence(text: str) -> None:
    state.SEQUENCE.set(text)


def set_random_sequence(task_name: str) -> None:
    state.SEQUENCE.set(get_task(task_name).random_example(np.random.default_rng()))


def set_pair(text_a: str, text_b: str) -> None:
    state.SEQUENCE.set(text_a)
    state.SENTENCE_B.set(text_b)


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


class Kind:
    """What a kind of model shows differently; each kind overrides what is its own."""

    has_answers = False  # right answers to set the model's beside (a toy task's)
    pretrained = True  # a pretrained text model: word-pieces, no task loss (the sidebar's facts)
    next_tokens = False  # reads left to right and guesses next tokens (the induction heads)
    measures_heads = False  # head importance and ablation can be measured (Analysis)
    # The metric is measured on fixed examples, the same for every session, so worth measuring
    # ahead; a typed text's is replaced by the next keystroke.
    shared_metric = False
    heat_scale = plots.FIXED  # the colour scale attention opens with (tfviz.ui.heads)
    importance_caption = "analysis.importance.caption"  # what the head scores were measured on
    folder_what = ""  # a model folder's task in the sidebar: folder.task_<it>, folder.kind_<it>

    def sequence_input(self, task: Task) -> tuple[str | None, str | None]:
        """The text box(es) and example buttons: (sequence, sentence B), each None if refused;
        one box gives None as sentence B."""
        raise NotImplementedError

    def show_prediction(self, view: View) -> None:
        """The answer line above every view: input and the model's answer, learned and switched."""
        raise NotImplementedError

    def compare_switched(self, view: View) -> None:
        """W_o off: compare: what the switches did to the model's answer (a switch is on)."""
        raise NotImplementedError

    def attention_notes(self, view: View) -> None:
        """What the attention squares hold that comes from the model (nothing, for a toy)."""

    def measure(self, view: View) -> Measure | None:
        """(measure(iv) -> float, its name); None after a message if there is nothing to measure
        (a sentence model whose sentences are refused)."""
        raise NotImplementedError

    def second_text(self, text: str, task: Task) -> str:
        """The second input the "two inputs" part starts with: empty, for the student to type."""
        return ""

    def show_override(self, view: View, text: str, base, overridden) -> None:
        """What a head's attention overridden did to the model's output (Take W_o apart, 3)."""
        raise NotImplementedError

    def question(self, view: View, mode: str) -> str:
        """Take W_o apart, 5: the question asked about W_o mode mode (its name)."""
        raise NotImplementedError

    def outcome(self, view: View, iv: Interventions) -> tuple[bool, str]:
        """Take W_o apart, 5: whether the measure fell under switches iv, and the numbers said."""
        raise NotImplementedError

    def analysis_inputs(self, view: View) -> dict:
        """The keywords that run an analysis on the typed text ({}: the task's fresh examples)."""
        return {}


class ToyKind(Kind):
    """A toy task: one box of the task's alphabet, right answers, the task's metric."""

    has_answers = True
    pretrained = False
    measures_heads = True
    shared_metric = True

    def sequence_input(self, task: Task) -> tuple[str | None, str | None]:
        text = st.text_input(
            t("sequence.label"),
            value=task.examples[0],
            key=state.SEQUENCE.name,
            help=t(
                "sequence.help", min_len=task.min_len, max_len=task.max_len, alphabet=task.alphabet
            ),
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

    def show_prediction(self, view: View) -> None:
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

    def compare_switched(self, view: View) -> None:
        """The answers and the task metric on random examples, learned beside switched."""
        iv, base, sw = view.interventions, view.base, view.trace
        st.caption(md_escape(t("w_o_off.which_is_which", switched=describe(iv))))
        left, right = st.columns(2)
        acc_base = accuracy_for(view, NONE)
        acc_sw = accuracy_for(view, iv)
        key = view.task.metric
        change = metric_delta(key, acc_sw[key] - acc_base[key])
        for col, name, trace, acc, delta in (
            (left, t("w_o_off.learned"), base, acc_base, None),
            (right, t("w_o_off.switched"), sw, acc_sw, change),
        ):
            with col:
                st.markdown(f"**{md_escape(name)}**")
                rows = [(t("w_o_off.row_answer"), trace.answer)]
                rows.append((t("w_o_off.row_model"), trace.prediction))
                st.code(prediction_table(rows, trace.answer), language=None)
                st.metric(
                    t("w_o_off.metric", what=metric_name(key), n=ACCURACY_N),
                    metric(key).format(acc[key]),
                    delta=delta,
                    delta_color="normal" if metric(key).higher_is_better else "inverse",
                )
        changed = changed_tokens(base.prediction, sw.prediction)
        where = ", ".join(str(i + 1) for i in changed)
        st.caption(
            t("w_o_off.changed_at", n=len(changed), total=len(base.prediction), where=where)
            if changed
            else t("w_o_off.changed_none", total=len(base.prediction))
        )

    def measure(self, view: View) -> Measure | None:
        key = view.task.metric

        def accuracy(iv: Interventions) -> float:
            return accuracy_for(view, iv)[key]

        return accuracy, metric_name(key)

    def second_text(self, text: str, task: Task) -> str:
        """text with its middle character replaced by the next one of the alphabet."""
        alphabet = task.alphabet
        if not text or not alphabet:
            return text
        i = len(text) // 2
        j = alphabet.find(text[i])
        return text[:i] + alphabet[(j + 1) % len(alphabet)] + text[i + 1 :]

    def show_override(self, view: View, text: str, base, overridden) -> None:
        rows = [(t("parts.row.answer"), base.answer), (t("parts.row.learned"), base.prediction)]
        rows.append((t("parts.row.overridden"), overridden.prediction))
        st.code(prediction_table(rows, base.answer), language=None)
        changed = changed_tokens(base.prediction, overridden.prediction)
        st.caption(t("parts.pattern.changed", n=len(changed), total=len(base.prediction)))

    def question(self, view: View, mode: str) -> str:
        if view.task.metric == "mae":
            return t("parts.predict.q_error", mode=mode)
        what = metric_name(view.task.metric)
        return t("parts.predict.q_toy", mode=mode, what=what, drop=f"{100 * ACCURACY_DROP:.0f}")

    def outcome(self, view: View, iv: Interventions) -> tuple[bool, str]:
        key = view.task.metric
        before, after = accuracy_for(view, NONE)[key], accuracy_for(view, iv)[key]
        # An error (MAE) has no fixed scale: its question asks whether it at least doubles.
        fell = after >= 2 * before if key == "mae" else before - after > ACCURACY_DROP
        shown = t(
            "parts.predict.toy_result",
            what=metric_name(key),
            before=f"{before:.3g}",
            after=f"{after:.3g}",
        )
        return fell, shown


class EncoderKind(Kind):
    """A sentence encoder (MiniLM, a BERT-family folder): sentences A and B, their similarity."""

    folder_what = "sentence"

    def sequence_input(self, task: Task) -> tuple[str | None, str | None]:
        """Sentence A (traced by every view) and sentence B (compared with A), with example
        pairs."""
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

    def show_prediction(self, view: View) -> None:
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

    def compare_switched(self, view: View) -> None:
        st.markdown(f"**{md_escape(t('w_o_off.sentences'))}**")
        show_similarity(view, key="similarity_compare")
        st.caption(t("w_o_off.sentences_caption"))

    def attention_notes(self, view: View) -> None:
        """The model's own frame: [CLS] ... [SEP], or RoBERTa's <s> ... </s>."""
        sp = view.task.tokenizer.specials
        st.caption(md_escape(t("attention.pieces", cls=sp.cls, sep=sp.sep)))

    def measure(self, view: View) -> Measure | None:
        if view.text is None or view.text_b is None:
            st.info(t("parts.need_sentences"))
            return None

        def switched_similarity(iv: Interventions) -> float:
            return similarity(view, view.text, view.text_b, iv).switched

        return switched_similarity, t("parts.modes.similarity")

    def show_override(self, view: View, text: str, base, overridden) -> None:
        if view.text_b is None:
            return
        sim = similarity(view, text, view.text_b, overridden.interventions)
        with st.container(horizontal=True):
            st.metric(t("parts.pattern.sim_learned"), f"{sim.learned:.3f}")
            st.metric(
                t("parts.pattern.sim_overridden"),
                f"{sim.switched:.3f}",
                delta=f"{sim.switched - sim.learned:+.3f}",
                delta_color="off",
            )

    def question(self, view: View, mode: str) -> str:
        return t("parts.predict.q_sentence", mode=mode, drop=f"{SIMILARITY_DROP:.2f}")

    def outcome(self, view: View, iv: Interventions) -> tuple[bool, str]:
        a, b = PARAPHRASE_PAIR
        sim = similarity(view, a, b, iv)
        before, after = sim.learned, sim.switched
        shown = t("parts.predict.sim_result", before=f"{before:.3f}", after=f"{after:.3f}")
        return before - after > SIMILARITY_DROP, shown


class MaskedKind(EncoderKind):
    """A sentence encoder with a masked-LM head: it also fills in sentence A's masked word."""

    folder_what = "masked"

    def show_prediction(self, view: View) -> None:
        super().show_prediction(view)
        masked.show(view)  # the top words for its mask, if typed


class DecoderKind(Kind):
    """A decoder: one text read left to right, its next tokens, next-token agreement."""

    folder_what = "next"
    next_tokens = True
    measures_heads = True
    heat_scale = plots.LOG  # its first token takes most of every row (an attention sink)
    importance_caption = "analysis.importance.caption_text"

    def sequence_input(self, task: Task) -> tuple[str | None, str | None]:
        text = st.text_input(
            t("next.box"),
            value=task.examples[0],
            key=state.SEQUENCE.name,
            help=t("next.box_help", n=task.max_pieces - len(task.tokenizer.before)),
        )
        return checked(task, text), None

    def show_prediction(self, view: View) -> None:
        next_token.show(view)

    def compare_switched(self, view: View) -> None:
        st.markdown(f"**{md_escape(t('w_o_off.next_tokens'))}**")
        with st.container(key="next_compare"):
            st.code(next_token.next_table(view), language=None)
        agree = hf.agreement(view.base.top_ids, view.trace.top_ids)
        st.caption(md_escape(t("w_o_off.next_caption", agree=f"{agree:.0%}")))

    def attention_notes(self, view: View) -> None:
        """The causal mask, which query heads share a key/value head, and the first token's
        share of the attention."""
        st.caption(md_escape(t("attention.causal")))
        cfg = view.meta.config
        if cfg.n_kv_heads and cfg.n_kv_heads < cfg.n_heads:
            size = cfg.n_heads // cfg.kv_heads
            groups = ", ".join(
                f"H{g * size}–H{g * size + size - 1}" if size > 1 else f"H{g}"
                for g in range(cfg.kv_heads)
            )
            st.caption(md_escape(t("attention.kv_groups", groups=groups)))
        attn = view.trace.attn
        if attn.shape[-1] > 2:
            # Queries after the first two: the first always reads only itself, the second half
            # of its row at least.
            share = float(attn[..., 2:, 0].mean())
            if share >= SINK_SHARE:
                st.caption(md_escape(t("attention.sink", share=f"{share:.0%}")))

    def measure(self, view: View) -> Measure | None:
        if view.text is None:
            st.info(t("parts.need_sentences"))
            return None
        return functools.partial(next_token_agreement, view, view.text), t("next.agreement")

    def show_override(self, view: View, text: str, base, overridden) -> None:
        agree = hf.agreement(base.top_ids, overridden.top_ids)
        st.metric(t("parts.pattern.agreement"), f"{agree:.0%}", help=t("next.agreement_help"))

    def question(self, view: View, mode: str) -> str:
        return t(
            "parts.predict.q_decoder", mode=mode, drop=f"{100 * SIMILARITY_DROP:.0f}",
            text=view.task.examples[0],
        )  # fmt: skip

    def outcome(self, view: View, iv: Interventions) -> tuple[bool, str]:
        # The same text for the whole class: the question is asked once per model and mode.
        after = next_token_agreement(view, view.task.examples[0], iv)
        shown = t("parts.predict.decoder_result", agree=f"{after:.0%}")
        return 1.0 - after > SIMILARITY_DROP, shown

    def analysis_inputs(self, view: View) -> dict:
        """A decoder has no fresh examples: its typed text is what it is measured on."""
        return dict(text=view.text, _task=view.task)


TOY, ENCODER, MASKED_LM, DECODER = ToyKind(), EncoderKind(), MaskedKind(), DecoderKind()
KINDS = {"toy": TOY, "encoder": ENCODER, "masked_lm": MASKED_LM, "decoder": DECODER}


def kind_of(task: Task) -> Kind:
    """The kind of the model that reads task, as the task declares it (model_kind: a toy
    Task's "toy", tfviz.hf's text tasks' "encoder", "masked_lm" or "decoder")."""
    return KINDS[task.model_kind]


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
    names = [n for n in task.tokenizer.specials.names if n != task.mask]
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
