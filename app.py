"""tfviz web app: pick a model, type a sequence, and see inside multi-head attention and W_o.

Run with `streamlit run app.py`. This script only composes widgets, library calls and charts:
numbers come from tfviz.compare, figures from tfviz.plots, training from tfviz.jobs; it holds no
torch code. Each checkpoint is loaded once per process (st.cache_resource) and shared by every
browser session, so it is never changed: the W_o switch and head ablation are forward arguments.
Traces are cached per (checkpoint digest, sequence, switches) and hold numpy only. An uploaded
checkpoint is validated before use and kept in its session only; training and experiment reruns
run in worker threads under one server-wide cap (tfviz.jobs).

The tabs are lazy (only the open one runs), so a keystroke redraws only the view being looked at.
A new view is one function taking a View, added to TABS.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

import tfviz.analysis as analysis
import tfviz.experiment as experiment
import tfviz.experiment_jobs as experiment_jobs
from tfviz import CheckpointError, compare, get_task, jobs, list_tasks, load_checkpoint, plots
from tfviz.checkpoint import CheckpointMeta, file_digest, safe_model_path
from tfviz.model import W_O_MODES
from tfviz.tasks import Task
from tfviz.trainer import resolve_device

ROOT = Path(__file__).resolve().parent
BUNDLED_DIR = ROOT / "models"
DEFAULT_MODEL = "reverse"
W_O_LABELS = {"learned": "learned", "identity": "off (identity)", "zero": "zero"}
TRAIN_W_O_LABELS = {"learned": "learn W_o", "identity": "no W_o (identity)"}
ALL_LAYERS = "all layers"
POLL_SECONDS = 0.5
MAX_TYPED = 256  # the text box refuses more; the task's own limit is checked with a message
# Widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = ("w_o_scope", "ablate", "attn_layer", "attn_head", "wo_layer", "wo_token")
UPLOAD_MB_ENV = "TFVIZ_MAX_UPLOAD_MB"
DEFAULT_UPLOAD_MB = 20  # as server.maxUploadSize in .streamlit/config.toml
MB = 1024 * 1024  # Streamlit's megabyte
MAX_UPLOADS = 3  # models one session holds; one more upload drops the oldest
UPLOADS = "_uploads"  # session_state: {"upload:<sha256>": Upload}, in this session only
UPLOAD_MESSAGE = "_upload_message"  # session_state: (kind, text) about the latest upload
SHOWN_NAME_CHARS = 60  # an uploaded file's name in the picker is cut to this
MESSAGE_NAME_CHARS = 120  # and in messages about it

st.set_page_config(page_title="tfviz: inside multi-head attention", layout="wide")


@st.cache_resource(show_spinner=False)
def setup_process() -> str:
    """Once per process: torch threads, and the device every model is loaded onto."""
    # torch's thread count is process-wide, so it is set here once, not in the training thread.
    # These models are tiny and run fastest on one thread; then each training job and each page
    # request takes about one core, which is what the jobs-per-core cap assumes.
    jobs.limit_torch_threads(1)
    device = str(resolve_device("auto"))
    # Streamlit runs a full gc.collect() after every script run; with torch and plotly imported
    # that walk took ~90 ms of each keystroke (bench/README.md). Freezing what exists now (the
    # libraries, never garbage) leaves only each run's own objects for it to scan.
    gc.collect()
    gc.freeze()
    return device


@st.cache_resource(show_spinner=False)
def job_manager() -> jobs.JobManager:
    """One manager for the process, so the cap on concurrent training jobs holds for everyone."""
    return jobs.JobManager()


# ---- models ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEntry:
    """A checkpoint the picker offers."""

    key: str  # "bundled:reverse" or "yours:my_model", unique in the picker
    name: str
    source: str  # "bundled" or "yours"
    path: str
    digest: str  # sha256 of the file: the cache key of everything computed from it


@st.cache_data(show_spinner=False, max_entries=1024)
def file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """Digest of a file, recomputed only when its modification time or size changes."""
    return file_digest(path)


@st.cache_resource(show_spinner=False, max_entries=256)
def load_model(path: str, digest: str, device: str):
    """(model, meta) for a checkpoint, or (None, why it is unusable). Shared: never mutate it."""
    try:
        return load_checkpoint(path, device=device)
    except (CheckpointError, OSError) as e:
        return None, str(e)


def bundled_names() -> frozenset[str]:
    return frozenset(p.stem for p in BUNDLED_DIR.glob("*.safetensors"))


def list_models(device: str) -> tuple[list[ModelEntry], list[str]]:
    """Every usable checkpoint (bundled first, then the user models folder) and the skipped ones."""
    entries, problems = [], []
    for folder, source in ((BUNDLED_DIR, "bundled"), (jobs.user_models_dir(ROOT), "yours")):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.safetensors")):
            try:
                stat = path.stat()
                digest = file_sha256(str(path), stat.st_mtime_ns, stat.st_size)
            except OSError as e:
                problems.append(f"skipped {path.name}: {e.strerror}")
                continue
            model, meta = load_model(str(path), digest, device)
            if model is None:
                problems.append(f"skipped {path.name}: {meta}")
                continue
            entries.append(
                ModelEntry(f"{source}:{path.stem}", path.stem, source, str(path), digest)
            )
    return entries, problems


# ---- uploads: models only the uploading session sees ------------------------------------------


@dataclass(frozen=True)
class Upload:
    """A model uploaded in this session: kept in its session_state, never written to disk."""

    entry: ModelEntry
    model: object
    meta: CheckpointMeta


def upload_limit_mb() -> int:
    """Largest upload in MB: $TFVIZ_MAX_UPLOAD_MB (else 20), capped by server.maxUploadSize.

    Streamlit's server refuses bodies over server.maxUploadSize whatever a widget says, so a
    larger setting would only promise what the server will not take.
    """
    server_mb = int(st.get_option("server.maxUploadSize"))
    raw = os.environ.get(UPLOAD_MB_ENV, "").strip()
    if not raw:
        return min(DEFAULT_UPLOAD_MB, server_mb)
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 1024:
        raise ValueError(
            f"{UPLOAD_MB_ENV} must be a whole number of MB from 1 to 1024, got {raw!r}"
        )
    return min(int(raw), server_mb)


def cut(text: str, n: int) -> str:
    """text, or its first n - 3 characters and '...' if it is longer than n."""
    return text if len(text) <= n else text[: n - 3] + "..."


def shown_name(file_name: str) -> str:
    """An uploaded file's name for the picker: without .safetensors, cut to SHOWN_NAME_CHARS."""
    stem = file_name[: -len(".safetensors")] if file_name.endswith(".safetensors") else file_name
    return cut(stem or file_name, SHOWN_NAME_CHARS)


def read_upload(file, device: str, limit_mb: int) -> Upload:
    """Check an UploadedFile and build its model; CheckpointError saying what is wrong if not.

    The size is checked before the bytes are read, the parameter budget before a model is built
    (jobs.load_upload), and everything else by load_checkpoint.
    """
    if file.size > limit_mb * MB:
        raise CheckpointError(
            f"the file is {file.size / MB:.1f} MB; uploads may be at most {limit_mb} MB"
        )
    data = file.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    key = f"upload:{digest}"
    known = st.session_state.get(UPLOADS, {}).get(key)
    if known is not None:
        return known
    model, meta = jobs.load_upload(data, max_bytes=limit_mb * MB, device=device)
    entry = ModelEntry(key, shown_name(file.name), "uploaded", "", digest)
    return Upload(entry=entry, model=model, meta=meta)


def on_upload(device: str, limit_mb: int) -> None:
    """The uploader's on_change: check the new file once and, if it is good, pick it."""
    st.session_state.pop(UPLOAD_MESSAGE, None)
    file = st.session_state.get("upload")
    if file is None:
        return  # taken out of the uploader: the model stays in this session's picker
    name = cut(file.name, MESSAGE_NAME_CHARS)  # shown literally: the message is md_escaped
    try:
        upload = read_upload(file, device, limit_mb)
    except CheckpointError as e:
        st.session_state[UPLOAD_MESSAGE] = ("error", f"{name} was not loaded: {e}")
        return
    except Exception as e:  # a hostile file must get a message, never a traceback
        st.session_state[UPLOAD_MESSAGE] = (
            "error",
            f"{name} was not loaded: it could not be read as a tfviz model ({type(e).__name__})",
        )
        return
    uploads = st.session_state.setdefault(UPLOADS, {})
    uploads.pop(upload.entry.key, None)
    uploads[upload.entry.key] = upload  # newest last
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))
    st.session_state["model"] = upload.entry.key
    c = upload.meta.config
    st.session_state[UPLOAD_MESSAGE] = (
        "success",
        f"Loaded {name}: a {upload.meta.task} model, D={c.d_model}, {c.n_heads} heads, "
        f"{c.n_layers} layers. Only this browser tab sees it; it is gone when the tab closes.",
    )


def upload_box(device: str) -> None:
    """The sidebar's uploader and what happened to the last file put into it."""
    try:
        limit_mb = upload_limit_mb()
    except ValueError as e:  # a bad setting on the server
        st.error(md_escape(f"Uploads are not available: {e}"))
        return
    st.file_uploader(
        "Upload a model (.safetensors)",
        type=["safetensors"],
        key="upload",
        max_upload_size=limit_mb,
        on_change=on_upload,
        args=(device, limit_mb),
        help=f"A tfviz checkpoint of at most {limit_mb} MB and {jobs.MAX_PARAMS:,} parameters. "
        "It is checked before use, never unpickled, never saved on the server, and only "
        "this browser tab can see it.",
    )
    message = st.session_state.get(UPLOAD_MESSAGE)
    if message is not None:
        kind, text = message
        (st.error if kind == "error" else st.success)(md_escape(text))


# ---- cached computations -------------------------------------------------------------------


@dataclass(frozen=True)
class Switches:
    """The sidebar's interventions: W_o mode, where it applies, and heads zeroed before W_o."""

    w_o: str = "learned"
    layer: int | None = None  # None: every layer
    ablate: tuple[tuple[int, int], ...] = ()

    @property
    def active(self) -> bool:
        return self.w_o != "learned" or bool(self.ablate)

    def describe(self) -> str:
        parts = []
        if self.w_o != "learned":
            where = ALL_LAYERS if self.layer is None else f"layer {self.layer}"
            parts.append(f"W_o {W_O_LABELS[self.w_o]} in {where}")
        if self.ablate:
            parts.append("zeroed " + ", ".join(f"L{lay}H{h}" for lay, h in self.ablate))
        return "; ".join(parts) or "learned W_o"


# ~50 KB a trace (W_o and the per-head terms are derived when shown, not stored): 96 keep every
# open session's current pair (learned, switched) of a class of 40 in about 5 MB.
@st.cache_data(show_spinner=False, max_entries=96)
def cached_trace(
    digest: str, task_name: str, text: str, w_o: str, layer: int | None, ablate: tuple, _model
) -> compare.TraceArrays:
    """run_trace keyed by checkpoint digest, sequence and switches (the model is not hashed)."""
    switches = compare.forward_switches(w_o, layer, ablate)
    return compare.run_trace(
        _model, get_task(task_name), text, switches["w_o"], switches["ablate_heads"]
    )


@st.cache_data(show_spinner=False, max_entries=32)
def cached_w_o(digest: str, w_o_modes: tuple[str, ...], _model) -> np.ndarray:
    """The W_o each layer applied, per checkpoint and modes (not per sequence)."""
    return compare.w_o_used(_model, w_o_modes)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_accuracy(
    digest: str, task_name: str, w_o: str, layer: int | None, ablate: tuple, _model
) -> dict[str, float]:
    """The task metric on 256 fixed random examples with the switches applied."""
    switches = compare.forward_switches(w_o, layer, ablate)
    return compare.accuracy_with_switch(_model, get_task(task_name), **switches)


def trace_for(entry: ModelEntry, model, task: Task, text: str, s: Switches):
    return cached_trace(entry.digest, task.name, text, s.w_o, s.layer, s.ablate, _model=model)


def accuracy_for(entry: ModelEntry, model, task: Task, s: Switches) -> dict[str, float]:
    return cached_accuracy(entry.digest, task.name, s.w_o, s.layer, s.ablate, _model=model)


def chart(figure, key: str) -> None:
    """A plotly figure, full width, without Streamlit's theme.

    Applying the theme in the browser cost about 250 ms per keystroke on the Attention tab (three
    charts) on a 2-core machine; the figures set their own colours, so it adds nothing needed.
    """
    st.plotly_chart(figure, key=key, theme=None)


# ---- text shown literally ------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&])")


def md_escape(text: str) -> str:
    """Text for a markdown-rendering element (st.error, st.caption...) shown exactly as written."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


# ---- sidebar: model, its facts, the switches ----------------------------------------------


@dataclass(frozen=True)
class View:
    """Everything the tabs draw from: the chosen model, the sequence and its traces."""

    entry: ModelEntry
    model: object
    meta: CheckpointMeta
    task: Task
    switches: Switches
    text: str | None = None  # None while the typed sequence is invalid
    trace: compare.TraceArrays | None = None  # with the switches: what the views show
    base: compare.TraceArrays | None = None  # learned W_o, nothing zeroed


def pick_model(device: str) -> tuple[ModelEntry, object, CheckpointMeta] | None:
    """The model picker (with this session's uploads), the uploader, and the chosen model."""
    entries, problems = list_models(device)
    uploads: dict[str, Upload] = st.session_state.get(UPLOADS, {})
    entries += [upload.entry for upload in uploads.values()]
    by_key = {e.key: e for e in entries}
    if not entries:
        st.error(md_escape(f"No usable model found in {BUNDLED_DIR} or the user models folder."))
        for problem in problems:
            st.warning(md_escape(problem))
        return None
    if st.session_state.get("model") not in (None, *by_key):
        st.session_state.pop("model")  # its file (or upload) is gone: back to the default
    keys = list(by_key)
    default = by_key.get(f"bundled:{DEFAULT_MODEL}", entries[0]).key
    key = st.selectbox(
        "Model",
        keys,
        index=keys.index(default),
        format_func=lambda k: f"{by_key[k].name} ({by_key[k].source})",
        key="model",
        help="Bundled models, every model trained in the Train tab (listed for everyone), and "
        "the models you uploaded (only this browser tab sees those).",
    )
    for problem in problems:
        st.warning(md_escape(problem))
    upload_box(device)
    entry = by_key[key]
    if entry.key in uploads:
        return entry, uploads[entry.key].model, uploads[entry.key].meta
    model, meta = load_model(entry.path, entry.digest, device)
    return entry, model, meta


def on_model_change(entry: ModelEntry, task: Task) -> None:
    """A new model: start from its task's first example and forget per-model choices.

    Values are set through session_state only on a change, never on the session's first run:
    the first run's widget values can be lost if the user clicks before that run has reached the
    browser (it then drops the run's messages), and the widgets would show their defaults.
    Their defaults (index=, value=) therefore already are the right first values.
    """
    shown = st.session_state.get("_shown_model")
    st.session_state["_shown_model"] = entry.key
    if shown is None or shown == entry.key:
        return
    st.session_state["sequence"] = task.examples[0]
    for key in PER_MODEL_KEYS:
        st.session_state.pop(key, None)


def model_info(entry: ModelEntry, meta: CheckpointMeta, task: Task, device: str) -> None:
    c, record = meta.config, meta.record
    st.markdown(f"**Task:** {md_escape(task.name)}")
    st.caption(md_escape(task.description))
    st.text(f"Alphabet: {task.alphabet}\nLength: {task.min_len} to {task.max_len}")
    headline = compare.headline_metric(task, meta.metrics)
    if headline is not None:
        label, value = headline
        n = meta.metrics.get("n", "?")
        lengths = f"{meta.metrics.get('min_len', '?')}..{meta.metrics.get('max_len', '?')}"
        st.metric(
            label.capitalize(), value, help=f"On {n} fresh examples of length {lengths}, when saved"
        )
    st.text(
        f"Size: D={c.d_model}, {c.n_heads} heads, {c.n_layers} layers, d_ff={c.d_ff}\n"
        f"{c.norm}-norm, {c.embed} embedding\n"
        f"Trained with W_o: {record.get('w_o', 'learned')}, {record.get('steps_done', '?')} steps\n"
        f"Device: {device.upper()}"
    )


def switch_controls(meta: CheckpointMeta) -> Switches:
    c = meta.config
    st.subheader("Switch W_o off")
    w_o = st.radio(
        "W_o",
        W_O_MODES,
        format_func=W_O_LABELS.get,
        key="w_o_mode",
        help="learned: the trained W_o. off (identity): concat goes on unmixed, no bias. "
        "zero: attention adds nothing to the residual stream.",
    )
    scopes = [ALL_LAYERS] + [f"layer {lay}" for lay in range(c.n_layers)]
    scope = st.selectbox("Switch W_o in", scopes, key="w_o_scope")
    ablate = st.multiselect(
        "Zero heads (before W_o)",
        compare.head_names(c.n_layers, c.n_heads),
        key="ablate",
        placeholder="no head zeroed",
        help="Zeroes a head's output z before W_o, so it reaches no output dimension.",
    )
    return Switches(
        w_o=w_o,
        layer=None if scope == ALL_LAYERS else int(scope.split()[1]),
        ablate=tuple(compare.parse_head_name(name) for name in ablate),
    )


# ---- sequence and prediction ------------------------------------------------------------------


def set_sequence(text: str) -> None:
    st.session_state["sequence"] = text


def set_random_sequence(task_name: str) -> None:
    st.session_state["sequence"] = compare.random_example(
        get_task(task_name), np.random.default_rng()
    )


def sequence_input(task: Task) -> str | None:
    """The text box and example buttons; the sequence if the task accepts it, else None."""
    text = st.text_input(
        "Sequence",
        value=task.examples[0],
        key="sequence",
        max_chars=MAX_TYPED,
        help=f"{task.min_len} to {task.max_len} characters from: {task.alphabet}",
    )
    with st.container(horizontal=True):
        for i, example in enumerate(task.examples):
            st.button(
                md_escape(example), key=f"example_{i}", on_click=set_sequence, args=(example,)
            )
        st.button(
            "random example",
            key="random_example",
            on_click=set_random_sequence,
            args=(task.name,),
        )
    try:
        return task.validate(text)
    except ValueError as e:
        st.error(md_escape(str(e)))
        return None


def show_prediction(view: View) -> None:
    trace, base, task = view.trace, view.base, view.task
    inputs = list(view.text) if task.kind == "token" else [view.text]
    rows = [("input", inputs), ("right answer", trace.answer)]
    if view.switches.active:
        rows.append(("learned W_o", base.prediction))
        rows.append(("switched", trace.prediction))
    else:
        rows.append(("model", trace.prediction))
    with st.container(key="prediction"):  # a stable hook for browser tests
        st.code(compare.prediction_table(rows, trace.answer), language=None)
    wrong = compare.changed_tokens(trace.prediction, trace.answer)
    note = f"{len(wrong)} of {len(trace.answer)} answer tokens wrong (marked ^)."
    if view.switches.active:
        note += f" Switched: {view.switches.describe()}."
    st.caption(md_escape(note))


# ---- tabs ----------------------------------------------------------------------------------


def attention_tab(view: View) -> None:
    tr = view.trace
    st.caption(
        "Each square is one head: row = the query token, column = the key token it looks at "
        "(same order in every square, labelled under the first); a row sums to 1. Dark = much "
        "attention. The last square of a layer is the mean of its heads: what one big head "
        "averaging them would look like. Hover a cell for its layer, head, query and key."
    )
    chart(
        plots.attention_grid(
            tr.attn, tr.labels, title="Attention: every layer x head", with_mean=True
        ),
        key="attention_grid",
    )
    left, right = st.columns(2)
    with left:
        # Off by default: a second heatmap costs the browser a redraw on every keystroke.
        if st.toggle("Enlarge one head", key="attn_enlarge"):
            a, b = st.columns(2)
            layer = a.selectbox(
                "Layer", range(tr.n_layers), format_func=lambda x: f"L{x}", key="attn_layer"
            )
            head = b.selectbox(
                "Head", range(tr.n_heads), format_func=lambda x: f"H{x}", key="attn_head"
            )
            chart(
                plots.attention_map(tr.attn[layer, head], tr.labels, title=f"L{layer} H{head}"),
                key="attention_head",
            )
    with right:
        st.caption(
            "Every weight shown here, of every layer and head, can be downloaded as a table "
            "with columns layer, head, query, key, weight:"
        )
        st.download_button(
            "Download attention weights (CSV)",
            functools.partial(compare.attention_csv, tr.attn, tr.labels),  # built on click only
            file_name=f"attention_{view.entry.name}.csv",
            mime="text/csv",
            key="download_attention",
            on_click="ignore",
        )


def w_o_tab(view: View) -> None:
    tr = view.trace
    H = tr.n_heads
    layer = st.selectbox(
        "Layer", range(tr.n_layers), format_func=lambda x: f"L{x}", key="wo_layer", width=200
    )
    mode = tr.w_o_modes[layer]
    if mode != "learned":
        st.info(md_escape(f"W_o is switched to '{W_O_LABELS[mode]}' in this layer (sidebar)."))
    before, after = st.columns(2)
    with before:
        chart(
            plots.activation_map(
                tr.concat[layer], tr.labels, n_heads=H, title="Before W_o: concat of the heads"
            ),
            key="concat",
        )
        st.caption(
            "Each head's output z_h laid side by side: block H0 holds only head 0, block H1 only "
            "head 1. Nothing is mixed yet: concatenating is not integrating."
        )
    with after:
        chart(
            plots.activation_map(tr.attn_out[layer], tr.labels, title="After W_o: attn_out"),
            key="attn_out",
        )
        st.caption(
            "attn_out = W_o applied to concat (+ b_o). Each output dimension is a weighted sum "
            "of all of concat, so no block of columns belongs to one head any more."
        )
    cosine = compare.cosine_per_token(tr.concat[layer], tr.attn_out[layer])
    W_o = cached_w_o(view.entry.digest, tuple(tr.w_o_modes), _model=view.model)  # (L, D, D)
    chart(
        plots.cosine_bars(cosine, tr.labels, title="cosine(concat, attn_out) per token"),
        key="cosine",
    )
    st.caption(
        "1 means W_o only rescaled the token's vector; lower means W_o turned it into a new "
        "direction. With W_o off (identity) every bar is exactly 1."
    )
    left, right = st.columns(2)
    with left:
        chart(plots.w_o_matrix(W_o[layer], H, title=f"W_o of L{layer}"), key="w_o")
        st.caption(
            "Row i builds output dimension i from all D inputs; the dotted lines split the inputs "
            "into the heads' blocks. Colour in every block of a row: that output draws on every "
            "head."
        )
    with right:
        token = st.select_slider("Token", options=tr.labels, key="wo_token")
        t = tr.labels.index(token)
        chart(
            plots.head_contributions(
                compare.head_contributions(tr.z[layer], W_o[layer])[:, t], token
            ),
            key="head_contributions",
        )
        st.caption(
            "z_h W_o^h: the part of attn_out that comes from head h, at this token. A column "
            "with colour in every row is an output dimension fed by all heads. The rows add up "
            "(with b_o) to attn_out exactly:"
        )
        st.metric(
            "max |Σ_h z_h W_o^h + b_o − attn_out|",
            f"{compare.decomposition_error(tr, W_o, layer):.1e}",
            help="Float32 rounding only: attn_out is exactly the sum of one term per head + b_o.",
        )


def compare_tab(view: View) -> None:
    s, base, sw = view.switches, view.base, view.trace
    if not s.active:
        st.info(
            "Nothing is switched. In the sidebar, set W_o to 'off (identity)' or 'zero', or zero "
            "some heads, and this tab shows the learned model and the switched one side by side."
        )
        return
    st.caption(md_escape(f"Left: learned W_o. Right: {s.describe()}."))
    left, right = st.columns(2)
    acc_base = accuracy_for(view.entry, view.model, view.task, Switches())
    acc_sw = accuracy_for(view.entry, view.model, view.task, s)
    headline_base = compare.headline_metric(view.task, acc_base)
    headline_sw = compare.headline_metric(view.task, acc_sw)
    worse_is_higher = view.task.metric == "mae"
    for col, name, trace, headline in (
        (left, "learned W_o", base, headline_base),
        (right, "switched", sw, headline_sw),
    ):
        with col:
            st.markdown(f"**{md_escape(name)}**")
            st.code(
                compare.prediction_table(
                    [("right answer", trace.answer), ("model", trace.prediction)], trace.answer
                ),
                language=None,
            )
            label, value = headline
            delta = None
            if trace is sw:
                key = view.task.metric
                diff = acc_sw[key] - acc_base[key]
                delta = f"{diff:+.3f}" if worse_is_higher else f"{100 * diff:+.1f} points"
            st.metric(
                f"{label.capitalize()} on {compare.ACCURACY_N} random examples",
                value,
                delta=delta,
                delta_color="inverse" if worse_is_higher else "normal",
            )
    changed = compare.changed_tokens(base.prediction, sw.prediction)
    st.caption(
        md_escape(
            f"The switch changed {len(changed)} of {len(base.prediction)} answer tokens"
            + (f" (positions {', '.join(str(i + 1) for i in changed)})." if changed else ".")
        )
    )
    later = compare.later_layers(sw.n_layers, s.layer, s.ablate, s.w_o != "learned")
    if later:
        st.caption(
            "Attention of the later layers: a switch acts after a layer's attention, so only "
            "the layers above it can attend differently."
        )
        # Full width, one above the other: side by side the cells are too small to label.
        chart(
            plots.attention_grid(base.attn[later], base.labels, later, title="learned W_o"),
            key="compare_attention_base",
        )
        chart(
            plots.attention_grid(sw.attn[later], sw.labels, later, title="switched"),
            key="compare_attention_switched",
        )
    else:
        st.caption(
            "The switch acts in the last layer, after its attention: no later layer's attention "
            "can change, only the output."
        )
    chart(plots.residual_pair(base.resid_out, sw.resid_out, base.labels), key="residual_pair")
    left, _ = st.columns(2)
    with left:
        chart(plots.drift_bars(compare.drift_per_layer(base, sw)), key="drift")
        st.caption(
            "Drift = 1 - mean cosine(learned, switched) of the residual stream: 0 = the same "
            "direction at every token, 1 = unrelated, above 1 = pointing partly the opposite way "
            "(2 = opposite). A switch in one layer moves every layer above it too."
        )


def train_tab(view: View) -> None:
    try:
        manager = job_manager()
    except ValueError as e:  # a bad TFVIZ_MAX_JOBS / TFVIZ_MAX_QUEUE setting on the server
        st.error(md_escape(f"Training is not available: {e}"))
        return
    folder = jobs.user_models_dir(ROOT)
    form_col, status_col = st.columns(2)
    with form_col:
        train_form(manager, folder, default_task=view.task.name)
    with status_col:
        running, queued = manager.counts()
        # A path outside the app folder is the server's business, not every student's.
        shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder.name
        st.caption(
            md_escape(
                f"Training slots: {running} of {manager.max_jobs} busy, {queued} waiting. "
                f"Models are saved in {shown}/ and listed in the picker for everyone."
            )
        )
        job: jobs.Job | None = st.session_state.get("train_job")
        if job is None:
            st.caption("Your training job will show its progress here.")
        elif job.snapshot().active:
            job_progress(job)
        else:
            job_result(job.snapshot())


def train_form(manager: jobs.JobManager, folder: Path, default_task: str) -> None:
    tasks = list_tasks()
    with st.form("train_form"):
        task = st.selectbox("Task", tasks, index=tasks.index(default_task), key="train_task")
        a, b, c, d = st.columns(4)
        d_model = a.selectbox("d_model", [16, 32, 64, 128, 256], index=2, key="train_d_model")
        n_heads = b.selectbox("Heads", [1, 2, 4, 8], index=2, key="train_heads")
        n_layers = c.selectbox("Layers", [1, 2, 3, 4], index=1, key="train_layers")
        d_ff = d.selectbox("d_ff", [32, 64, 128, 256, 512], index=2, key="train_d_ff")
        # The numbers are float inputs without widget bounds, checked below with a message that
        # names the field: Streamlit silently puts an out-of-range value back to the default,
        # and an int input fails inside Streamlit itself when a request sends NaN or inf.
        a, b, c = st.columns(3)
        steps = a.number_input(
            "Steps",
            value=1000.0,
            step=100.0,
            format="%.0f",
            key="train_steps",
            help=f"A whole number from 1 to {jobs.MAX_STEPS:,}.",
        )
        lr = b.number_input(
            "Learning rate",
            value=3e-3,
            step=5e-4,
            format="%g",
            key="train_lr",
            help=f"From {jobs.MIN_LR:g} to {jobs.MAX_LR:g}.",
        )
        seed = c.number_input(
            "Seed",
            value=0.0,
            step=1.0,
            format="%.0f",
            key="train_seed",
            help=f"A whole number from 0 to {jobs.MAX_SEED:,}; one seed, one model.",
        )
        w_o = st.radio(
            "W_o",
            list(TRAIN_W_O_LABELS),
            format_func=TRAIN_W_O_LABELS.get,
            key="train_w_o",
            horizontal=True,
            help="no W_o: the model is trained with concat going straight into the residual "
            "stream, to see what it can do without mixing heads.",
        )
        name = st.text_input(
            "Model name",
            value="my_model",
            key="train_name",
            max_chars=64,
            help="Letters, digits, '_', '-' and '.'; saved as NAME.safetensors.",
        )
        submitted = st.form_submit_button("Start training", key="train_submit", type="primary")
    if not submitted:
        return
    job = st.session_state.get("train_job")
    if job is not None and job.snapshot().active:
        st.error("Your training job is still running: cancel it or wait for it to finish.")
        return
    numbers, problems = form_numbers(steps, lr, seed)
    try:
        safe_model_path(folder, name, reserved=bundled_names())  # nothing is written yet
    except ValueError as e:
        problems.append(str(e))
    if problems:
        st.error("Training not started:\n\n" + "\n".join(f"- {md_escape(p)}" for p in problems))
        return
    spec = jobs.JobSpec(
        task=task,
        name=name,
        d_model=int(d_model),
        n_heads=int(n_heads),
        n_layers=int(n_layers),
        d_ff=int(d_ff),
        w_o=w_o,
        **numbers,
    )
    try:
        st.session_state["train_job"] = manager.submit(
            spec, folder, reserved=bundled_names(), is_alive=session_alive_check()
        )
    except (ValueError, jobs.QueueFull) as e:
        st.error(md_escape(str(e)))


def form_numbers(steps, lr, seed) -> tuple[dict, list[str]]:
    """The Train form's numbers checked: ({steps, lr, seed}, []) or ({...}, what is wrong)."""
    numbers, problems = {}, []
    checks = (
        ("steps", lambda: jobs.whole_number(steps, "Steps", 1, jobs.MAX_STEPS)),
        ("lr", lambda: jobs.number_in_range(lr, "The learning rate", jobs.MIN_LR, jobs.MAX_LR)),
        ("seed", lambda: jobs.whole_number(seed, "The seed", 0, jobs.MAX_SEED)),
    )
    for field, check in checks:
        try:
            numbers[field] = check()
        except ValueError as e:
            problems.append(str(e))
    return numbers, problems


def session_alive_check() -> Callable[[], bool] | None:
    """For the training worker: is the browser session that submitted the job still there?

    The session id is read here, in the script thread; the check itself runs in the worker and
    asks Streamlit's runtime (is_active_session is thread-safe). A dropped connection may come
    back within server.disconnectedSessionTTL, so the job stops only once the session has been
    gone that long. Without a runtime (AppTest, bare mode) nothing can close: always alive.
    """
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    session_id = ctx.session_id

    def session_open() -> bool:
        if not runtime.exists():
            return True
        return runtime.get_instance().is_active_session(session_id)

    grace_s = float(st.get_option("server.disconnectedSessionTTL"))
    return jobs.alive_with_grace(session_open, grace_s)


@st.fragment(run_every=POLL_SECONDS)
def job_progress(job: jobs.Job) -> None:
    """Live progress of a queued or running job, polled; reruns the page once it ends."""
    snap = job.snapshot()
    if not snap.active:
        st.rerun()  # the whole page: the result shows, and a saved model joins the picker
    name = md_escape(snap.spec.name)
    if snap.position is not None:
        st.info(
            f"{name} is waiting for a free training slot: position {snap.position} in the queue."
        )
    else:
        loss = f" · loss {snap.losses[-1]:.4f}" if snap.losses else ""
        st.progress(
            snap.step / snap.spec.steps,
            text=f"Training {name}: step {snap.step} of {snap.spec.steps}{loss}",
        )
        st.caption(md_escape(snap.message))
        if snap.losses:
            chart(plots.loss_curve(snap.losses, snap.loss_every, snap.spec.steps), key="live_loss")
    st.button("Cancel training", key="cancel_training", on_click=job.cancel)


def job_result(snap: jobs.JobSnapshot) -> None:
    name = snap.spec.name
    if snap.status == jobs.DONE:
        headline = compare.headline_metric(get_task(snap.spec.task), snap.metrics)
        score = f" ({headline[0]} {headline[1]})" if headline else ""
        st.success(
            md_escape(
                f"Trained {name} in {snap.seconds:.0f} s{score}. It is in the model picker "
                f"as '{name} (yours)'."
            )
        )
        st.button(
            "Show this model", key="open_trained", on_click=set_model, args=(f"yours:{name}",)
        )
    elif snap.status == jobs.CANCELLED:
        st.warning(md_escape(f"{name}: {snap.message}"))
    else:
        st.error(md_escape(f"Training {name} failed: {snap.message}"))
    if snap.losses:
        chart(plots.loss_curve(snap.losses, snap.loss_every, snap.spec.steps), key="final_loss")


def set_model(key: str) -> None:
    st.session_state["model"] = key


# ---- analysis: past raw attention, with W_o in the picture -----------------------------------

ANALYSIS_N = 256  # fresh examples behind importance, ablation and the keep-top-k curve
METRIC_NAMES = {"token_accuracy": "token accuracy", "accuracy": "accuracy", "mae": "MAE"}
SCORE_NAMES = {
    "loss": "loss change when zeroed",
    "metric": "{metric} change when zeroed",
    "gradient": "gradient score |dL/dξ| (Michel et al.)",
}


@st.cache_data(show_spinner=False, max_entries=256)
def cached_flow(
    digest: str, task_name: str, text: str, w_o: str, layer: int | None, ablate: tuple, _model
) -> dict[str, np.ndarray]:
    """Norm-based attention and attention rollout of one sequence with the switches, as numpy."""
    switches = compare.forward_switches(w_o, layer, ablate)
    return analysis.attention_flow(_model, task_name, text, **switches)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_importance(
    digest: str, task_name: str, w_o: str, layer: int | None, _model
) -> analysis.HeadImportance:
    """Michel et al.'s head importance on ANALYSIS_N fresh examples, per checkpoint and W_o mode."""
    w_o_mode = compare.forward_switches(w_o, layer)["w_o"]
    return analysis.head_importance(_model, task_name, n=ANALYSIS_N, w_o=w_o_mode)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_top_k_curve(
    digest: str, task_name: str, w_o: str, layer: int | None, kind: str, _model
) -> np.ndarray:
    """The metric keeping the k heads ranked highest by one score, for every k (computed once)."""
    scores = cached_importance(digest, task_name, w_o, layer, _model=_model).scores(kind)
    w_o_mode = compare.forward_switches(w_o, layer)["w_o"]
    return analysis.keep_top_k_curve(_model, task_name, scores, n=ANALYSIS_N, w_o=w_o_mode)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_ablation(
    digest: str,
    task_name: str,
    text: str | None,
    w_o: str,
    layer: int | None,
    head_layer: int,
    head: int,
    _model,
) -> analysis.AblationComparison:
    """One head zeroed before and after W_o, on the typed text (or ANALYSIS_N fresh examples)."""
    task = get_task(task_name)
    batch = None if text is None else task.batch_from_texts([text])
    w_o_mode = compare.forward_switches(w_o, layer)["w_o"]
    return analysis.compare_ablation(
        _model, task, head_layer, head, batch=batch, n=ANALYSIS_N, w_o=w_o_mode
    )


@st.cache_data(show_spinner=False, max_entries=64)
def cached_weight_views(digest: str, w_o: str, layer: int | None, _model) -> dict:
    """OV spectra, composition scores and W_o's head mixing: from the weights alone."""
    w_o_mode = compare.forward_switches(w_o, layer)["w_o"]
    ov = analysis.ov_circuits(_model, w_o_mode)
    comp = analysis.composition_scores(_model, w_o_mode)
    mixing = analysis.w_o_mixing(_model, w_o_mode)
    return {  # the (L, H, D, D) circuits themselves are not drawn, so not kept in the cache
        "singular_values": ov.singular_values,
        "effective_rank": ov.effective_rank,
        "numerical_rank": ov.numerical_rank,
        "frobenius": ov.frobenius,
        "rtol": ov.rtol,
        "composition": comp,
        "shares": mixing.shares,
        "mixing": mixing.mixing,
    }


def number_table(rows: list[dict], key: str) -> None:
    """Rows of a table, floats shown to 4 significant digits (gradient scores are ~1e-4)."""
    floats = [name for name, value in rows[0].items() if isinstance(value, float)] if rows else []
    config = {name: st.column_config.NumberColumn(format="%.4g") for name in floats}
    st.dataframe(rows, hide_index=True, key=key, column_config=config)


def metric_text(metric: str, value: float) -> str:
    return f"{value:.3f}" if metric == "mae" else f"{100 * value:.1f}%"


def metric_delta(metric: str, diff: float) -> str:
    return f"{diff:+.3f}" if metric == "mae" else f"{100 * diff:+.1f} points"


def what_is_this(*keys: str) -> None:
    """The method's citation and explanation, from analysis.HELP, folded away."""
    with st.expander("What is this?"):
        for key in keys:
            st.markdown(md_escape(analysis.HELP[key]))


def help_sentence(key: str, word: str) -> str:
    """The sentence of analysis.HELP[key] that contains word (the whole text if none does)."""
    text = analysis.HELP[key]
    sentences = re.split(r"(?<=\.) (?=[A-Z])", text)
    return next((s for s in sentences if word in s), text)


def index_picker(label: str, n: int, key: str, prefix: str, **kwargs) -> int:
    """A selectbox over 0..n-1 shown as prefix + number; a stale choice (other model) is dropped."""
    if st.session_state.get(key) not in (None, *range(n)):
        st.session_state.pop(key)
    return st.selectbox(
        label, range(n), format_func=lambda x: f"{prefix}{x}", key=key, width=200, **kwargs
    )


def flow_for(view: View) -> dict[str, np.ndarray]:
    s = view.switches
    return cached_flow(
        view.entry.digest, view.task.name, view.text, s.w_o, s.layer, s.ablate, _model=view.model
    )


def norm_attention_section(view: View) -> None:
    tr = view.trace
    layer = index_picker("Layer", tr.n_layers, "norm_layer", "L")
    flow = flow_for(view)
    st.caption(
        "Kobayashi et al., EMNLP 2020. Top: the raw weights α (where each head looks; a row sums "
        "to 1). Below: ‖α f(x)‖, how much each key token really moves into the query through the "
        "head's values and W_o. Same tokens, same layout; the norms share one colour scale, so a "
        "head that writes little looks faint even where it looks hard."
    )
    chart(
        plots.attention_grid(
            tr.attn[layer : layer + 1],
            tr.labels,
            [layer],
            title=f"Raw attention α of L{layer} (last: mean of the heads)",
            with_mean=True,
        ),
        key="raw_attention_layer",
    )
    chart(
        plots.norm_attention_grid(
            flow["norm"][layer],
            flow["norm_summed"][layer],
            tr.labels,
            layer,
            title=f"Norm-based attention ‖α f(x)‖ of L{layer} (last: all heads summed as vectors)",
        ),
        key="norm_attention",
    )
    what_is_this("norm_attention", "norm_attention_summed")


def rollout_section(view: View) -> None:
    flow = flow_for(view)
    st.caption(
        "Abnar & Zuidema, ACL 2020. Row i of a block: how much of token i's representation after "
        "that layer traces back to each input token (rows sum to 1). Left from raw attention, "
        "right from the norm-based weights, which also count what the values and W_o do. An "
        "approximation: the feed-forward nets and LayerNorm are left out."
    )
    chart(
        plots.rollout_grid(flow["rollout_raw"], flow["rollout_norm"], view.trace.labels),
        key="rollout",
    )
    what_is_this("attention_rollout")


def importance_section(view: View) -> None:
    entry, task, s = view.entry, view.task, view.switches
    with st.spinner(f"Zeroing each head in turn on {ANALYSIS_N} random examples…"):
        imp = cached_importance(entry.digest, task.name, s.w_o, s.layer, _model=view.model)
    L, H = imp.loss_change.shape
    metric = METRIC_NAMES[imp.metric]
    names = {kind: label.format(metric=metric) for kind, label in SCORE_NAMES.items()}
    st.caption(
        md_escape(
            f"Michel et al., NeurIPS 2019. On {imp.n} fresh examples, with the sidebar's W_o "
            f"switch; heads zeroed in the sidebar are not applied here. With every head: loss "
            f"{imp.base_loss:.4g}, {metric} {metric_text(imp.metric, imp.base_metric)}."
        )
    )
    kind = st.radio(
        "Rank heads by",
        list(SCORE_NAMES),
        format_func=names.get,
        key="importance_rank",
        horizontal=True,
        help="Which score orders the heads for the heatmap and for 'keep the k most important'.",
    )
    shown = {"loss": imp.loss_change, "metric": imp.metric_change, "gradient": imp.gradient}[kind]
    left, right = st.columns(2)
    with left:
        chart(
            plots.head_score_map(shown, title=names[kind].capitalize(), value=names[kind]),
            key="importance_map",
        )
        number_table(
            [
                {
                    "head": f"L{lay}H{h}",
                    "loss change": float(imp.loss_change[lay, h]),
                    f"{metric} change": float(imp.metric_change[lay, h]),
                    "gradient score": float(imp.gradient[lay, h]),
                }
                for lay in range(L)
                for h in range(H)
            ],
            key="importance_table",
        )
    with right:
        with st.spinner("Measuring the metric for every number of heads kept…"):
            curve = cached_top_k_curve(
                entry.digest, task.name, s.w_o, s.layer, kind, _model=view.model
            )
        n_heads = L * H
        if st.session_state.get("importance_k", 0) > n_heads:
            st.session_state.pop("importance_k")  # a bigger model was shown before
        k = st.slider(
            "Keep the k most important heads",
            0,
            n_heads,
            value=n_heads,
            key="importance_k",
            help=analysis.HELP["accuracy_keeping_top_k"],
        )
        st.metric(
            f"{metric.capitalize()} keeping {k} of {n_heads} heads",
            metric_text(imp.metric, float(curve[k])),
            delta=None if k == n_heads else metric_delta(imp.metric, float(curve[k] - curve[-1])),
            delta_color="inverse" if imp.metric == "mae" else "normal",
            help="On the same fresh examples; the others are zeroed before W_o. The change is "
            "against keeping every head.",
        )
        kept = analysis.top_k_heads(imp.scores(kind), k)
        st.caption(md_escape("Kept: " + (", ".join(f"L{a}H{b}" for a, b in kept) or "none")))
        chart(plots.keep_top_k_plot(curve, k, metric), key="keep_top_k")
    what_is_this("head_importance", "accuracy_keeping_top_k")


def ablation_section(view: View) -> None:
    tr, entry, task, s = view.trace, view.entry, view.task, view.switches
    a, b = st.columns(2)
    with a:
        layer = index_picker("Layer", tr.n_layers, "ablation_layer", "L")
    with b:
        head = index_picker("Head", tr.n_heads, "ablation_head", "H")
    args = (entry.digest, task.name)
    switch = (s.w_o, s.layer, layer, head)
    typed = cached_ablation(*args, view.text, *switch, _model=view.model)
    with st.spinner(f"Zeroing L{layer}H{head} on {ANALYSIS_N} random examples…"):
        fresh = cached_ablation(*args, None, *switch, _model=view.model)
    metric = METRIC_NAMES[typed.metric]
    st.info(md_escape(help_sentence("compare_ablation", "mistake")))
    for col, what, result in (
        (a, "your sequence", typed),
        (b, f"{ANALYSIS_N} random examples", fresh),
    ):
        with col:
            base = metric_text(result.metric, result.base_metric)
            st.markdown(f"**On {md_escape(what)}** (every head kept: {md_escape(base)})")
            st.metric(
                f"{metric.capitalize()}, L{layer}H{head} zeroed before W_o (right)",
                metric_text(result.metric, result.metric_before),
            )
            st.metric(
                f"{metric.capitalize()}, same dims zeroed after W_o (mistake)",
                metric_text(result.metric, result.metric_after),
                delta=metric_delta(result.metric, result.metric_difference) + " vs before",
                delta_color="off",
            )
            st.caption(
                md_escape(
                    f"Loss {result.loss_before:.4g} (before) vs {result.loss_after:.4g} (after): "
                    f"difference {result.loss_difference:+.4g}. Answers changed: "
                    f"{result.prediction_changed_before:.0%} before, "
                    f"{result.prediction_changed_after:.0%} after."
                )
            )
    share = fresh.removed_share_after
    others = np.delete(share, head)
    st.caption(
        md_escape(
            f"On the random examples, zeroing those dims after W_o removed "
            f"{share[head]:.0%} of head {head}'s own output and on average "
            f"{others.mean() if others.size else 0.0:.0%} of each other head's; zeroing before "
            f"W_o removes all of head {head}'s and none of the others'."
        )
    )
    chart(
        plots.ablation_change_bars(
            typed.attn_out_change_before[0],
            typed.attn_out_change_after[0],
            tr.labels,
            title=f"How far attn_out of L{layer} moved at each token of your sequence",
        ),
        key="ablation_bars",
    )
    what_is_this("compare_ablation")


def ov_section(view: View) -> None:
    s = view.switches
    w = cached_weight_views(view.entry.digest, s.w_o, s.layer, _model=view.model)
    sv = w["singular_values"]
    L, H, d_k = sv.shape
    st.caption(
        "Elhage et al. 2021. W_OV = W_V^h W_O^h maps what a token holds to what the head writes "
        f"when it attends to it; its rank is at most d_k = {d_k}. Effective rank: Roy & Vetterli "
        "2007."
    )
    left, right = st.columns(2)
    with left:
        chart(
            plots.singular_value_lines(sv, title="Singular values of each head's OV circuit"),
            key="ov_singular_values",
        )
    with right:
        number_table(
            [
                {
                    "head": f"L{lay}H{h}",
                    "effective rank": float(w["effective_rank"][lay, h]),
                    f"numerical rank (> {w['rtol']:.0%} of largest)": int(
                        w["numerical_rank"][lay, h]
                    ),
                    "‖W_OV‖_F": float(w["frobenius"][lay, h]),
                }
                for lay in range(L)
                for h in range(H)
            ],
            key="ov_table",
        )
    comp = w["composition"]
    if comp.q.shape[0] == 0:
        st.info("This model has one layer: no next layer to compose with.")
    else:
        chart(
            plots.composition_grid(
                comp.q,
                comp.k,
                comp.v,
                comp.baseline,
                title=f"Composition: how much of each head's output the next layer's Q, K, V read "
                f"(random baseline ≈ {comp.baseline:.3f})",
            ),
            key="composition",
        )
        st.caption(
            md_escape(
                f"Rows: the writing head of layer l; columns: the reading head of layer l+1. "
                f"Unrelated random matrices score about {comp.baseline:.3f} (1/√D). Caveat: "
                "LayerNorm's per-token division and the feed-forward net between the layers are "
                "not in these numbers: they describe the weights, not a measurement on data."
            )
        )
    what_is_this("ov_circuits", "composition_scores")


def mixing_section(view: View) -> None:
    s = view.switches
    w = cached_weight_views(view.entry.digest, s.w_o, s.layer, _model=view.model)
    shares, mixing = w["shares"], w["mixing"]
    layer = index_picker("Layer", len(mixing), "mixing_layer", "L")
    cols = st.columns(len(mixing))
    for lay, col in enumerate(cols):
        col.metric(
            f"Mixing number L{lay}",
            f"{mixing[lay]:.2f}",
            help="0: each output dimension reads one head; 1: every one reads all heads equally.",
        )
    chart(
        plots.head_shares_map(
            shares[layer], title=f"W_o of L{layer}: share of each output dim's weight per head"
        ),
        key="w_o_shares",
    )
    st.caption(
        "A block-diagonal picture (each output dimension reading a single head) would mean no "
        "mixing; colour across a whole row means that output dimension draws on every head."
    )
    what_is_this("w_o_mixing")


# (label, render, needs a valid typed sequence)
ANALYSIS_SECTIONS: dict[str, tuple[Callable, bool]] = {
    "Norm-based attention": (norm_attention_section, True),
    "Attention rollout": (rollout_section, True),
    "Head importance": (importance_section, False),
    "Ablate before vs after W_o": (ablation_section, True),
    "OV circuits": (ov_section, False),
    "How W_o mixes heads": (mixing_section, False),
}


def analysis_tab(view: View) -> None:
    sections = list(ANALYSIS_SECTIONS)
    section = st.segmented_control(
        "Method",
        sections,
        default=sections[0],
        required=True,
        key="analysis_section",
        help="Each method looks past the raw attention weights, with W_o in the picture.",
    )
    render, needs_text = ANALYSIS_SECTIONS[section or sections[0]]
    if needs_text and view.trace is None:
        st.info("Type a valid sequence above to see this view.")
        return
    if view.switches.active:
        st.caption(
            md_escape(
                f"Sidebar: {view.switches.describe()}. The W_o switch applies to every method "
                "here; heads zeroed in the sidebar only to norm-based attention and rollout, "
                "which read the traced sequence."
            )
        )
    render(view)


# ---- does W_o matter? the with/without experiment -------------------------------------------


@st.cache_resource(show_spinner=False)
def experiment_runner() -> experiment_jobs.ExperimentRunner:
    """One runner for the process; its reruns take slots of the one training JobManager."""
    return experiment_jobs.ExperimentRunner(job_manager())


@st.cache_data(show_spinner=False, max_entries=16)
def cached_precomputed(task_name: str) -> experiment.ExperimentResult | None:
    """The shipped result for a task (models/experiments/<task>.json), or None."""
    return experiment.load_precomputed(task_name)


def sig(x: float) -> str:
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def experiment_table(result: experiment.ExperimentResult) -> list[dict]:
    rows = []
    for row in experiment.compare(result):
        iv = row.interval
        rows.append(
            {
                "quantity": row.label,
                "with W_o": f"{sig(row.mean_learned)} ± {sig(row.std_learned)}",
                "without W_o": f"{sig(row.mean_identity)} ± {sig(row.std_identity)}",
                "difference": sig(row.difference),
                "95% CI": f"[{sig(iv.low)}, {sig(iv.high)}]" if iv else "n/a (needs 2+ seeds)",
                "runs": f"{row.n_learned} + {row.n_identity}",
            }
        )
    return rows


def show_experiment(result: experiment.ExperimentResult) -> None:
    s = result.settings
    sizes = s.get("sizes", {})
    n = [len(result.runs_of(c)) for c in experiment.CONDITIONS]
    st.caption(
        md_escape(
            f"{n[0]} seeds with W_o and {n[1]} without, {s.get('steps')} steps × batch "
            f"{s.get('batch_size')}, lr {s.get('lr')}, D={sizes.get('d_model')}, "
            f"{sizes.get('n_heads')} heads, {sizes.get('n_layers')} layers: fresh small models "
            "trained for this experiment (not the model in the sidebar, which only picks the "
            "task). Seed s starts both conditions from the same weights and batches. Without W_o "
            "each layer has D·D + D fewer parameters: this compares the two architectures, not "
            "equal parameter counts."
        )
    )
    window = st.select_slider(
        "Smoothing (steps averaged)",
        options=[1, 5, 10, 25, 50],
        value=10,
        key="exp_window",
        help="A moving average over each run's loss before averaging over seeds.",
    )
    try:
        curves = experiment.summarise(result, window=int(window))
    except ValueError as e:
        st.warning(md_escape(f"No curves to draw: {e}"))
    else:
        chart(
            plots.experiment_curves(
                curves.step,
                curves.mean,
                curves.lower,
                curves.upper,
                curves.conditions,
                [experiment.LABELS[c] for c in curves.conditions],
            ),
            key="experiment_curves",
        )
    st.dataframe(experiment_table(result), hide_index=True, key="experiment_table")
    st.caption(
        "Mean ± standard deviation over seeds; difference = with W_o minus without; 95% CI: "
        "Welch's confidence interval for that difference. Lower is better for the losses and "
        "the MAE, higher for accuracies."
    )
    st.markdown("**What these runs show:** " + md_escape(experiment.verdict(result)))


def experiment_tab(view: View) -> None:
    task = view.task.name
    reruns: dict = st.session_state.setdefault("experiment_reruns", {})
    job: experiment_jobs.ExperimentJob | None = st.session_state.get("experiment_job")
    if job is not None and st.session_state.get("experiment_collected") != job.id:
        snap = job.snapshot()
        if not snap.active:
            st.session_state["experiment_collected"] = job.id
            if snap.result is not None and snap.result.runs:
                reruns[snap.spec.task] = snap.result  # this session only: never written to disk
                if snap.spec.task == task:
                    st.session_state["exp_source"] = "rerun"
    try:
        shipped = cached_precomputed(task)
    except ValueError as e:  # a damaged file: say so, and still offer the rerun
        st.error(md_escape(f"The shipped result for {task} cannot be read: {e}"))
        shipped = None
    sources = {"shipped": shipped, "rerun": reruns.get(task)}
    sources = {k: v for k, v in sources.items() if v is not None}
    st.caption(
        "Seed 000 claims that without W_o training converges more slowly and ends worse. Here "
        "is what training with and without W_o measured for this model's task."
    )
    if not sources:
        st.info(md_escape(f"No result for the {task} task yet: rerun the experiment below."))
    else:
        if len(sources) > 1:
            if st.session_state.get("exp_source") not in sources:
                st.session_state.pop("exp_source", None)
            source = st.radio(
                "Show",
                list(sources),
                format_func={"shipped": "shipped result", "rerun": "your rerun"}.get,
                key="exp_source",
                horizontal=True,
            )
        else:
            source = next(iter(sources))
        show_experiment(sources[source])
    st.subheader("Rerun the experiment")
    form_col, status_col = st.columns(2)
    with form_col:
        experiment_form(task)
    with status_col:
        job = st.session_state.get("experiment_job")
        if job is None:
            st.caption(
                "Your rerun will show its progress here. Its result stays in this browser "
                "session only; the shipped results are not changed."
            )
        elif job.snapshot().active:
            experiment_progress(job)
        else:
            experiment_outcome(job.snapshot())


def experiment_form(task: str) -> None:
    with st.form("experiment_form"):
        a, b = st.columns(2)
        seeds = a.number_input(
            "Seeds per condition",
            min_value=1,
            max_value=experiment_jobs.MAX_SEEDS,
            value=2,
            key="exp_seeds",
            help="Each seed trains once with W_o and once without. A confidence interval needs "
            f"at least 2; at most {experiment_jobs.MAX_SEEDS}.",
        )
        steps = b.number_input(
            "Steps per run",
            min_value=1,
            max_value=experiment_jobs.MAX_STEPS,
            value=200,
            step=50,
            key="exp_steps",
            help=f"At most {experiment_jobs.MAX_STEPS:,}. The shipped results used "
            f"{experiment.DEFAULTS['steps']}.",
        )
        submitted = st.form_submit_button(f"Rerun for {task}", key="exp_submit", type="primary")
    if not submitted:
        return
    job = st.session_state.get("experiment_job")
    if job is not None and job.snapshot().active:
        st.error("Your rerun is still going: cancel it or wait for it to finish.")
        return
    spec = experiment_jobs.ExperimentSpec(task=task, seeds=int(seeds), steps=int(steps))
    try:
        st.session_state["experiment_job"] = experiment_runner().submit(spec)
    except (ValueError, experiment_jobs.RunnerBusy) as e:
        st.error(md_escape(str(e)))


@st.fragment(run_every=POLL_SECONDS)
def experiment_progress(job: experiment_jobs.ExperimentJob) -> None:
    """Live progress of this session's rerun, polled; reruns the page once it ends."""
    snap = job.snapshot()
    if not snap.active:
        st.rerun()  # the whole page: the result shows above
    loss = f" · loss {snap.loss:.4f}" if snap.loss is not None else ""
    st.progress(
        snap.fraction,
        text=md_escape(
            f"Rerunning {snap.spec.task}: {snap.message}, step {snap.step} of "
            f"{snap.spec.steps}{loss}"
        ),
    )
    st.button("Cancel the rerun", key="cancel_experiment", on_click=job.cancel)


def experiment_outcome(snap: experiment_jobs.ExperimentSnapshot) -> None:
    task = snap.spec.task
    if snap.status == experiment_jobs.DONE:
        st.success(
            md_escape(
                f"Rerun finished in {snap.seconds:.0f} s: {snap.message}. Shown above as 'your "
                f"rerun' while the model picked is a {task} model."
            )
        )
    elif snap.status == experiment_jobs.CANCELLED:
        st.warning(md_escape(f"Rerun for {task} {snap.message}."))
    else:
        st.error(md_escape(f"The rerun for {task} failed: {snap.message}"))


# (tab label, render function, needs a valid sequence)
TABS: list[tuple[str, Callable, bool]] = [
    ("Attention", attention_tab, True),
    ("Before/after W_o", w_o_tab, True),
    ("W_o off: compare", compare_tab, True),
    ("Train", train_tab, False),
    ("Analysis", analysis_tab, False),
    ("Does W_o matter?", experiment_tab, False),
]


# ---- page --------------------------------------------------------------------------------


def main() -> None:
    device = setup_process()
    with st.sidebar:
        st.title("tfviz")
        picked = pick_model(device)
        if picked is None:
            return
        entry, model, meta = picked
        task = get_task(meta.task)
        on_model_change(entry, task)
        model_info(entry, meta, task, device)
        switches = switch_controls(meta)

    st.header("Inside multi-head attention: what W_o does")
    st.caption(
        "Concatenating the heads is not integrating them: the output projection W_o mixes every "
        "head into every output dimension. Type a sequence and look."
    )
    main_area(View(entry=entry, model=model, meta=meta, task=task, switches=switches))


@st.fragment
def main_area(view: View) -> None:
    """The sequence, the prediction and the open tab.

    A fragment: typing a sequence or using a tab reruns only this part, so the sidebar is neither
    recomputed nor redrawn on each keystroke (bench/ui_latency.py). The sidebar's widgets still
    rerun the whole page.
    """
    entry, model, task, switches = view.entry, view.model, view.task, view.switches
    text = sequence_input(task)
    if text is not None:
        trace = trace_for(entry, model, task, text, switches)
        base = trace_for(entry, model, task, text, Switches()) if switches.active else trace
        view = replace(view, text=text, trace=trace, base=base)
        show_prediction(view)

    tabs = st.tabs([label for label, _, _ in TABS], key="view", on_change="rerun")
    for tab, (_, render, needs_trace) in zip(tabs, TABS, strict=True):
        if not tab.open:
            continue
        with tab:
            if needs_trace and view.trace is None:
                st.info("Type a valid sequence above to see this view.")
            else:
                render(view)


main()
