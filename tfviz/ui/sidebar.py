"""The sidebar: the language, the model picker and uploader, the chosen model's facts, the W_o
switches and the charts' download format.

Its widgets rerun the whole page (the main area is a fragment of its own); what they choose is
handed to the views as a View (tfviz.ui.view). A shared link's model and switches are put into
these widgets' session_state before they are drawn (tfviz.ui.share).
"""

from __future__ import annotations

import streamlit as st

from tfviz import get_task
from tfviz.core.metrics import headline
from tfviz.core.tasks import Task
from tfviz.hf import pretrained
from tfviz.training.checkpoint import CheckpointMeta
from tfviz.ui import folders, share, state, switches
from tfviz.ui.i18n import catalogue, current, t, why
from tfviz.ui.jobs import trained_here
from tfviz.ui.kinds import kind_of
from tfviz.ui.labels import layout_word, metric_name, size_text, task_label
from tfviz.ui.models import (
    BUNDLED_DIR,
    DEFAULT_MODEL,
    ModelEntry,
    list_models,
    load_model,
    load_pretrained,
    source_key,
)
from tfviz.ui.switches import w_o_label
from tfviz.ui.text import md_escape
from tfviz.ui.uploads import session_uploads, upload_box
from tfviz.ui.view import forget_per_model, per_model
from tfviz.ui.widgets import CHART_FORMATS

# The switches' widgets whose options depend on the model (the views register their own).
per_model(*switches.PER_MODEL_KEYS)


def pick_model(device: str) -> tuple[ModelEntry, object, CheckpointMeta, Task] | None:
    """The model picker (with this session's uploads), the uploader, and the chosen model with
    its task (a toy Task, or the pretrained model's SentenceTask)."""
    entries, problems = list_models(device)
    entries += folders.folder_entries(problems)  # $TFVIZ_PRETRAINED_DIR, listed without loading
    uploads = session_uploads()
    entries += [upload.entry for upload in uploads.values()]
    by_key = {e.key: e for e in entries}
    if not entries:
        st.error(t("sidebar.no_models", folder=md_escape(str(BUNDLED_DIR))))
        for problem in problems:  # each made inert where it names a file (folders, models)
            st.warning(problem)
        return None
    share.restore_model(by_key)  # a shared link's model, on the session's first run
    opened = state.OPEN_MODEL.pop()  # "Show this model" under a training
    if opened in by_key:
        state.MODEL.set(opened)
    if state.MODEL.get() not in (None, *by_key):
        state.MODEL.pop()  # its file (or upload) is gone: back to the default
    keys = list(by_key)
    default = by_key.get(f"bundled:{DEFAULT_MODEL}", entries[0]).key
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    mine = trained_here()
    key = st.selectbox(
        t("sidebar.model"),
        keys,
        index=keys.index(default),
        format_func=lambda k: t(
            "sidebar.model_option",
            name=by_key[k].name,
            source=folders.option_source(by_key[k], lang)
            or t(source_key(by_key[k], mine), lang=lang),
            lang=lang,
        ),
        key=state.MODEL.name,
        help=t("sidebar.model_help"),
    )
    for problem in problems:
        st.warning(problem)
    upload_box(device)
    entry = by_key[key]
    if entry.key in uploads:
        model, meta = uploads[entry.key].model, uploads[entry.key].meta
        if uploads[entry.key].task is not None:  # a zipped model folder: its own SentenceTask
            return entry, model, meta, uploads[entry.key].task
    elif entry.source == folders.SOURCE:
        with st.spinner(md_escape(t("sidebar.loading", name=entry.name))):  # a folder's name
            model, meta, task = folders.load_folder(entry.path, entry.digest, device)
        if model is None:
            st.error(t("sidebar.cannot_load", name=md_escape(entry.name), why=why(meta)))
            return None
        return entry, model, meta, task
    elif entry.source == "pretrained":
        with st.spinner(t("sidebar.loading", name=entry.name)):
            model, meta, task = load_pretrained(device)
        if model is None:
            st.error(t("sidebar.cannot_load", name=md_escape(entry.name), why=why(meta)))
            return None
        return entry, model, meta, task
    else:
        model, meta, task = load_model(entry.path, entry.digest, device)
        if model is None:
            st.error(t("sidebar.cannot_load", name=md_escape(entry.name), why=why(meta)))
            return None
        return entry, model, meta, task
    return entry, model, meta, get_task(meta.task)


def on_model_change(entry: ModelEntry, task: Task) -> None:
    """A new model: start from its task's first example(s) and forget per-model choices.

    Values are set through session_state only on a change, never on the session's first run:
    the first run's widget values can be lost if the user clicks before that run has reached the
    browser (it then drops the run's messages), and the widgets would show their defaults.
    Their defaults (index=, value=) therefore already are the right first values.
    """
    shown = state.SHOWN_MODEL.get()
    state.SHOWN_MODEL.set(entry.key)
    if shown is None or shown == entry.key:
        return
    state.SEQUENCE.set(task.examples[0])
    if kind_of(task).pretrained:  # a text model's examples: sentence A, then B
        state.SENTENCE_B.set(task.examples[1])
    forget_per_model()


def model_info(meta: CheckpointMeta, task: Task, device: str) -> None:
    """The task, its alphabet and lengths, the saved metric, the sizes and the device."""
    if kind_of(task).pretrained:
        pretrained_info(meta, task, device)
        return
    c, record = meta.config, meta.record
    st.markdown(t("sidebar.task", name=md_escape(task_label(task.name))))
    st.caption(md_escape(task_description(task)))
    st.text(
        t(
            "sidebar.alphabet",
            alphabet=task.alphabet,
            min_len=task.min_len,
            max_len=task.max_len,
        )
    )
    best = headline(task.metric, meta.metrics)
    if best is not None:
        _, value = best
        lengths = f"{meta.metrics.get('min_len', '?')}..{meta.metrics.get('max_len', '?')}"
        st.metric(
            metric_name(task.metric, capital=True),
            value,
            help=t("sidebar.metric_help", n=meta.metrics.get("n", "?"), lengths=lengths),
        )
    mode = record.get("w_o", "learned")
    try:
        trained_with = w_o_label(mode)
    except (KeyError, ValueError, AttributeError):
        trained_with = str(mode)  # a checkpoint's record is data: shown as it is
    # A causal model (the Train form's box) says so: its attention is a decoder's.
    causal = "\n" + t("sidebar.causal") if c.causal else ""
    st.text(
        size_text(c)
        + "\n"
        + t("sidebar.norm_embed", **layout_words(c))
        + causal
        + "\n"
        + t("sidebar.trained", w_o=trained_with, steps=record.get("steps_done", "?"))
        + "\n"
        + t("sidebar.device", device=device.upper())
    )


def pretrained_info(meta: CheckpointMeta, task: Task, device: str) -> None:
    """What the pretrained model is, where it comes from, its licence, sizes and device."""
    if meta.record.get("family"):  # a Hugging Face folder (server or upload), not MiniLM
        folders.folder_info(meta, task, device)
        return
    c = meta.config
    st.markdown(t("sidebar.task", name=md_escape(task_label(task.name))))
    st.caption(md_escape(task_description(task)))
    st.text(
        t(
            "sidebar.pretrained_source",
            source=pretrained.SOURCE,
            licence=pretrained.LICENCE,
            package=pretrained.PIP_REQUIREMENT.split("==")[0],
        )
    )
    st.text(
        size_text(c)
        + "\n"
        + t("sidebar.pretrained_kind", norm=layout_words(c)["norm"], pieces=task.max_pieces)
        + "\n"
        + t("sidebar.device", device=device.upper())
    )


def layout_words(config) -> dict[str, str]:
    """The config's norm ("post") and embed ("token") in the student's words, from
    sidebar.norm.<value> and sidebar.embed.<value>; a value the catalogue does not know is shown
    as it is (a checkpoint's record is data)."""
    return {field: layout_word(field, getattr(config, field)) for field in ("norm", "embed")}


def task_description(task: Task) -> str:
    """What the task asks, in the student's language; a task the catalogue does not know yet (a
    new one in tfviz.core.tasks) keeps its own English description rather than showing a key."""
    key = f"task.{task.name.replace(' ', '_')}.description"
    return t(key) if key in catalogue(current()) else task.description


def chart_format_picker() -> None:
    """PNG or SVG: what the camera in every chart's toolbar saves (tfviz.ui.widgets.chart)."""
    st.segmented_control(
        t("sidebar.chart_format"),
        CHART_FORMATS,
        default=CHART_FORMATS[0],
        format_func=str.upper,
        key=state.CHART_FORMAT.name,
        required=True,
        help=t("sidebar.chart_format_help"),
    )


def restore_link(meta: CheckpointMeta, task: Task) -> None:
    """A shared link's switches and sequence(s), checked against the model (first run only)."""
    sentences = kind_of(task).pretrained  # a text model's link may carry sentence B
    share.restore_for_model(meta.config, validate=task.validate, sentences=sentences)
