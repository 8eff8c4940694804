"""tfviz web app: pick a model, type a sequence, and see inside multi-head attention and W_o.

Run with `streamlit run app.py`. This script only composes widgets, library calls and charts:
numbers come from tfviz.compare, figures from tfviz.plots, training from tfviz.jobs; it holds no
torch code. Each checkpoint is loaded once per process (st.cache_resource) and shared by every
browser session, so it is never changed: the W_o switch and head ablation are forward arguments.
Traces are cached per (checkpoint digest, sequence, switches) and hold numpy only.

The tabs are lazy (only the open one runs), so a keystroke redraws only the view being looked at.
A new view is one function taking a View, added to TABS.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st

from tfviz import CheckpointError, compare, get_task, jobs, list_tasks, load_checkpoint, plots
from tfviz.checkpoint import CheckpointMeta, file_digest
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

st.set_page_config(page_title="tfviz: inside multi-head attention", layout="wide")


@st.cache_resource(show_spinner=False)
def setup_process() -> str:
    """Once per process: torch threads, and the device every model is loaded onto."""
    # torch's thread count is process-wide, so it is set here once, not in the training thread.
    # These models are tiny and run fastest on one thread; then each training job and each page
    # request takes about one core, which is what the jobs-per-core cap assumes.
    jobs.limit_torch_threads(1)
    return str(resolve_device("auto"))


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


@st.cache_data(show_spinner=False, max_entries=256)
def cached_trace(
    digest: str, task_name: str, text: str, w_o: str, layer: int | None, ablate: tuple, _model
) -> compare.TraceArrays:
    """run_trace keyed by checkpoint digest, sequence and switches (the model is not hashed)."""
    switches = compare.forward_switches(w_o, layer, ablate)
    return compare.run_trace(
        _model, get_task(task_name), text, switches["w_o"], switches["ablate_heads"]
    )


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
    """The model picker and what the checkpoint says about the model."""
    entries, problems = list_models(device)
    by_key = {e.key: e for e in entries}
    if not entries:
        st.error(md_escape(f"No usable model found in {BUNDLED_DIR} or the user models folder."))
        for problem in problems:
            st.warning(md_escape(problem))
        return None
    if st.session_state.get("model") not in (None, *by_key):
        st.session_state.pop("model")  # its file is gone: back to the default
    keys = list(by_key)
    default = by_key.get(f"bundled:{DEFAULT_MODEL}", entries[0]).key
    key = st.selectbox(
        "Model",
        keys,
        index=keys.index(default),
        format_func=lambda k: f"{by_key[k].name} ({by_key[k].source})",
        key="model",
        help="Bundled models, and every model trained in the Train tab (listed for everyone).",
    )
    for problem in problems:
        st.warning(md_escape(problem))
    entry = by_key[key]
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
        horizontal=True,
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
        st.error(
            md_escape(str(e))
            + "\n\n"
            + md_escape(
                f"The {task.name} task takes {task.min_len} to {task.max_len} characters "
                f"from: {task.alphabet}"
            )
        )
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
            "Pick a layer and a head to see its map large. Every weight shown here, of every "
            "layer and head, can be downloaded as a table with columns layer, head, query, key, "
            "weight:"
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
        chart(plots.w_o_matrix(tr.W_o[layer], H, title=f"W_o of L{layer}"), key="w_o")
        st.caption(
            "Row i builds output dimension i from all D inputs; the dotted lines split the inputs "
            "into the heads' blocks. Colour in every block of a row: that output draws on every "
            "head."
        )
    with right:
        token = st.select_slider("Token", options=tr.labels, key="wo_token")
        t = tr.labels.index(token)
        chart(
            plots.head_contributions(tr.head_contrib[layer, :, t], token),
            key="head_contributions",
        )
        st.caption(
            "z_h W_o^h: the part of attn_out that comes from head h, at this token. A column "
            "with colour in every row is an output dimension fed by all heads. The rows add up "
            "(with b_o) to attn_out exactly:"
        )
        st.metric(
            "max |Σ_h z_h W_o^h + b_o − attn_out|",
            f"{compare.decomposition_error(tr, layer):.1e}",
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
        a, b = st.columns(2)
        with a:
            chart(
                plots.attention_grid(base.attn[later], base.labels, later, title="learned W_o"),
                key="compare_attention_base",
            )
        with b:
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
            "How far the residual stream moved: 0 = the same direction at every token, 1 = "
            "unrelated. A switch in one layer moves every layer above it too."
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
        shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
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
        a, b, c = st.columns(3)
        steps = a.number_input(
            "Steps",
            min_value=1,
            max_value=jobs.MAX_STEPS,
            value=1000,
            step=100,
            key="train_steps",
            help=f"At most {jobs.MAX_STEPS:,}.",
        )
        lr = b.number_input(
            "Learning rate",
            min_value=1e-5,
            max_value=1.0,
            value=3e-3,
            step=5e-4,
            format="%g",
            key="train_lr",
        )
        seed = c.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, key="train_seed")
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
    spec = jobs.JobSpec(
        task=task,
        name=name,
        d_model=int(d_model),
        n_heads=int(n_heads),
        n_layers=int(n_layers),
        d_ff=int(d_ff),
        steps=int(steps),
        lr=float(lr),
        seed=int(seed),
        w_o=w_o,
    )
    try:
        st.session_state["train_job"] = manager.submit(spec, folder, reserved=bundled_names())
    except (ValueError, jobs.QueueFull) as e:
        st.error(md_escape(str(e)))


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


# (tab label, render function, needs a valid sequence)
TABS: list[tuple[str, Callable, bool]] = [
    ("Attention", attention_tab, True),
    ("Before/after W_o", w_o_tab, True),
    ("W_o off: compare", compare_tab, True),
    ("Train", train_tab, False),
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
    view = View(entry=entry, model=model, meta=meta, task=task, switches=switches)
    text = sequence_input(task)
    if text is not None:
        trace = trace_for(entry, model, task, text, switches)
        base = trace_for(entry, model, task, text, Switches()) if switches.active else trace
        view = View(
            entry=entry,
            model=model,
            meta=meta,
            task=task,
            switches=switches,
            text=text,
            trace=trace,
            base=base,
        )
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
