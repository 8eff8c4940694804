"""The one compute-and-cache layer between the views and the library: every cached computation a
view needs (traces, embeddings, the W_o used, accuracies, sweeps, analyses, timelines, induction
scores, masked guesses, atlas tables) is asked for here, and the views draw what comes back.

Behind it is one cache (tfviz.serve.cache.ByteCache) with one byte budget, shared by every
session of the server:

- keys name the computation and what it depends on: a model's checkpoint digest stands for the
  model (the model itself is passed, never hashed), a file's (mtime, size) for its contents;
- each value is sized by its arrays' and tensors' bytes (sizeof), and the least recently used
  go first once the budget is passed, whatever computation made them: a decoder's traces and a
  toy model's sweeps share one budget, so memory has one owner;
- a value is made once however many sessions ask at once (single-flight);
- values are shared, not copied: every numpy array kept is made read-only (frozen), and a dict or
  list comes back as a fresh container of the same (read-only) values, so one session cannot
  change what another sees.

Process-wide objects that are not computations (the job manager, the class's tally, the
process's setup) are made once here too (once), and the models are loaded in tfviz.ui.models:
these two modules hold the app's only Streamlit cache decorators.

When every session has closed, the idle watcher (release_when_idle) hands the memory a class
left behind back to the system: the cache is cut to IDLE_BYTES, the free trace buffers are
dropped and glibc's free memory is returned (tfviz.serve.heap.trim_malloc).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import streamlit as st
import torch
from plotly.basedatatypes import BaseFigure
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from tfviz import get_task, hf
from tfviz.core import buffers, dissect, modes, wo
from tfviz.core.dissect import MeasureCache
from tfviz.core.interventions import NONE, Interventions
from tfviz.core.trace import TraceArrays, run_trace, w_o_used
from tfviz.experiments import atlas_stats, atlas_store, experiment
from tfviz.experiments.atlas_cells import LANGUAGE_FORMAT
from tfviz.hf import pretrained
from tfviz.hf.pretrained import PairSimilarity
from tfviz.refusal import Refusal, cause
from tfviz.serve.cache import ByteCache
from tfviz.serve.heap import collect_frozen, trim_malloc
from tfviz.training import timeline as tl
from tfviz.training.checkpoint import CheckpointError
from tfviz.training.evaluate import evaluate

if TYPE_CHECKING:  # tfviz.analysis is imported when an analysis is first asked for: the
    # first page does not wait for it
    import tfviz.analysis as analysis
    from tfviz.analysis import induction
    from tfviz.lessons.decoder import RepeatedSentence

V = TypeVar("V")

# One budget for everything the layer keeps. A toy trace is ~50 KB and a sweep's value a few
# bytes; a MiniLM trace ~0.5 MB for a sentence and ~31 MB at 256 word-pieces, a 30-layer
# decoder's ~100 MB at 200 pieces and 1.8 GB for Qwen2-0.5B at 1,024. The budget keeps every open
# session's current pair of a class's toy traces and a few of a decoder's, and is small enough
# that what a class leaves behind is a small part of a server's memory. The entry cap only
# bounds the bookkeeping of many tiny values (an embedding is 1.5 KB).
CACHE_BYTES = 192 << 20
CACHE_ENTRIES = 4096

# Once every session has closed, the cache is cut to IDLE_BYTES (the most recently used values
# stay: the next student's first page is often the last one's); checked every IDLE_POLL_SECONDS.
IDLE_BYTES = 32 << 20
IDLE_POLL_SECONDS = 0.5


@st.cache_resource(show_spinner=False)
def cache() -> ByteCache:
    """The server's one compute cache (a resource: one object, shared by every session)."""
    return ByteCache(CACHE_BYTES, CACHE_ENTRIES, trim=trim_malloc)


@st.cache_resource(show_spinner=False)
def once(name: str, _make: Callable[[], V]) -> V:
    """_make()'s value, made once per process under name and shared by every session (the job
    manager, the class's tally, the process's setup): an object, not a computation's value, so
    outside the byte budget."""
    return _make()


def cached(key: tuple, make: Callable[[], V]) -> V:
    """make()'s value for key from the one cache, made once however many sessions ask, kept
    frozen (freeze) and handed out through fresh containers (fresh). key's first item names the
    computation."""
    touch()
    return fresh(cache().get(key, lambda: freeze(make()), size=sizeof))


# ---- values: their bytes, frozen, fresh containers --------------------------------------------


# What sizeof and freeze meet most and can answer at once: numbers (Python's and numpy's).
SCALARS = (int, float, type(None), np.generic)
LEAVES = (*SCALARS, str)  # freeze's: nothing inside to make read-only


def sizeof(value: Any) -> int:
    """The bytes a value holds: its numpy arrays' and torch tensors' bytes, containers' and
    dataclasses' contents summed, a small constant for anything else (a float, a short string)."""
    # Numbers first: a sweep's or an atlas's rows hold tens of thousands, and each went through
    # every test below (one a failed attribute lookup) before reaching the constant.
    if isinstance(value, SCALARS):
        return 32
    if isinstance(value, np.ndarray):
        return value.nbytes + 112
    if isinstance(value, torch.nn.Module):  # a model copy (the OV sandbox's change of basis)
        return 112 + sum(t.nbytes for t in value.state_dict().values())
    if isinstance(value, BaseFigure):  # a plotly figure (cached_w_o_figure): its cells
        cells = [getattr(t, "z", None) for t in value.data]
        return 1024 + sum(np.asarray(z).nbytes for z in cells if z is not None)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes + 112  # a TraceArrays, or a torch tensor (its nbytes)
    if isinstance(value, str | bytes):
        return len(value) + 56
    if isinstance(value, dict):
        return 64 + sum(sizeof(k) + sizeof(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 56 + sum(sizeof(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return 56 + sum(sizeof(v) for v in vars(value).values())
    return 32


def freeze(value: V) -> V:
    """value with every numpy array in it (in containers and dataclasses too) made read-only, and
    returned: one value serves every session."""
    if isinstance(value, LEAVES):  # most of a big value's parts
        return value
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for item in value.values():
            freeze(item)
    elif isinstance(value, list | tuple):
        for item in value:
            freeze(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in vars(value).values():
            freeze(item)
    return value


def fresh(value: V) -> V:
    """value with its dicts and lists (nested in dicts, lists and tuples) copied: a view may add
    to what it was given without the next session seeing it; arrays are shared, read-only."""
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, tuple) and any(isinstance(v, dict | list | tuple) for v in value):
        return tuple(fresh(v) for v in value)
    return value


# ---- the server going idle ---------------------------------------------------------------------

_sessions: dict[str, float] = {}  # session id -> when it last ran
_watch_lock = threading.Lock()
_watcher: list[threading.Thread] = []


def touch() -> None:
    """The session asking is here (every cached computation calls this): the idle watcher,
    started the first time, releases memory once no session it has seen is open any more."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with _watch_lock:
        _sessions[ctx.session_id] = time.monotonic()
        if not _watcher:
            thread = threading.Thread(target=_watch, name="tfviz-idle", daemon=True)
            _watcher.append(thread)
            thread.start()


def _watch() -> None:
    while True:
        time.sleep(IDLE_POLL_SECONDS)
        if idle():
            release_when_idle()


def idle() -> bool:
    """True once, when every session seen since the last release has closed and none ran for
    IDLE_POLL_SECONDS (those closed are forgotten)."""
    if not runtime.exists():
        return False
    live = runtime.get_instance().is_active_session
    with _watch_lock:
        if not _sessions:
            return False
        if time.monotonic() - max(_sessions.values()) < IDLE_POLL_SECONDS:
            return False
        for session_id in [s for s in _sessions if not live(s)]:
            del _sessions[session_id]
        return not _sessions


def release_when_idle() -> int:
    """Hand back what a class left: closed sessions collected, the cache cut to IDLE_BYTES, the
    free trace buffers dropped, the W_o algebra's memo of weights (tfviz.core.wo: SVDs and mode
    maps, made again on demand) forgotten, malloc's free memory returned to the system. Returns
    the bytes of cache and buffers dropped."""
    # Closed sessions (their state, script threads, the values they held) are freed by the cyclic
    # collector, which Streamlit runs after a script run: none runs while the server is idle. And
    # what a freeze took of them (tfviz.serve.heap) only after an unfreeze.
    collect_frozen()
    dropped = cache().shrink(IDLE_BYTES) + buffers.release()
    wo.clear_cache()
    trim_malloc()
    return dropped


# ---- traces, embeddings, W_o, accuracy (what the View's views share) ---------------------------
# view: a tfviz.ui.view.View (not imported: the View's own module may ask for these).

ACCURACY_N = 256  # examples behind the "with and without the switch" accuracy


ACCURACY_SEED = 7_000_001  # fixed, so the two accuracies are measured on the same examples


def trace_for(view, text: str, iv: Interventions) -> TraceArrays:
    """The trace of text through the view's model with switches iv, cached by model digest,
    task, text and switches; shared by every session, so read-only."""
    key = ("trace", view.entry.digest, view.task.name, text, iv)
    return cached(key, lambda: run_trace(view.model, view.task, text, iv))


def cached_embedding(digest: str, text: str, iv: Interventions, model, task) -> np.ndarray:
    """One sentence's unit embedding (D,) under switches iv, keyed by model digest, text and
    switches (the digest stands for the model and task).

    Per sentence, not per pair: while sentence A is typed, sentence B's embedding is read from
    here, so a keystroke runs the model on A alone (bench/README.md, "MiniLM").
    """

    def make() -> np.ndarray:
        return pretrained.embed_each(model, task, (text,), iv)[0].cpu().numpy()

    return cached(("embedding", digest, text, iv), make)


def cached_w_o(digest: str, w_o_modes: tuple[str, ...], model) -> np.ndarray:
    """The W_o each layer applied, (L, D, D), per checkpoint and modes (not per sequence)."""
    return cached(("w_o", digest, w_o_modes), lambda: w_o_used(model, w_o_modes))


def cached_w_o_figure(
    digest: str, w_o_modes: tuple[str, ...], layer: int, title: str, lang: str, make: Callable
):
    """make()'s figure of one layer's W_o (plots.w_o_matrix), per checkpoint, modes, layer,
    title and language: the weights and the words alone decide it, and at GPT-2's size (768 x
    768) building and checking it was a large part of every keystroke (bench/README.md;
    Streamlit takes a built figure as it is). Shared by every session: nothing that draws or
    exports it changes it."""
    return cached(("w_o_figure", digest, w_o_modes, layer, title, lang), make)


def measures(name: str, digest: str, measure: Callable[[Hashable], Any]) -> MeasureCache:
    """A MeasureCache of the model with this digest (measure(key) -> a value), its values kept
    in the one cache under (name, digest, key): shared by every session, single-flight, and
    able to measure ahead in the background (warm)."""

    def make() -> MeasureCache:
        return dissect.MeasureCache(measure, store=Store((name, digest)))

    touch()
    return cache().get(("measures", name, digest), make, size=lambda _: 1024)


class Store:
    """The one cache as a MeasureCache's store: its keys under a prefix, its values as cached
    keeps them (frozen, handed out fresh)."""

    def __init__(self, prefix: tuple):
        self.prefix = prefix

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        return cached((*self.prefix, key), make)

    def __contains__(self, key: Hashable) -> bool:
        return (*self.prefix, key) in cache()


def accuracy_cache(digest: str, task_name: str, model) -> MeasureCache:
    """Switches -> the task metric on ACCURACY_N fixed random examples, per checkpoint: shared by
    every session, and thread-safe, so that a view can have it measure ahead (warm)."""

    task = get_task(task_name)

    def measure(iv: Interventions) -> dict[str, float]:
        return evaluate(model, task, ACCURACY_N, ACCURACY_SEED, interventions=iv)

    return measures(f"accuracy:{task_name}", digest, measure)


def similarity(view, text_a: str, text_b: str, iv: Interventions) -> PairSimilarity:
    """Two sentences compared with the learned model and under switches iv (sentence models;
    embeddings cached per sentence)."""

    def embeddings(switches: Interventions) -> np.ndarray:  # (2, D): A and B
        digest, model, task = view.entry.digest, view.model, view.task
        return np.stack(
            [cached_embedding(digest, text, switches, model, task) for text in (text_a, text_b)]
        )

    learned = embeddings(NONE)
    return PairSimilarity.of(learned, learned if iv.is_default else embeddings(iv))


def next_token_agreement(view, text: str, iv: Interventions) -> float:
    """The share of text's positions whose likeliest next token is the same under switches iv
    as learned (a decoder; traces cached)."""

    learned = trace_for(view, text, NONE)
    switched = learned if iv.is_default else trace_for(view, text, iv)
    return hf.agreement(learned.top_ids, switched.top_ids)


def similarity_for(view) -> PairSimilarity | None:
    """Sentences A and B compared under the view's switches; None unless both are valid.

    Sentence A's embeddings are pooled from the view's traces of it (learned and switched), which
    a keystroke in A has already run: running the model on A again for its embedding cost as
    much as the trace itself (bench/README.md). B's come from cached_embedding.
    """

    if view.text is None or view.text_b is None or view.trace is None or view.base is None:
        return None
    digest, model, task, iv = view.entry.digest, view.model, view.task, view.interventions

    def embeddings(trace: TraceArrays, switches: Interventions) -> np.ndarray:  # (2, D)
        b = cached_embedding(digest, view.text_b, switches, model, task)
        return np.stack([pretrained.trace_embedding(trace.output), b])

    learned = embeddings(view.base, NONE)
    return PairSimilarity.of(learned, learned if iv.is_default else embeddings(view.trace, iv))


def accuracy_for(view, iv: Interventions) -> dict[str, float]:
    """The view's model's task metric with switches iv (cached)."""
    return dict(accuracy_cache(view.entry.digest, view.task.name, view.model)(iv))


# ---- what the other views ask for ------------------------------------------------------------
# A leading underscore names an argument the key leaves out: the digest (or the file's stamp)
# stands for it, as in the views' calls before this layer owned them.

ANALYSIS_N = 256  # fresh examples behind importance, ablation and the keep-top-k curve
TIMELINE_N = 64  # fresh examples behind the head importance at each step of a timeline
WEIGHT_PARTS = ("ov", "mixing")  # the Analysis sections drawn from the weights alone


def cached_flow(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> dict[str, np.ndarray]:
    """Norm-based attention and attention rollout of one sequence with the switches, as numpy."""
    import tfviz.analysis as analysis

    key = ("flow", digest, task_name, text, iv)
    return cached(key, lambda: analysis.attention_flow(_model, _task, text, interventions=iv))


def examples(task_name: str, text: str | None, task):
    """(task, batch) an analysis runs on: a toy task's fresh examples (batch None), or a
    decoder's typed text as one example."""
    if text is None:
        return task_name, None
    return task, task.batch_from_texts([text])


def cached_importance(
    digest: str, task_name: str, w_o, _model, text: str | None = None, _task=None
) -> analysis.HeadImportance:
    """Michel et al.'s head importance on ANALYSIS_N fresh examples, per checkpoint and W_o mode
    (w_o: an Interventions' w_o, a mode or (layer, mode) pairs); a decoder's on its typed text
    (text, with its task _task: the text's own next tokens are the targets)."""
    import tfviz.analysis as analysis

    def make() -> analysis.HeadImportance:
        task, batch = examples(task_name, text, _task)
        return analysis.head_importance(_model, task, n=ANALYSIS_N, w_o=w_o, batch=batch)

    return cached(("importance", digest, task_name, w_o, text), make)


def cached_top_k_curve(
    digest: str, task_name: str, w_o, kind: str, _model, text: str | None = None, _task=None
) -> np.ndarray:
    """The metric keeping the k heads ranked highest by one score, for every k (computed once)."""
    import tfviz.analysis as analysis

    def make() -> np.ndarray:
        scores = cached_importance(digest, task_name, w_o, _model=_model, text=text, _task=_task)
        task, batch = examples(task_name, text, _task)
        return analysis.keep_top_k_curve(
            _model, task, scores.scores(kind), n=ANALYSIS_N, w_o=w_o, batch=batch
        )

    return cached(("top_k", digest, task_name, w_o, kind, text), make)


def cached_ablation(
    digest: str,
    task_name: str,
    text: str | None,
    w_o,
    head_layer: int,
    head: int,
    _model,
    _task=None,
) -> analysis.AblationComparison:
    """One head zeroed before and after W_o, on the typed text (or ANALYSIS_N fresh examples);
    _task: a decoder's (tfviz.hf.NextTokenTask), whose targets are the text's next tokens."""
    import tfviz.analysis as analysis

    def make() -> analysis.AblationComparison:
        task = _task or get_task(task_name)
        batch = None if text is None else task.batch_from_texts([text])
        return analysis.compare_ablation(
            _model, task, head_layer, head, batch=batch, n=ANALYSIS_N, w_o=w_o
        )

    return cached(("ablation", digest, task_name, text, w_o, head_layer, head), make)


def weight_views(model, w_o, part: str) -> dict:
    """The numbers one weights-only section draws: "ov" (OV spectra and composition scores) or
    "mixing" (W_o's head shares and mixing number), for the w_o switch."""
    import tfviz.analysis as analysis

    if part == "ov":
        ov = analysis.ov_spectra(model, w_o)
        return {  # the (L, H, D, D) circuits themselves are not drawn: never formed
            "singular_values": ov.singular_values,
            "effective_rank": ov.effective_rank,
            "numerical_rank": ov.numerical_rank,
            "frobenius": ov.frobenius,
            "rtol": ov.rtol,
            "composition": analysis.composition_scores(model, w_o),
        }
    if part == "mixing":
        mixing = analysis.w_o_mixing(model, w_o)
        return {"shares": mixing.shares, "mixing": mixing.mixing}
    raise ValueError(f"part must be one of {WEIGHT_PARTS}, got {part!r}")


def weight_views_cache(digest: str, _model) -> MeasureCache:
    """(w_o, part) -> weight_views(model, w_o, part), read-only, per checkpoint: the numbers
    depend on the weights and the W_o switch only, so one per server, computed once and filled
    ahead in the background (the Analysis view warms the sidebar's switch)."""

    def compute(key) -> dict:
        w_o, part = key
        return weight_views(_model, w_o, part)

    return measures("weight_views", digest, compute)


def cached_neuron(
    view, trace: TraceArrays, layer: int, head: int, query: int, rotated: bool
) -> analysis.NeuronView:
    """The neuron view of one head and query from a trace of the view's model (its text and
    switches in the key): q, the keys, their product, the scores and the softmax."""
    from tfviz.analysis import neuron

    def make() -> neuron.NeuronView:
        return neuron.neuron_view_of_trace(
            view.model, view.task, trace, layer, head, query, rotated=rotated
        )

    key = ("neuron", view.entry.digest, view.task.name, trace.text, trace.interventions)
    return cached((*key, layer, head, query, rotated), make)


def cached_shares(view, trace: TraceArrays) -> analysis.HeadOutputShares:
    """Each head's share of attn_out in a trace of the view's model (its text and switches in
    the key), with the map its switches applied."""
    from tfviz.analysis import shares

    key = ("shares", view.entry.digest, view.task.name, trace.text, trace.interventions)
    return cached(key, lambda: shares.output_shares_of_trace(view.model, trace))


def cached_spectrum(digest: str, _model) -> np.ndarray:
    """(L, D) singular values of each layer's learned W_o, per checkpoint."""
    return cached(("spectrum", digest), lambda: dissect.singular_values(_model))


def cached_induction(digest: str, iv: Interventions, _model, _ids) -> induction.InductionScores:
    """The model's induction scores on the probe under switches iv (per digest: the probe is
    fixed)."""
    from tfviz.analysis import induction

    return cached(("induction", digest, iv), lambda: induction.measure_induction(_model, _ids, iv))


def cached_pattern(
    digest: str, iv: Interventions, layer: int, head: int, _model, _ids
) -> np.ndarray:
    """One head's (T, T) attention on the induction probe's first sequence, switched by iv."""

    def make() -> np.ndarray:
        with torch.no_grad():
            out = _model(_ids[:1].to(_model.device), None, iv, trace=True)
        return out.trace.layers[layer].attn[0, head].float().cpu().numpy()

    return cached(("induction_pattern", digest, iv, layer, head), make)


def cached_answer(
    digest: str, text: str, iv: Interventions, mask: str, _model, _head, _tokenizer
) -> hf.MaskAnswer:
    """hf.fill_mask (a masked-LM model's top guesses) keyed by model digest, text, switches and
    marker."""

    def make() -> hf.MaskAnswer:
        return hf.fill_mask(_model, _head, _tokenizer, text, iv, mask=mask, k=hf.mlm.TOP_K)

    return cached(("mask", digest, text, iv, mask), make)


def cached_repeat(digest: str, sentence: str, _model, _task) -> RepeatedSentence:
    """The sentence typed twice through the model (tfviz.lessons.decoder.repeated_sentence), per
    model digest and sentence; a ValueError is raised again, not cached."""
    from tfviz.lessons.decoder import repeated_sentence

    key = ("repeat", digest, sentence)
    return cached(key, lambda: repeated_sentence(_model, _task, sentence))


def cached_timeline(
    path: str, mtime_ns: int, size: int, digest: str, _config
) -> tuple[tl.Timeline | None, Refusal | str]:
    """(timeline, "") for a model's timeline file, or (None, why it cannot be read: the
    CheckpointError or the OSError's cause (tfviz.refusal.cause), worded in each session's
    language). Shared by every session: read-only (model_at builds a fresh model from it)."""

    def make() -> tuple[tl.Timeline | None, Refusal | str]:
        try:
            return tl.load_timeline(path, _config), ""
        except CheckpointError as e:
            return None, e.detached()
        except OSError as e:
            return None, cause(e)

    return cached(("timeline", path, mtime_ns, size, digest), make)


def cached_timeline_scores(
    timeline_key: tuple, task_name: str, _timeline, _config, _task
) -> tl.Scores:
    """W_o's mixing and head importance at every kept step, once per timeline: they do not
    depend on the typed sequence, so a slider move need not compute them."""
    key = ("timeline_scores", timeline_key, task_name)
    return cached(key, lambda: tl.scores(_timeline, _config, _task, n=TIMELINE_N))


def cached_timeline_attention(
    timeline_key: tuple, task_name: str, text: str, _timeline, _config
) -> tuple[list[str], np.ndarray]:
    """(labels, (S, L, H, T, T)): the typed sequence's attention at every kept step, once per
    timeline and sequence. All steps at once: a small forward pass each for a bundled-size
    model, so every slider move is a lookup; one step at a time, a move to a new step was
    measurably slower than a move back (bench/timeline_slider.py)."""

    def make() -> tuple[list[str], np.ndarray]:
        task = get_task(task_name)
        steps = range(len(_timeline.steps))
        each = [tl.attention_at(_timeline, i, _config, task, text) for i in steps]
        return each[0][0], np.stack([attn for _, attn in each])

    return cached(("timeline_attention", timeline_key, task_name, text), make)


def cached_precomputed(task_name: str) -> experiment.ExperimentResult | None:
    """The shipped experiment result for a task (models/experiments/<task>.json), or None."""
    return cached(("precomputed", task_name), lambda: experiment.load_precomputed(task_name))


def cached_atlas(path: str, stamp: tuple) -> tuple[dict, dict]:
    """The W_o atlas's rows and their analysis; stamp (mtime, size) makes a rewritten file read
    again."""

    def make() -> tuple[dict, dict]:
        rows = atlas_store.read_rows(path)
        return rows, atlas_stats.analyse(rows)

    return cached(("atlas", path, stamp), make)


def cached_language(path: str, stamp: tuple) -> tuple[dict, dict]:
    """The language atlas's rows and their analysis; stamp (mtime, size) makes a file that grew
    read again (a sweep appends to it as it goes)."""

    def make() -> tuple[dict, dict]:
        rows = atlas_store.read_rows(path, LANGUAGE_FORMAT)
        return rows, atlas_stats.analyse_language(rows)

    return cached(("language_atlas", path, stamp), make)


# ---- the OV sandbox and the logit lens ---------------------------------------------------------

# The sandbox changes the basis in a deep copy of the model, kept in the one cache: only for
# models up to this many parameters (MiniLM's 23 M: about 90 MB; a 135 M decoder's copy would be
# over half a GB), so a copy never crowds out a class's traces.
SANDBOX_MAX_PARAMS = 30_000_000
LENS_MAX_POSITIONS = 12  # the logit lens reads the text's last positions: a readable table
UNDO_EXAMPLES = 64  # a toy task's fresh examples behind the linear-undo fits (> D + 1 tokens)


def sandbox_allowed(model) -> bool:
    return sum(p.numel() for p in model.parameters()) <= SANDBOX_MAX_PARAMS


def cached_basis_change(view, layer: int, head: int, kind: str, seed: int):
    """analysis.change_basis's BasisChange (with its model copy), per digest, layer, head, kind
    and seed; the shared model is never changed."""
    import tfviz.analysis as analysis

    key = ("basis_change", view.entry.digest, layer, head, kind, seed)
    return cached(key, lambda: analysis.change_basis(view.model, layer, head, kind, seed))


def cached_basis_outputs(view, layer: int, head: int, kind: str, seed: int) -> dict[str, float]:
    """The largest output difference the change of basis makes on the view's text, with W_o
    learned and switched to identity (keyed by their mode names)."""
    import tfviz.analysis as analysis

    def make() -> dict[str, float]:
        changed = cached_basis_change(view, layer, head, kind, seed).model
        ids, pad_mask = view.task.encode_batch([view.text], device=view.model.device)
        return {
            mode: analysis.output_difference(view.model, changed, ids, pad_mask, w_o=mode)
            for mode in (modes.LEARNED, modes.IDENTITY)
        }

    key = ("basis_outputs", view.entry.digest, layer, head, kind, seed, view.text)
    return cached(key, make)


def cached_head_ov(digest: str, layer: int, head: int, w_o: str, _model):
    import tfviz.analysis as analysis

    return cached(
        ("head_ov", digest, layer, head, w_o), lambda: analysis.head_ov(_model, layer, head, w_o)
    )


def cached_write_spaces(digest: str, w_o, _model):
    """analysis.write_spaces for the w_o switch ("learned", "identity" or a mode per layer)."""
    import tfviz.analysis as analysis

    key = ("write_spaces", digest, w_o if isinstance(w_o, str) else tuple(sorted(w_o.items())))
    return cached(key, lambda: analysis.write_spaces(_model, w_o))


def cached_linear_undo(view, layer: int, examples: bool):
    """analysis.undo_by_linear_map for one layer, on UNDO_EXAMPLES fresh examples of a toy task
    (examples=True) or on the view's text."""
    import tfviz.analysis as analysis

    def make():
        if examples:
            rng = np.random.default_rng(analysis.ANALYSIS_SEED)
            batch = view.task.sample(UNDO_EXAMPLES, rng, None, None)
            ids, pad_mask = batch.ids, batch.pad_mask
        else:
            ids, pad_mask = view.task.encode_batch([view.text])
        return analysis.undo_by_linear_map(view.model, ids, layer, pad_mask)

    text = None if examples else view.text
    return cached(("linear_undo", view.entry.digest, view.task.name, layer, text), make)


def cached_lens(view, positions: tuple[int, ...]):
    """analysis.compare_lens (learned and under the switches) at positions of the view's text;
    raises analysis.LensRefused for a model with no vocabulary."""
    import tfviz.analysis as analysis

    def make():
        return analysis.compare_lens(
            view.model, view.task, view.text, view.interventions, positions=positions
        )

    key = ("lens", view.entry.digest, view.task.name, view.text, view.interventions, positions)
    return cached(key, make)


def cached_contributions(view, position: int | None = None, target: int | str | None = None):
    """analysis.compare_contributions on the view's text: at position (None: a decoder's last, a
    masked LM's masked one), for target (None: the learned model's likeliest token; NEXT: the
    text's own next token); raises LensRefused or InputError."""
    import tfviz.analysis as analysis

    def make():
        return analysis.compare_contributions(
            view.model, view.task, view.text, view.interventions, position, target
        )

    key = ("contributions", view.entry.digest, view.task.name, view.text, view.interventions)
    return cached((*key, position, target), make)
