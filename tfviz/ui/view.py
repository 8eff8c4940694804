"""What the views draw from: the View (model, sequence, switches, traces), the per-model widget
keys, and the caches behind it.

The caches are keyed by checkpoint digest, sequence and switches (the model itself is passed
unhashed as _model) and hold numpy only, so one trace serves every session that asks for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import streamlit as st

from tfviz import get_task, hf
from tfviz.core import dissect
from tfviz.core.interventions import NONE, Interventions
from tfviz.core.tasks import Task
from tfviz.core.trace import TraceArrays, run_trace, w_o_used
from tfviz.hf import pretrained
from tfviz.hf.pretrained import PairSimilarity
from tfviz.serve.cache import ByteCache
from tfviz.training.checkpoint import CheckpointMeta
from tfviz.training.evaluate import evaluate
from tfviz.ui import state
from tfviz.ui.i18n import t
from tfviz.ui.models import ModelEntry
from tfviz.ui.text import md_escape

ACCURACY_N = 256  # examples behind the "with and without the switch" accuracy


ACCURACY_SEED = 7_000_001  # fixed, so the two accuracies are measured on the same examples


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
        state.forget(key)


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
        """A pretrained text model: no answer and no task loss; two sentences (an encoder) or
        one text read left to right (a decoder, is_decoder)."""
        return self.task.kind == "sentence"

    @property
    def is_decoder(self) -> bool:
        """A pretrained decoder (tfviz.hf.NextTokenTask): one text, next tokens, a
        continuation; what a switch changes is measured by next-token agreement."""
        return getattr(self.task, "causal", False)


# Catalogue keys of the reasons a view is toy-only; each takes {what} and {name} (the model).
NEEDS_ANSWERS = "common.toy_only.needs_answers"


TRAINS_TOYS = "common.toy_only.trains_toys"


def toy_only(view: View, what: str, why: str = NEEDS_ANSWERS) -> bool:
    """True, after one line saying why, when the view's model is a sentence encoder and so
    cannot show `what` (already in the student's language); why: the reason's catalogue key."""
    if not view.is_sentence:
        return False
    st.info(md_escape(t(why, what=what, name=view.entry.name)))
    return True


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


# Every session's traces in one cache, bounded by bytes (tfviz.serve.cache): a toy trace is
# ~50 KB (96 keep every open session's current pair, learned and switched, for a class of 40),
# a MiniLM trace ~0.5 MB for a sentence and ~31 MB at 256 word-pieces, a 30-layer decoder's
# ~100 MB at 200 pieces and 1.8 GB for Qwen2-0.5B at 1,024. Caches bounded by entries alone
# (16 traces, 4 of long texts) could hold many GB of a decoder's. A miss costs one forward pass.
TRACE_CACHE_BYTES = 256 << 20
TRACE_CACHE_ENTRIES = 96


@st.cache_resource(show_spinner=False)
def trace_cache() -> ByteCache[TraceArrays]:
    """The server's one trace cache (a resource: one object, shared by every session)."""
    return ByteCache(TRACE_CACHE_BYTES, TRACE_CACHE_ENTRIES)


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
    """The trace of text through the view's model with switches iv, cached by model digest,
    task, text and switches (the digest and task name stand for the model and task); shared by
    every session, so read-only."""
    key = (view.entry.digest, view.task.name, text, iv)

    def make() -> TraceArrays:
        return shared_trace(run_trace(view.model, view.task, text, iv))

    return trace_cache().get(key, make, size=lambda trace: trace.nbytes)


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


def next_token_agreement(view: View, text: str, iv: Interventions) -> float:
    """The share of text's positions whose likeliest next token is the same under switches iv
    as learned (a decoder; traces cached)."""
    learned = trace_for(view, text, NONE)
    switched = learned if iv.is_default else trace_for(view, text, iv)
    return hf.agreement(learned.top_ids, switched.top_ids)


def similarity_for(view: View) -> PairSimilarity | None:
    """Sentences A and B compared under the view's switches; None unless both are valid.

    Sentence A's embeddings are pooled from the view's traces of it (learned and switched), which
    a keystroke in A has already run: running the model on A again for its embedding cost as
    much as the trace itself (bench/README.md). B's come from cached_embedding.
    """
    if view.text is None or view.text_b is None or view.trace is None or view.base is None:
        return None
    digest, model, task, iv = view.entry.digest, view.model, view.task, view.interventions

    def embeddings(trace: TraceArrays, switches: Interventions) -> np.ndarray:  # (2, D)
        b = cached_embedding(digest, view.text_b, switches, _model=model, _task=task)
        return np.stack([pretrained.trace_embedding(trace.output), b])

    learned = embeddings(view.base, NONE)
    return PairSimilarity.of(learned, learned if iv.is_default else embeddings(view.trace, iv))


def accuracy_for(view: View, iv: Interventions) -> dict[str, float]:
    """The view's model's task metric with switches iv (cached)."""
    return dict(accuracy_cache(view.entry.digest, view.task.name, _model=view.model)(iv))
