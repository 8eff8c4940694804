"""What steps 5-8 share: the bundled character language model as a View of its own, its
introduction, the typed line of steps 5 and 6, one head's map, a score as shown.
"""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.core.interventions import NONE
from tfviz.ui import folders
from tfviz.ui.i18n import t, why
from tfviz.ui.kinds import kind_of
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, plot_words

LESSON_LM = "shakespeare-2l-attn"  # its folder: tfviz.ui.folders.LANGUAGE_DIR / LESSON_LM
LINE_EXAMPLE = "To be, or not to be, that is the question"
LINE_CHARS = (2, 100)  # a typed line's length, at least and at most: one map row a character
# Steps 5 and 6 draw the same box (same key, label and default): the line goes from one to the
# other.
LINE_KEY = "lesson_line"


def lesson_lm(view: View) -> View | None:
    """The decoder lessons' model, the bundled LESSON_LM, as a View of its own (learned W_o,
    nothing switched), whatever model the sidebar has loaded; None after saying why when its
    folder is missing or it cannot be used."""
    problems: list[str] = []
    entries = folders.root_entries(folders.LANGUAGE_DIR, problems, folders.BUNDLED_KEY_PREFIX)
    entry = next((e for e in entries if e.name == LESSON_LM), None)
    if entry is None:
        st.warning(t("lessons.lm.missing", name=LESSON_LM))  # a name of ours: not escaped
        for problem in problems:  # a refused folder, with the library's reason
            st.caption(problem)
        return None
    model, meta, task = folders.load_folder(entry.path, entry.digest, str(view.model.device))
    if model is None:
        st.error(t("lessons.lm.cannot_load", name=md_escape(entry.name), why=why(meta)))
        return None
    kind = kind_of(task)
    if not kind.next_tokens or task.tokenizer.alphabet is None:
        st.error(md_escape(t("lessons.lm.not_character", name=entry.name)))
        return None
    return View(entry=entry, model=model, meta=meta, task=task, interventions=NONE, kind=kind)


def lm_intro(lm: View, short: bool = False) -> None:
    """Which model steps 5-8 read, with its shape from its config: at length on step 5, in one
    line on the others (a link may open any of them)."""
    cfg = lm.model.config
    shape = "lessons.lm.shape_ffn" if cfg.ffn else "lessons.lm.shape_attn"
    shape = t(shape, layers=cfg.n_layers, heads=cfg.n_heads, context=cfg.max_len)
    if short:
        st.caption(t("lessons.lm.short", name=md_escape(lm.entry.name), shape=shape))
    else:
        st.markdown(t("lessons.lm.intro", name=md_escape(lm.entry.name), shape=shape))


def score_text(x: float) -> str:
    """A head's score as shown: two significant digits, so that 0.0002 is not rounded to 0."""
    return f"{x:.2g}"


def typed_line(lm: View) -> str | None:
    """Steps 5 and 6's line of Shakespeare, or None after an error saying why it is refused."""
    alphabet = "".join(sorted(lm.task.tokenizer.alphabet)).replace("\n", "↵")
    low, high = LINE_CHARS
    text = st.text_input(
        t("lessons.s5.line"),
        value=LINE_EXAMPLE,
        key=LINE_KEY,
        help=t("lessons.s5.line_help", low=low, high=high, alphabet=md_escape(alphabet)),
    )
    if not low <= len(text) <= high:  # no echo of the text: it may be a long paste
        st.error(t("lessons.s5.line_length", low=low, high=high, n=len(text)))
        return None
    try:
        return lm.task.validate(text)
    except ValueError as e:  # characters outside the model's alphabet, named by the catalogue
        st.error(why(e))
        return None


def head_map(trace, layer: int, head: int, title: str, key: str) -> None:
    """One head's attention on a traced text, its masked cells blank (NaN)."""
    weights = trace.shown(trace.attn[layer, head])
    chart(plots.attention_map(weights, trace.labels, title, words=plot_words()), key=key)
