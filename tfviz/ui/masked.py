"""Fill in the mask: under the prediction of a model with a masked-LM head (tfviz.hf), the top
words for the masked position of sentence A, with the learned W_o and under the sidebar's
switches, side by side, so a class watches the answer change when W_o is switched off.

The answers are computed by hf.fill_mask, cached per model digest, sentence and switches (a
keystroke elsewhere on the page does not run the head again). Word-pieces come from the model's
vocabulary, which an uploaded folder supplies: they are shown in code blocks, never as markdown.
"""

from __future__ import annotations

import re

import streamlit as st

from tfviz import hf
from tfviz.core.interventions import NONE
from tfviz.core.tasks import InputError
from tfviz.ui import compute, state
from tfviz.ui.i18n import t
from tfviz.ui.labels import describe
from tfviz.ui.text import md_escape
from tfviz.ui.view import View

TOP_K = hf.mlm.TOP_K  # 5 guesses a column
_LAST_WORD = re.compile(r"\w+(?=\W*$)")  # the last word of a sentence, before its punctuation


def mask_last_word(text: str, mask: str) -> str:
    """text with its last word replaced by the mask marker (or the marker added at the end)."""
    found = _LAST_WORD.search(text)
    if found is None:
        return f"{text.rstrip()} {mask}".strip()
    return text[: found.start()] + mask + text[found.end() :]


def put_mask(text: str, mask: str) -> None:
    state.SEQUENCE.set(mask_last_word(text, mask))


def shown_word(guess) -> str:
    """A guess as text (Guess.word: a byte-level piece already readable, half a character as
    "…" or byte markers, tokenizer.shown_piece), or as the vocabulary spells it where the text
    would be blank, a control character or U+FFFD (a safeguard for other tokenizers)."""
    word = guess.word
    if not word or not word.isprintable() or "\ufffd" in word:
        return guess.piece if guess.piece.isprintable() else repr(guess.piece)
    return word


def guesses_text(guesses) -> str:
    """One guess a line: rank, word, probability (a code block: inert, aligned)."""
    words = [shown_word(g) for g in guesses]
    width = max(len(w) for w in words)
    return "\n".join(
        f"{n}. {w.ljust(width)}  {g.probability:6.1%}"
        for n, (w, g) in enumerate(zip(words, guesses, strict=True), 1)
    )


def show(view: View) -> None:
    """The fill-in-the-mask answers for sentence A, or how to ask for them."""
    task = view.task  # a masked LM's (tfviz.ui.kinds.MaskedKind): it has a head and a marker
    mask = task.mask
    if mask is None or view.text is None:
        return  # a head without a marker to type, or sentence A refused (its box says why)
    text = view.text
    with st.container(key="fill_mask"):  # a stable hook for browser tests
        st.markdown(f"**{md_escape(t('masked.title'))}**")
        count = text.count(mask)
        if count != 1:
            key = "masked.none" if count == 0 else "masked.several"
            st.info(md_escape(t(key, mask=mask, n=count)))
            st.button(
                md_escape(t("masked.insert", mask=mask)),
                key="mask_last_word",
                on_click=put_mask,
                args=(text.replace(mask, " ") if count else text, mask),
            )
            return
        iv = view.interventions
        try:
            answer = compute.cached_answer(
                view.entry.digest, text, iv if not iv.is_default else NONE, mask,
                _model=view.model, _head=task.head, _tokenizer=task.tokenizer,
            )  # fmt: skip
        except InputError:  # the marker is past the model's limit (the count is checked above)
            st.warning(md_escape(t("masked.past_limit", mask=mask, n=task.max_pieces - 2)))
            return
        if iv.is_default:
            st.caption(md_escape(t("masked.learned")))
            st.code(guesses_text(answer.learned), language=None)
            st.caption(md_escape(t("masked.try_switch")))
            return
        left, right = st.columns(2)
        with left:
            st.caption(md_escape(t("masked.learned")))
            st.code(guesses_text(answer.learned), language=None)
        with right:
            st.caption(md_escape(t("masked.switched", what=describe(iv))))
            st.code(guesses_text(answer.switched), language=None)
        key = "masked.changed" if answer.changed else "masked.unchanged"
        st.caption(
            md_escape(
                t(
                    key,
                    learned=shown_word(answer.learned[0]),
                    switched=shown_word(answer.switched[0]),
                )
            )
        )
