"""The sidebar: the model picker and uploader, the chosen model's facts, and the W_o switches.

Its widgets rerun the whole page (the main area is a fragment of its own); what they choose is
handed to the views as a View (tfviz.ui.common).
"""

from __future__ import annotations

import streamlit as st

from tfviz import get_task, interventions, pretrained
from tfviz.checkpoint import CheckpointMeta
from tfviz.metrics import headline
from tfviz.model import W_O_MODES
from tfviz.tasks import Task
from tfviz.ui.common import ALL_LAYERS, W_O_LABELS, md_escape
from tfviz.ui.models import (
    BUNDLED_DIR,
    DEFAULT_MODEL,
    ModelEntry,
    list_models,
    load_model,
    load_pretrained,
)
from tfviz.ui.uploads import session_uploads, upload_box

# Widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = (
    "w_o_scope",
    "ablate",
    "attn_layer",
    "attn_head",
    "attn_grid_layer",
    "wo_layer",
    "wo_token",
    "compare_layer",
)


def pick_model(device: str) -> tuple[ModelEntry, object, CheckpointMeta, Task] | None:
    """The model picker (with this session's uploads), the uploader, and the chosen model with
    its task (a toy Task, or the pretrained model's SentenceTask)."""
    entries, problems = list_models(device)
    uploads = session_uploads()
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
        help="Bundled models, the pretrained sentence encoder all-MiniLM-L6-v2, every model "
        "trained in the Train tab (listed for everyone), and the models you uploaded (only this "
        "browser tab sees those).",
    )
    for problem in problems:
        st.warning(md_escape(problem))
    upload_box(device)
    entry = by_key[key]
    if entry.key in uploads:
        model, meta = uploads[entry.key].model, uploads[entry.key].meta
    elif entry.source == "pretrained":
        with st.spinner(f"Loading {entry.name} (once per server)…"):
            model, meta, task = load_pretrained(device)
        if model is None:
            st.error(md_escape(f"{entry.name} cannot be loaded: {meta}"))
            return None
        return entry, model, meta, task
    else:
        model, meta = load_model(entry.path, entry.digest, device)
    return entry, model, meta, get_task(meta.task)


def on_model_change(entry: ModelEntry, task: Task) -> None:
    """A new model: start from its task's first example(s) and forget per-model choices.

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
    if task.kind == "sentence":
        st.session_state["sentence_b"] = task.examples[1]
    for key in PER_MODEL_KEYS:
        st.session_state.pop(key, None)


def model_info(meta: CheckpointMeta, task: Task, device: str) -> None:
    """The task, its alphabet and lengths, the saved metric, the sizes and the device."""
    if task.kind == "sentence":
        pretrained_info(meta, task, device)
        return
    c, record = meta.config, meta.record
    st.markdown(f"**Task:** {md_escape(task.name)}")
    st.caption(md_escape(task.description))
    st.text(f"Alphabet: {task.alphabet}\nLength: {task.min_len} to {task.max_len}")
    best = headline(task.metric, meta.metrics)
    if best is not None:
        label, value = best
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


def pretrained_info(meta: CheckpointMeta, task: Task, device: str) -> None:
    """What the pretrained model is, where it comes from, its licence, sizes and device."""
    c = meta.config
    st.markdown(f"**Task:** {md_escape(task.name)}")
    st.caption(md_escape(task.description))
    st.text(
        f"Source: {pretrained.SOURCE}\n"
        f"Licence: {pretrained.LICENCE}\n"
        f"Installed from PyPI ({pretrained.PIP_REQUIREMENT.split('==')[0]}); nothing is "
        "fetched while the app runs."
    )
    st.text(
        f"Size: D={c.d_model}, {c.n_heads} heads, {c.n_layers} layers, d_ff={c.d_ff}\n"
        f"{c.norm}-norm (BERT), word-piece embedding\n"
        f"Reads at most {task.max_pieces} word-pieces\n"
        f"Device: {device.upper()}"
    )


def switch_controls(meta: CheckpointMeta) -> interventions.Interventions:
    """W_o learned / off / zero, in every layer or one, and heads zeroed before W_o."""
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
        interventions.head_names(c.n_layers, c.n_heads),
        key="ablate",
        placeholder="no head zeroed",
        help="Zeroes a head's output z before W_o, so it reaches no output dimension.",
    )
    return interventions.switches(
        w_o,
        None if scope == ALL_LAYERS else int(scope.split()[1]),
        [interventions.parse_head_name(name) for name in ablate],
    )
