"""What every view shares: the View it draws from, the switches, cached traces, chart helpers.

The caches here are keyed by checkpoint digest, sequence and switches (the model itself is
passed unhashed as _model) and hold numpy only, so one trace serves every session that asks for
it. Helpers that only format (md_escape, metric_text) or draw one kind of widget (chart,
number_table, index_picker) live here so that every view shows numbers and text the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import streamlit as st

from tfviz import get_task
from tfviz.checkpoint import CheckpointMeta
from tfviz.evaluate import evaluate
from tfviz.interventions import Interventions, head_name
from tfviz.pretrained import PairSimilarity, compare_similarity
from tfviz.snapshot import TraceArrays, run_trace, w_o_used
from tfviz.tasks import Task
from tfviz.ui.help import HELP
from tfviz.ui.models import ModelEntry

W_O_LABELS = {"learned": "learned", "identity": "off (identity)", "zero": "zero"}
ALL_LAYERS = "all layers"
POLL_SECONDS = 0.5  # how often a running job's progress is redrawn
ACCURACY_N = 256  # examples behind the "with and without the switch" accuracy
ACCURACY_SEED = 7_000_001  # fixed, so the two accuracies are measured on the same examples


# ---- the sidebar's switches and what the views draw from -----------------------------------


def describe(iv: Interventions) -> str:
    """The sidebar's switches in words, e.g. "W_o off (identity) in layer 1; zeroed L0H2"."""
    parts = []
    if isinstance(iv.w_o, str):
        if iv.w_o != "learned":
            parts.append(f"W_o {W_O_LABELS[iv.w_o]} in {ALL_LAYERS}")
    else:
        parts += [f"W_o {W_O_LABELS[mode]} in layer {layer}" for layer, mode in iv.w_o]
    if iv.ablate_heads:
        parts.append("zeroed " + ", ".join(head_name(lay, h) for lay, h in iv.ablate_heads))
    return "; ".join(parts) or "learned W_o"


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


NEEDS_ANSWERS = (
    "{what} is not shown for {name}: it scores a task's right answers (a loss or an accuracy), "
    "and a sentence encoder has none. Pick a toy model for it."
)

TRAINS_TOYS = (
    "{what} is not shown for {name}: it trains small models on a toy task, and {name} comes "
    "pretrained, with no toy task. Pick a toy model for it."
)


def toy_only(view: View, what: str, why: str = NEEDS_ANSWERS) -> bool:
    """True, after one line saying why, when the view's model is a sentence encoder and so
    cannot show `what`; why: that line, with {what} and {name} (the model) filled in."""
    if not view.is_sentence:
        return False
    st.info(md_escape(why.format(what=what, name=view.entry.name)))
    return True


# ---- cached computations -------------------------------------------------------------------


# ~50 KB a trace (W_o and the per-head terms are derived when shown, not stored): 96 keep every
# open session's current pair (learned, switched) of a class of 40 in about 5 MB.
# A MiniLM trace of 128 word-pieces is ~8 MB ((L, H, T, T) attention and four (L, T, D) sites);
# a typical sentence's (~15 pieces) is ~0.5 MB.
@st.cache_data(show_spinner=False, max_entries=96)
def cached_trace(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> TraceArrays:
    """run_trace keyed by model digest, task, sequence and switches (model and task are not
    hashed: the digest and task name stand for them)."""
    return run_trace(_model, _task, text, iv)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_similarity(
    digest: str, text_a: str, text_b: str, iv: Interventions, _model, _task
) -> PairSimilarity:
    """Two sentences' cosine similarity, learned and switched (sentence models only)."""
    return compare_similarity(_model, _task, text_a, text_b, iv)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_w_o(digest: str, w_o_modes: tuple[str, ...], _model) -> np.ndarray:
    """The W_o each layer applied, (L, D, D), per checkpoint and modes (not per sequence)."""
    return w_o_used(_model, w_o_modes)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_accuracy(digest: str, task_name: str, iv: Interventions, _model) -> dict[str, float]:
    """The task metric on ACCURACY_N fixed random examples with the switches applied."""
    return evaluate(_model, get_task(task_name), ACCURACY_N, ACCURACY_SEED, interventions=iv)


def trace_for(view: View, text: str, iv: Interventions) -> TraceArrays:
    """The trace of text through the view's model with switches iv (cached)."""
    return cached_trace(
        view.entry.digest, view.task.name, text, iv, _model=view.model, _task=view.task
    )


def similarity_for(view: View) -> PairSimilarity | None:
    """Sentences A and B compared under the view's switches (cached); None unless both are valid."""
    if view.text is None or view.text_b is None:
        return None
    return cached_similarity(
        view.entry.digest,
        view.text,
        view.text_b,
        view.interventions,
        _model=view.model,
        _task=view.task,
    )


def accuracy_for(view: View, iv: Interventions) -> dict[str, float]:
    """The view's model's task metric with switches iv (cached)."""
    return cached_accuracy(view.entry.digest, view.task.name, iv, _model=view.model)


# ---- drawing -------------------------------------------------------------------------------


def chart(figure, key: str) -> None:
    """A plotly figure, full width, without Streamlit's theme.

    Applying the theme in the browser cost about 250 ms per keystroke on the Attention tab (three
    charts) on a 2-core machine; the figures set their own colours, so it adds nothing needed.
    """
    st.plotly_chart(figure, key=key, theme=None)


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
    with st.expander("What is this?"):
        for key in keys:
            st.markdown(md_escape(HELP[key]))


# ---- text ----------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&])")


def md_escape(text: str) -> str:
    """Text for a markdown-rendering element (st.error, st.caption...) shown exactly as written."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def cut(text: str, n: int) -> str:
    """text, or its first n - 3 characters and '...' if it is longer than n."""
    return text if len(text) <= n else text[: n - 3] + "..."


def metric_text(metric: str, value: float) -> str:
    """A task metric as shown: MAE to 3 decimals, accuracies as a percentage."""
    return f"{value:.3f}" if metric == "mae" else f"{100 * value:.1f}%"


def metric_delta(metric: str, diff: float) -> str:
    """A change of a task metric: MAE signed to 3 decimals, accuracies in percentage points."""
    return f"{diff:+.3f}" if metric == "mae" else f"{100 * diff:+.1f} points"
