"""Shareable links: the view on screen lives in the address bar's query string.

A teacher copies the address (or the link under the views) and a student who opens it sees the
same model, sequence, W_o switch, zeroed heads, tab, lesson step and language. The query keys:

    model       picker key, e.g. bundled:sum or pretrained:all-MiniLM-L6-v2
    sequence    the typed sequence (sentence A for the pretrained model)
    sentence_b  sentence B (pretrained model only)
    w_o_mode    learned | identity | zero | block_diagonal | rank:K
    w_o_scope   the one layer the W_o switch acts in (absent: every layer)
    ablate      heads zeroed before W_o, comma-separated: L0H1,L1H0
    view        the open tab, by its id (tfviz.ui.router.VIEWS: attention, w_o, lessons...):
                the same link works in every language, whose tab labels differ
    step        the lesson step (with view=lessons)
    lang        en | zh (the language's own name, English | 中文, is taken too)
    training    the name of the model this session is training, while it trains: a browser
                that reconnects (a reload, or another replica after this one died) is told
                whether that training still runs, finished, or was lost with its server

Two halves. parse_query and fit_to_model are pure: a query in, the values it validly names plus
one Notice per value refused (unknown, malformed, too long, given twice, out of range for the
model) and one naming the keys a link cannot set. Nothing a link says can raise: a refused value
falls back to its default, a key a link cannot set is dropped from the address, and the page
says which and why, quoting the link inertly (the caller's escape, tfviz.ui.text.md_escape).
read_link, restore_model and restore_for_model are the Streamlit glue: on a session's first run
the validated values are put into session_state before the widgets that own them are created
(the model's once the picker's list is known, the switches and sequences once the model is). On
every run the query string is rewritten from what is on screen (query_of, written by
tfviz.ui.router, the one module that reads and writes the address), so the address bar always
holds the current view.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

import streamlit as st

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.ui import state, switches
from tfviz.ui.i18n import DEFAULT, LANGUAGES, t, why
from tfviz.ui.kinds import MAX_SENTENCE_CHARS

# The query string's names; those a widget also holds are its session key (tfviz.ui.state).
MODEL, SEQUENCE, SENTENCE_B = state.MODEL.name, state.SEQUENCE.name, state.SENTENCE_B.name
W_O, SCOPE, ABLATE = switches.MODE, switches.SCOPE, switches.ABLATE
VIEW, STEP, LANG = state.VIEW.name, "step", state.LANG.name
TRAINING = "training"
# Every key a link may carry, and sync writes.
KEYS = (MODEL, SEQUENCE, SENTENCE_B, W_O, SCOPE, ABLATE, VIEW, STEP, LANG, TRAINING)

# Longest sequence or sentence taken from a link: what a sentence box takes, so that every view
# on screen can be linked (tfviz.ui.kinds says why it is the size it is).
MAX_TEXT_CHARS = MAX_SENTENCE_CHARS
MAX_ABLATE_CHARS = 2000  # head names, L0H1,L1H3,...: all 72 of MiniLM's take 371 characters
MAX_NAME_CHARS = 100
SHOWN_CHARS = 60  # a refused value is quoted in its notice cut to this


@dataclass(frozen=True)
class Notice:
    """A value of the link that was refused, and why (a REASONS key)."""

    param: str
    reason: str
    value: str = ""  # what the link said (cut when shown: shown_value)
    # The model's reason, for a sequence the model refuses: its error, worded in the language
    # the notice is shown in (tfviz.ui.i18n.why).
    detail: ValueError | str = ""


# reason -> catalogue key of its message (each takes {param}, {value} and {detail}).
REASONS = {
    "repeated": "share.notice.repeated",
    "too_long": "share.notice.too_long",
    "control": "share.notice.control",
    "unknown_model": "share.notice.unknown_model",
    "upload": "share.notice.upload",
    "bad_mode": "share.notice.bad_mode",
    "rank_too_large": "share.notice.rank_too_large",
    "bad_layer": "share.notice.bad_layer",
    "bad_head": "share.notice.bad_head",
    "unknown_view": "share.notice.unknown_view",
    "bad_step": "share.notice.bad_step",
    "unknown_lang": "share.notice.unknown_lang",
    "bad_sequence": "share.notice.bad_sequence",
    "not_for_model": "share.notice.not_for_model",
    "unknown_key": "share.notice.unknown_key",
    "bad_name": "share.notice.bad_name",
    "training_running": "share.notice.training_running",
    "training_done": "share.notice.training_done",
    "training_lost": "share.notice.training_lost",
}


@dataclass(frozen=True)
class Shared:
    """What a link validly asks for; None (or empty) where it asks for nothing, or for something
    refused: the default then stays."""

    model: str | None = None
    sequence: str | None = None
    sentence_b: str | None = None
    switches: switches.Switches | None = None  # None: the link names no switch
    view: str | None = None
    step: int | None = None
    lang: str | None = None
    training: str | None = None
    notices: tuple[Notice, ...] = field(default=(), compare=False)


# ---- pure: query -> values and notices ------------------------------------------------------


def _values(query: Mapping[str, str | Sequence[str]], key: str) -> list[str]:
    raw = query.get(key)
    if raw is None:
        return []
    return [raw] if isinstance(raw, str) else [str(v) for v in raw]


def _has_control(text: str) -> bool:
    """Control, private-use, unassigned or invisible format characters (bidi overrides, zero-width
    marks): nothing a student types, and they make a quoted value read as something else."""
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text)


def _single(
    query: Mapping[str, str | Sequence[str]], key: str, limit: int, notices: list[Notice]
) -> str | None:
    """The one value of key, or None (absent, or refused with a notice)."""
    values = _values(query, key)
    if not values:
        return None
    if len(values) > 1:
        notices.append(Notice(key, "repeated", values[0]))
        return None
    value = values[0]
    if len(value) > limit:
        notices.append(Notice(key, "too_long", value, str(limit)))
        return None
    if _has_control(value):
        notices.append(Notice(key, "control", value))
        return None
    return value


def parse_query(
    query: Mapping[str, str | Sequence[str]],
    *,
    views: Collection[str],
    steps: Collection[int],
) -> Shared:
    """The values a link's query names, checked for what can be checked without the models.

    Args:
        query: key -> value, or key -> every value given for it (a key repeated in the link).
        views: the tab ids (tfviz.ui.router.VIEWS); steps: the lesson steps.
    Returns:
        Shared, with a Notice for every refused value, and one naming the keys a link cannot
        set (not in KEYS: a typo, a made-up switch like heads=, a chat tool's tracking tag), so
        that a link never seems to have set something it did not.
    """
    notices: list[Notice] = []
    unknown = [key for key in query if key not in KEYS]
    if unknown:
        notices.append(Notice("", "unknown_key", ", ".join(unknown), ", ".join(KEYS)))

    def one(key: str, limit: int = MAX_NAME_CHARS) -> str | None:
        return _single(query, key, limit, notices)

    def refuse(param: str, reason: str, value: str = "", detail: str = "") -> None:
        notices.append(Notice(param, reason, value, detail))

    named = any(key in query for key in switches.QUERY_KEYS)
    shared_switches = switches.parse(one, refuse, MAX_ABLATE_CHARS) if named else None
    view = one(VIEW)
    if view is not None and view not in views:
        notices.append(Notice(VIEW, "unknown_view", view))
        view = None
    step = None
    step_text = one(STEP)
    if step_text is not None:
        if step_text.isascii() and step_text.isdigit() and int(step_text) in steps:
            step = int(step_text)
        else:
            notices.append(Notice(STEP, "bad_step", step_text))
    training = one(TRAINING)
    if training is not None and not _model_name(training):
        notices.append(Notice(TRAINING, "bad_name", training))
        training = None
    lang = one(LANG)
    by_name = {name: code for code, name in LANGUAGES.items()}
    if lang is not None and lang not in LANGUAGES:
        if lang in by_name:
            lang = by_name[lang]
        else:
            notices.append(Notice(LANG, "unknown_lang", lang))
            lang = None
    return Shared(
        model=one(MODEL),
        sequence=one(SEQUENCE, MAX_TEXT_CHARS),
        sentence_b=one(SENTENCE_B, MAX_TEXT_CHARS),
        switches=shared_switches,
        view=view,
        step=step,
        lang=lang,
        training=training,
        notices=tuple(notices),
    )


def _model_name(text: str) -> bool:
    """A name the Train form could have saved a model under (tfviz.training.checkpoint's rules)."""
    return 0 < len(text) <= 64 and all(
        ch.isascii() and (ch.isalnum() or ch in "_-.") for ch in text
    )


def check_model(shared: Shared, models: Collection[str]) -> Shared:
    """shared with its model refused unless it is one of models (the picker keys offered)."""
    if shared.model is None or shared.model in models:
        return shared
    # An upload lives only in the browser tab that uploaded it: no link can reach it.
    reason = "upload" if shared.model.startswith("upload:") else "unknown_model"
    notices = (*shared.notices, Notice(MODEL, reason, shared.model))
    return replace(shared, model=None, notices=notices)


def fit_to_model(
    shared: Shared,
    *,
    config: ModelConfig,
    validate: Callable[[str], object],
    sentences: bool,
) -> Shared:
    """shared with what the chosen model cannot take refused: a layer or head it lacks, a rank
    above d_model (tfviz.ui.switches.fit), a sequence its task rejects (validate raises
    ValueError), sentence B for a model that reads one sequence."""
    notices = list(shared.notices)
    changes: dict[str, object] = {}

    def refuse(param: str, reason: str, value: str = "", detail: str = "") -> None:
        notices.append(Notice(param, reason, value, detail))

    if shared.switches is not None:
        changes["switches"] = switches.fit(shared.switches, config, refuse)
    for key, text in ((SEQUENCE, shared.sequence), (SENTENCE_B, shared.sentence_b)):
        if text is None:
            continue
        if key == SENTENCE_B and not sentences:
            notices.append(Notice(key, "not_for_model", text))
            changes[key] = None
            continue
        try:
            validate(text)
        except ValueError as e:
            notices.append(Notice(key, "bad_sequence", text, e))
            changes[key] = None
    return replace(shared, notices=tuple(notices), **changes)


def query_of(
    *,
    model: str,
    sequence: str | None,
    sentence_b: str | None,
    interventions: Interventions,
    view: str | None,
    step: int | None,
    lang: str = DEFAULT,
    training: str | None = None,
) -> dict[str, str]:
    """The query string's values for what is on screen (written by tfviz.ui.router.write_address;
    read by parse_query).

    Defaults are left out (learned W_o in every layer, no head zeroed); the model, the sequence
    and the tab never are: a model's first example and the first tab may change, a link should
    not. The lesson step is written only with view="lessons".
    """
    query = {MODEL: model}
    if sequence is not None:
        query[SEQUENCE] = sequence
    if sentence_b is not None:
        query[SENTENCE_B] = sentence_b
    query.update(switches.Switches.of(interventions).query())
    if view is not None:
        query[VIEW] = view
        if view == "lessons" and step is not None:
            query[STEP] = str(step)
    if lang != DEFAULT:
        query[LANG] = lang
    if training is not None:
        query[TRAINING] = training
    return query


def shown_value(value: str) -> str:
    """A refused value as a notice quotes it: control characters replaced, cut to SHOWN_CHARS."""
    clean = "".join("\ufffd" if _has_control(ch) else ch for ch in value)
    return clean if len(clean) <= SHOWN_CHARS else clean[: SHOWN_CHARS - 1] + "…"


def notice_text(notice: Notice, lang: str | None = None) -> str:
    """The notice in the student's language (plain text: the caller escapes it)."""
    return t(
        REASONS[notice.reason],
        param=notice.param,
        value=shown_value(notice.value),
        detail=why(notice.detail, lang, escape=str),
        lang=lang,
    )


# ---- Streamlit glue: restore on a session's first run, then keep the address in step ---------


def read_link(query: Mapping[str, Sequence[str]], views: Mapping[str, str]) -> None:
    """A session's first run: read the link; set its language, tab and lesson step.

    query: the address's query as tfviz.ui.router read it (key -> its values); views: tab id ->
    its label in the current language. The model waits for the picker's list (restore_model),
    the rest for the model itself (restore_for_model). What a link cannot set leaves the address
    with the run's write (query_of names only KEYS).
    """
    if state.LINK_READ.is_set():
        return
    state.LINK_READ.set(True)
    shared = parse_query(query, views=list(views), steps=state.LESSON_STEPS)
    # Set before the widgets that own these keys are created, as Streamlit requires.
    if shared.view is not None:
        state.VIEW.set(views[shared.view])
    if shared.step is not None:
        state.LESSON_STEP.set(shared.step)
    if shared.lang is not None:
        state.LANG.set(shared.lang)
    if shared.training is not None:
        state.TRAINING_ASKED.set(shared.training)
    state.LINK_PENDING.set(shared)


def restore_model(models: Collection[str]) -> None:
    """Before the model picker is drawn: the link's model, if this server offers it."""
    shared = state.LINK_PENDING.get()
    if shared is None:
        return
    shared = check_model(shared, models)
    if shared.model is not None:
        state.MODEL.set(shared.model)
    state.LINK_PENDING.set(shared)


def restore_for_model(
    config: ModelConfig, validate: Callable[[str], object], sentences: bool
) -> None:
    """Once the model is loaded, before its switches and sequence boxes are drawn: the rest of
    the link, checked against the model; every refused value leaves a notice."""
    shared = state.LINK_PENDING.pop()
    if shared is None:
        return
    shared = fit_to_model(shared, config=config, validate=validate, sentences=sentences)
    if shared.sequence is not None:
        state.SEQUENCE.set(shared.sequence)
    if shared.sentence_b is not None:
        state.SENTENCE_B.set(shared.sentence_b)
    if shared.switches is not None:
        state.set_widgets(shared.switches.widget_state())
    if shared.notices:
        state.NOTICES.set(list(shared.notices))


def training_asked() -> str | None:
    """Once: the training a link (a reloaded or reconnected page) says this browser was running."""
    return state.TRAINING_ASKED.pop()


def add_notice(notice: Notice) -> None:
    """A notice shown with the link's, until dismissed."""
    state.NOTICES.set([*state.NOTICES.get([]), notice])


def dismiss_notices() -> None:
    state.NOTICES.pop()


def show_notices(escape: Callable[[str], str]) -> None:
    """What the link asked for and did not get, one warning each, until dismissed."""
    notices = state.NOTICES.get()
    if not notices:
        return
    for notice in notices:
        st.warning(escape(notice_text(notice)))
    st.button(t("share.dismiss"), key="share_dismiss", on_click=dismiss_notices)


def link_box(query: Mapping[str, str]) -> None:
    """The link to this view, in a code block with its copy button.

    The server does not know the address the browser used (a proxy may stand in between) except
    through st.context.url, which the browser reports; without it the link is the query alone,
    to be put after the app's address, and the caption says so.
    """
    link = "?" + urlencode(query)
    base = st.context.url
    # An upload lives in this browser tab only: whoever opens the link gets the default model.
    upload = query.get(MODEL, "").startswith("upload:")
    with st.expander(t("share.link.title")):
        if base:
            st.code(base.rstrip("?") + link, language=None, wrap_lines=True)
            st.caption(t("share.link.caption_upload" if upload else "share.link.caption"))
        else:
            st.code(link, language=None, wrap_lines=True)
            st.caption(t("share.link.relative_upload" if upload else "share.link.relative"))
