"""The language catalogue: every user-visible string of a converted view, in English and Chinese.

A view writes `t("lessons.step1.title")` instead of the text itself; `t` looks the key up in the
catalogue of the current language, tfviz.ui.state.LANG ("en", the default, or "zh"), and
fills in its {placeholders}. Each language is one flat JSON file in tfviz/ui/locales/ (key ->
text), read once per process. tests/test_i18n.py checks that both files have the same keys and
the same placeholders in each string, so a translation can neither lose a sentence nor a number.

Technical names (W_o, W_q, softmax, concat, d_k) are written the same in every language.
The Chinese uses one rendering per term (learned W_o 学到的 W_o, identity 恒等映射, token 词元,
random seed 随机种子...): locales/glossary.json lists each term with its rejected renderings, and
tests/test_glossary.py holds zh.json (and docs/claims.zh.md) to it. The three articles the app
teaches from are named once, as article.concat, article.encoder and article.annotated.

A text may quote another key's text as {@other.key}: help that names a widget's label or
option ("set W_o to “{@common.w_o.identity}”") then shows that label exactly as the widget does,
in the same language, and cannot drift from it. References are expanded when a catalogue is read
(`catalogue`), so `t` and every caller see plain text; a referenced text takes no placeholders of
its own. Library code that reads en.json as a plain file (tfviz.plots: chart.*; tfviz.messages:
jobs.message.*) sees the raw text, so those keys use no references (tests/test_i18n.py checks).

A key missing from the catalogues (a bug the test catches) is shown as ⟦key⟧ rather than
failing the page, so a student still sees the rest; a link may carry ?lang=zh to open in Chinese.
"""

from __future__ import annotations

import functools
import json
import re
import string
from pathlib import Path

import streamlit as st

from tfviz.ui import state

LANGUAGES = {"en": "English", "zh": "中文"}  # code -> name, each written in its own language
DEFAULT = "en"
KEY = state.LANG.name  # the picker widget's key, and the query string's name of the language
LOCALES = Path(__file__).resolve().parent / "locales"
REFERENCE = re.compile(r"\{@([\w.]+)\}")  # {@other.key}: that key's text, in the same language


def missing(key: str) -> str:
    """What a key absent from the catalogue shows as (the browser test looks for it)."""
    return f"⟦{key}⟧"


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """key -> text of one language, from locales/<lang>.json (read once per process)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(LANGUAGES)}")
    data = json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{lang}.json must be one object of key -> text")
    return {key: expand(data, key) for key in data}


def references(text: str) -> list[str]:
    """The keys a raw catalogue text quotes as {@key}, in order."""
    return REFERENCE.findall(text)


def expand(data: dict[str, str], key: str, seen: tuple[str, ...] = ()) -> str:
    """data[key] with every {@other} replaced by other's (expanded) text; an unknown key shows
    as ⟦other⟧, like a missing key; a reference back to a key being expanded is an error."""
    if key in seen:
        raise ValueError(f"catalogue references loop: {' -> '.join((*seen, key))}")

    def one(match: re.Match) -> str:
        other = match.group(1)
        return expand(data, other, (*seen, key)) if other in data else missing(other)

    return REFERENCE.sub(one, data[key])


def placeholders(text: str) -> set[str]:
    """The {names} a catalogue text takes, e.g. {"value", "n"} for "{value} of {n}"
    ({@key} references are not placeholders: they are expanded when the catalogue is read)."""
    return {
        name
        for _, name, _, _ in string.Formatter().parse(text)
        if name is not None and not name.startswith("@")
    }


def current() -> str:
    """The current language: the session's choice, else ?lang= in the address, else English."""
    lang = state.LANG.get()
    if lang in LANGUAGES:
        return lang
    asked = st.query_params.get(KEY)
    return asked if asked in LANGUAGES else DEFAULT


def t(key: str, *, lang: str | None = None, **values) -> str:
    """The text of key in the current language, with its {placeholders} filled from values.

    lang: a language fixed while the script ran, for a widget's format_func: Streamlit may call
    that later, outside the script (AppTest does), where the session's language is not known.
    "lang" is therefore never a placeholder name.
    """
    return translate(current() if lang is None else lang, key, **values)


def translate(lang: str, key: str, **values) -> str:
    """The text of key in lang (the current language is t's business)."""
    text = catalogue(lang).get(key)
    if text is None:
        return missing(key)
    return text.format(**values)


def language_picker() -> str:
    """The English / 中文 switch (widget key "lang"); returns the language chosen.

    Meant for the sidebar, once per page: two widgets with the key "lang" would clash.
    """
    # Not bound to the address with bind="query-params": with a format_func that writes the shown
    # name (lang=中文) and drops ?lang=zh. tfviz.ui.share reads ?lang= on a session's first run and
    # writes it back on every run. A default is given only while the session has no value yet: a
    # widget never gets both.
    default = None if state.LANG.is_set() else current()
    lang = st.segmented_control(
        t("lang.picker"),  # the same text in both languages: a switch must be findable in either
        list(LANGUAGES),
        default=default,
        format_func=LANGUAGES.get,
        key=KEY,
        selection_mode="single",
        required=True,
    )
    shown = state.LANG_SHOWN.get()
    state.LANG_SHOWN.set(lang)
    if shown is not None and shown != lang:
        relabel()
    return lang


def relabel() -> None:
    """After a language switch, make every choice widget show its option in the new language.

    The browser keeps a select box's (or radio's) choice as the label it showed; when the labels
    change language, it went on showing the old one ("reverse (bundled)" in a Chinese page).
    Assigning each widget's value to itself makes the server send the value again, labelled by
    the new format_func. Only values a choice or text widget holds are touched: a button's or
    form's True/False, an upload or a table editor's state must not be assigned (Streamlit
    refuses it), and they have no labels to change. Runs before any widget after the language
    picker is drawn, so every key may still be assigned.
    """
    for key in state.names():
        if key == KEY or key.startswith("_"):
            continue
        value = state.widget_value(key)
        if _choice_value(value) or (
            isinstance(value, list) and all(_choice_value(v) for v in value)
        ):
            state.set_widget(key, value)


def _choice_value(value) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
