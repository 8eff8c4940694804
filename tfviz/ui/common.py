"""What every view shares: the View it draws from, the switches, cached traces, chart helpers.

The caches here are keyed by checkpoint digest, sequence and switches (the model itself is
passed unhashed as _model) and hold numpy only, so one trace serves every session that asks for
it. Helpers that only format (md_escape, metric_text, describe) or draw one kind of
widget (chart, number_table, index_picker, csv_download and the views' CSV buttons) live here so
that every view shows numbers and text the same way, in the student's language (tfviz.ui.i18n;
the words tfviz.plots writes into a figure come from plot_words, passed as its `words`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from tfviz import dissect, get_task, plots, pretrained
from tfviz.checkpoint import CheckpointMeta
from tfviz.evaluate import evaluate
from tfviz.export import before_after_csv, comparison_csv
from tfviz.interventions import NONE, Interventions, head_name
from tfviz.pretrained import PairSimilarity
from tfviz.tasks import InputError, Task
from tfviz.trace import TraceArrays, run_trace, w_o_used
from tfviz.ui.help import HELP
from tfviz.ui.i18n import DEFAULT, catalogue, current, t, translate
from tfviz.ui.models import ModelEntry
from tfviz.ui.switches import w_o_label

POLL_SECONDS = 0.5  # how often a running job's progress is redrawn
ACCURACY_N = 256  # examples behind the "with and without the switch" accuracy
ACCURACY_SEED = 7_000_001  # fixed, so the two accuracies are measured on the same examples


# ---- the sidebar's switches and what the views draw from -----------------------------------


# Widget keys whose options depend on the model, each registered by the module that draws the
# widget (per_model); all are forgotten when the model changes (tfviz.ui.sidebar.on_model_change).
_PER_MODEL_KEYS: list[str] = []


def per_model(*keys: str) -> tuple[str, ...]:
    """Register widget keys to forget when the model changes; returns them."""
    _PER_MODEL_KEYS.extend(key for key in keys if key not in _PER_MODEL_KEYS)
    return keys


def forget_per_model() -> None:
    """The model changed: drop every registered widget's value (its options are the old model's)."""
    for key in _PER_MODEL_KEYS:
        st.session_state.pop(key, None)


def describe(iv: Interventions) -> str:
    """The sidebar's switches in words, e.g. "W_o off (identity) in layer 1; zeroed L0H2"."""
    parts = []
    if isinstance(iv.w_o, str):
        if iv.w_o != "learned":
            parts.append(t("common.describe.all_layers", mode=w_o_label(iv.w_o)))
    else:
        parts += [
            t("common.describe.layer", mode=w_o_label(mode), layer=layer) for layer, mode in iv.w_o
        ]
    if iv.ablate_heads:
        heads = ", ".join(head_name(lay, h) for lay, h in iv.ablate_heads)
        parts.append(t("common.describe.zeroed", heads=heads))
    return t("common.describe.separator").join(parts) or t("common.describe.learned")


@dataclass(frozen=True)
class View:
    """Everything the views draw from: the chosen model, the sequence and its traces."""

    entry: ModelEntry
    model: object
    meta: CheckpointMeta
    task: Task  # a toy Task, or the pretrained model's SentenceTask (kind "sentence")
    interventions: Interventions  # the sidebar's switches
    text: str | None = None  # None while the typed sequence is invalid
    trace: TraceArrays | None = None  # with the switches: what the views show
    base: TraceArrays | None = None  # learned W_o, nothing zeroed
    text_b: str | None = None  # sentence B (sentence models only; None while invalid)

    @property
    def is_sentence(self) -> bool:
        """The pretrained sentence encoder: no answer and no task loss, two sentences instead."""
        return self.task.kind == "sentence"


# Catalogue keys of the reasons a view is toy-only; each takes {what} and {name} (the model).
NEEDS_ANSWERS = "common.toy_only.needs_answers"
TRAINS_TOYS = "common.toy_only.trains_toys"


def refusal(error: ValueError) -> str:
    """Why an input was refused, in the page's language: in English the library's own message;
    in another, a library InputError through the catalogue by its code and values
    ("input.<code>"). Any other error is shown in its own words."""
    lang = current()
    key = f"input.{getattr(error, 'code', '')}"
    if lang != DEFAULT and isinstance(error, InputError) and key in catalogue(lang):
        return t(key, **error.values)
    return str(error)


def toy_only(view: View, what: str, why: str = NEEDS_ANSWERS) -> bool:
    """True, after one line saying why, when the view's model is a sentence encoder and so
    cannot show `what` (already in the student's language); why: the reason's catalogue key."""
    if not view.is_sentence:
        return False
    st.info(md_escape(t(why, what=what, name=view.entry.name)))
    return True


# ---- cached computations -------------------------------------------------------------------


# Traces are shared, not copied: st.cache_resource hands every session the same object, where
# st.cache_data would unpickle a fresh copy on every rerun of every session (a MiniLM trace is
# ~1.5 MB at 32 word-pieces; 40 sessions' copies in flight held most of a server's growth,
# bench/load.py). The arrays are made read-only, so a view cannot change what others see.
def shared_trace(trace: TraceArrays) -> TraceArrays:
    """trace with every array read-only (and returned)."""
    for field in dataclasses.fields(trace):
        value = getattr(trace, field.name)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return trace


# ~50 KB a toy trace (W_o and the per-head terms are derived when shown, not stored): 96 keep
# every open session's current pair (learned, switched) of a class of 40 in about 5 MB.
@st.cache_resource(show_spinner=False, max_entries=96)
def cached_trace(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> TraceArrays:
    """run_trace keyed by model digest, task, sequence and switches (model and task are not
    hashed: the digest and task name stand for them). Shared: read-only."""
    return shared_trace(run_trace(_model, _task, text, iv))


# A MiniLM trace is ~0.5 MB for a typical sentence ((L, H, T, T) attention and four (L, T, D)
# sites), ~8 MB at 128 word-pieces and ~31 MB at 256, so sentence models keep fewer, and long
# texts fewer still: at most 16 x 8 + 4 x 31 MB (~250 MB at 256 pieces, ~600 MB for a 512-piece
# BERT). A miss costs one forward pass (~15 ms; ~60 ms at 256 pieces).
LONG_TRACE_PIECES = 128


@st.cache_resource(show_spinner=False, max_entries=16)
def cached_sentence_trace(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> TraceArrays:
    """cached_trace for a sentence model, with fewer entries."""
    return shared_trace(run_trace(_model, _task, text, iv))


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_long_trace(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> TraceArrays:
    """cached_sentence_trace for a text of more than LONG_TRACE_PIECES word-pieces."""
    return shared_trace(run_trace(_model, _task, text, iv))


# 1.5 KB an entry: 1024 hold A and B, learned and switched, for every session of a large class.
@st.cache_data(show_spinner=False, max_entries=1024)
def cached_embedding(digest: str, text: str, iv: Interventions, _model, _task) -> np.ndarray:
    """One sentence's unit embedding (D,) under switches iv, keyed by model digest, text and
    switches (the model and task are not hashed: the digest stands for them).

    Per sentence, not per pair: while sentence A is typed, sentence B's embedding is read from
    here, so a keystroke runs the model on A alone (bench/README.md, "MiniLM").
    """
    return pretrained.embed_each(_model, _task, (text,), iv)[0].cpu().numpy()


@st.cache_data(show_spinner=False, max_entries=32)
def cached_w_o(digest: str, w_o_modes: tuple[str, ...], _model) -> np.ndarray:
    """The W_o each layer applied, (L, D, D), per checkpoint and modes (not per sequence)."""
    return w_o_used(_model, w_o_modes)


@st.cache_resource(show_spinner=False, max_entries=16)
def accuracy_cache(digest: str, task_name: str, _model) -> dissect.MeasureCache:
    """Switches -> the task metric on ACCURACY_N fixed random examples, per checkpoint: shared by
    every session, and thread-safe, so that a view can have it measure ahead (warm)."""
    task = get_task(task_name)

    def measure(iv: Interventions) -> dict[str, float]:
        return evaluate(_model, task, ACCURACY_N, ACCURACY_SEED, interventions=iv)

    return dissect.MeasureCache(measure)


def trace_for(view: View, text: str, iv: Interventions) -> TraceArrays:
    """The trace of text through the view's model with switches iv (cached)."""
    cached = cached_trace
    if view.is_sentence:
        long = len(view.task.pieces(text).ids) > LONG_TRACE_PIECES
        cached = cached_long_trace if long else cached_sentence_trace
    return cached(view.entry.digest, view.task.name, text, iv, _model=view.model, _task=view.task)


def similarity(view: View, text_a: str, text_b: str, iv: Interventions) -> PairSimilarity:
    """Two sentences compared with the learned model and under switches iv (sentence models;
    embeddings cached per sentence)."""

    def embeddings(switches: Interventions) -> np.ndarray:  # (2, D): A and B
        digest, model, task = view.entry.digest, view.model, view.task
        return np.stack(
            [
                cached_embedding(digest, text, switches, _model=model, _task=task)
                for text in (text_a, text_b)
            ]
        )

    learned = embeddings(NONE)
    return PairSimilarity.of(learned, learned if iv.is_default else embeddings(iv))


def similarity_for(view: View) -> PairSimilarity | None:
    """Sentences A and B compared under the view's switches; None unless both are valid."""
    if view.text is None or view.text_b is None:
        return None
    return similarity(view, view.text, view.text_b, view.interventions)


def accuracy_for(view: View, iv: Interventions) -> dict[str, float]:
    """The view's model's task metric with switches iv (cached)."""
    return dict(accuracy_cache(view.entry.digest, view.task.name, _model=view.model)(iv))


# ---- drawing -------------------------------------------------------------------------------


CHART_FORMAT = "chart_format"  # session_state: "png" or "svg", what the charts' camera saves
CHART_FORMATS = ("png", "svg")
_FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def chart_file_name(key: str, model_key: str | None) -> str:
    """A download's file name without extension: tfviz_<model>_<chart key>, letters, digits,
    '_' and '-' only (a trained model's name may hold anything), at most 80 characters."""
    model = (model_key or "").split(":", 1)[-1]
    name = "_".join(part for part in ("tfviz", model[:40], key) if part)
    return _FILE_NAME_UNSAFE.sub("_", name)[:80]


def plot_words(lang: str | None = None) -> plots.Words:
    """The words tfviz.plots writes into a figure itself (axis titles, block names, hover
    labels...), in lang (default: the current language), for a figure function's `words`:
    tfviz.ui.i18n.translate of the catalogue's chart.* keys. Bound to the language now, so a
    figure drawn later, outside the script (a download's callable), keeps it."""
    return functools.partial(translate, current() if lang is None else lang)


def chart(figure, key: str) -> None:
    """A plotly figure, full width, without Streamlit's theme, downloadable from its toolbar.

    Its words are already the student's: the view built it with words=plot_words().

    Applying the theme in the browser cost about 250 ms per keystroke on the Attention tab (three
    charts) on a 2-core machine; the figures set their own colours, so it adds nothing needed.

    The toolbar's camera saves the chart as PNG or SVG (the sidebar's choice, CHART_FORMAT),
    named after the model and the chart. plotly.js draws the file itself, from the plotly.js
    that Streamlit bundles, so it works offline. One camera button with a chosen format, not two
    buttons: an added toolbar button needs a JavaScript click handler, which a chart's config,
    sent as JSON, cannot carry.
    """
    fmt = st.session_state.get(CHART_FORMAT)
    config = {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": fmt if fmt in CHART_FORMATS else CHART_FORMATS[0],
            "filename": chart_file_name(key, st.session_state.get("model")),
            "scale": 2,  # a sharp PNG for slides; SVG ignores it
        },
    }
    st.plotly_chart(figure, key=key, theme=None, config=config)


def csv_download(label: str, build: Callable[[], str], name: str, key: str) -> None:
    """A button that downloads build()'s CSV text as <name>.csv; build runs on click only, so
    a keystroke does not pay for a table nobody downloads."""
    st.download_button(
        label,
        build,
        file_name=f"{_FILE_NAME_UNSAFE.sub('_', name)[:80]}.csv",
        mime="text/csv",
        key=key,
        on_click="ignore",
    )


def download_before_after(view: View, key: str = "download_before_after") -> None:
    """The "Before/after W_o" view's numbers as CSV: concat and attn_out of every layer, token
    and dimension (tfviz.export.before_after_csv)."""
    tr = view.trace
    csv_download(
        t("common.download.before_after"),
        functools.partial(before_after_csv, tr.concat, tr.attn_out, tr.labels, tr.n_heads),
        f"before_after_w_o_{view.entry.name}",
        key,
    )


def download_comparison(view: View, key: str = "download_comparison") -> None:
    """The "W_o off" view's numbers as CSV: the residual stream after every layer, learned
    beside switched (tfviz.export.comparison_csv)."""
    base, switched = view.base, view.trace
    csv_download(
        t("common.download.comparison"),
        functools.partial(comparison_csv, base.resid_out, switched.resid_out, base.labels),
        f"w_o_off_{view.entry.name}",
        key,
    )


def number_table(rows: list[dict], key: str) -> None:
    """Rows of a table, floats shown to 4 significant digits (gradient scores are ~1e-4)."""
    floats = [name for name, value in rows[0].items() if isinstance(value, float)] if rows else []
    config = {name: st.column_config.NumberColumn(format="%.4g") for name in floats}
    st.dataframe(rows, hide_index=True, key=key, column_config=config)


def index_picker(label: str, n: int, key: str, prefix: str, **kwargs) -> int:
    """A selectbox over 0..n-1 shown as prefix + number; a stale choice (other model) is dropped."""
    if st.session_state.get(key) not in (None, *range(n)):
        st.session_state.pop(key)
    return st.selectbox(
        label, range(n), format_func=lambda x: f"{prefix}{x}", key=key, width=200, **kwargs
    )


def what_is_this(*keys: str) -> None:
    """The method's citation and explanation (tfviz.ui.help), folded away."""
    with st.expander(t("common.what_is_this")):
        for key in keys:
            st.markdown(md_escape(HELP[key]))


# ---- text ----------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&=])")
# Where Streamlit's markdown (GFM) makes a link of plain text: "http://" and "https://", "www."
# and name@domain. It looks for them in the text after the escapes are resolved, so a backslash
# cannot stop it: an invisible WORD_JOINER inside each one does ("https:<WJ>//", "www<WJ>.",
# "a@<WJ>b.c"), and the text still reads the same.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=[-\w])", re.IGNORECASE)
WORD_JOINER = "\u2060"


def md_escape(text: str) -> str:
    """Text for a markdown-rendering element (st.error, st.caption, a label...) shown exactly as
    written and inert: no markdown, no HTML, no link (not even a bare address or e-mail address,
    which GFM would link). Every echo of what a user gave (a link's values, a file or model name,
    a typed sequence) goes through here, or into st.code / st.text."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, str(text)))


def cut(text: str, n: int) -> str:
    """text, or its first n - 3 characters and '...' if it is longer than n."""
    return text if len(text) <= n else text[: n - 3] + "..."


def metric_text(metric: str, value: float) -> str:
    """A task metric as shown: MAE to 3 decimals, accuracies as a percentage."""
    return f"{value:.3f}" if metric == "mae" else f"{100 * value:.1f}%"


def metric_delta(metric: str, diff: float) -> str:
    """A change of a task metric: MAE signed to 3 decimals, accuracies in percentage points."""
    if metric == "mae":
        return f"{diff:+.3f}"
    return t("common.points", diff=f"{100 * diff:+.1f}")
