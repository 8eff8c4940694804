"""The page's language: which one a session reads, the language picker, t(), the catalogue
(tfviz.words) worded in that language, and why(), an error worded in it.

A view writes `t("lessons.step1.title")` instead of the text itself; `t` looks the key up in the
catalogue of the current language, tfviz.ui.state.LANG ("en", the default, or "zh"), and fills
in its {placeholders}; a link may carry ?lang=zh to open in Chinese. The catalogue itself, its
{@key} references and its rules live in tfviz.words, read the same by the library.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from tfviz.refusal import worded
from tfviz.ui import state
from tfviz.ui.text import md_escape
from tfviz.words import (  # noqa: F401 - re-exported: the views ask i18n for every word
    DEFAULT,
    LANGUAGES,
    LOCALES,
    catalogue,
    expand,
    missing,
    placeholders,
    references,
    translate,
)

KEY = state.LANG.name  # the picker widget's key, and the query string's name of the language


def current() -> str:
    """The current language: the session's choice, else ?lang= in the address, else English."""
    lang = state.LANG.get()
    if lang in LANGUAGES:
        return lang
    # The address as tfviz.ui.router read it: the URL is read once a run, there.
    asked = (state.ADDRESS.get() or {}).get(KEY, [DEFAULT])[0]
    return asked if asked in LANGUAGES else DEFAULT


def t(key: str, *, lang: str | None = None, **values) -> str:
    """The text of key in the current language, with its {placeholders} filled from values.

    lang: a language fixed while the script ran, for a widget's format_func: Streamlit may call
    that later, outside the script (AppTest does), where the session's language is not known.
    "lang" is therefore never a placeholder name.
    """
    return translate(current() if lang is None else lang, key, **values)


def why(reason, lang: str | None = None, escape: Callable[[str], str] = md_escape) -> str:
    """Why something was refused, in the current language (or lang), as markdown to show as it
    is: the one way the app words an error. A tfviz.refusal.Refusal (a model folder's, a
    checkpoint's, a typed input's, a form's value, a full job queue) is worded by the catalogue
    from its code and values, the values (a file's name, a key) made inert and the catalogue's
    own markup kept; anything else (an OSError's own words) inert. A sentence that takes it as
    a value escapes its other values (md_escape), not itself. escape=str: plain text, for a
    caller that escapes the whole sentence it is put in."""
    return worded(reason, current() if lang is None else lang, escape)


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
