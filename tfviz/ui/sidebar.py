"""The sidebar: the language, the model picker and uploader, the chosen model's facts, the W_o
switches and the charts' download format.

Its widgets rerun the whole page (the main area is a fragment of its own); what they choose is
handed to the views as a View (tfviz.ui.common). A shared link's model and switches are put into
these widgets' session_state before they are drawn (tfviz.ui.share).
"""

from __future__ import annotations

import streamlit as st

from tfviz import get_task, interventions, pretrained
from tfviz.checkpoint import CheckpointMeta
from tfviz.metrics import headline
from tfviz.tasks import Task
from tfviz.ui import share
from tfviz.ui.common import (
    ALL_LAYERS,
    CHART_FORMAT,
    CHART_FORMATS,
    W_O_LABELS,
    md_escape,
    w_o_label,
)
from tfviz.ui.i18n import catalogue, current, t
from tfviz.ui.models import (
    BUNDLED_DIR,
    DEFAULT_MODEL,
    ModelEntry,
    list_models,
    load_model,
    load_pretrained,
)
from tfviz.ui.uploads import session_uploads, upload_box
from tfviz.wo import rank_of

# Where a model comes from (ModelEntry.source) -> catalogue key of its name in the picker.
SOURCES = {
    "bundled": "sidebar.source.bundled",
    "pretrained": "sidebar.source.pretrained",
    "yours": "sidebar.source.yours",
    "uploaded": "sidebar.source.uploaded",
}
# A task's metric key (tfviz.metrics) -> catalogue key of its name.
METRIC_NAMES = {
    "token_accuracy": "sidebar.metric.token_accuracy",
    "sequence_accuracy": "sidebar.metric.sequence_accuracy",
    "accuracy": "sidebar.metric.accuracy",
    "mae": "sidebar.metric.mae",
    "loss": "sidebar.metric.loss",
}

# session_state: a model key that a view asks the picker to show on the next whole-page run (a
# view cannot set the picker itself: it is drawn before the views, or not at all in a fragment run).
OPEN_MODEL = "_open_model"

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
    "w_o_rank",
    "parts_k",
    "parts_order",
    "parts_seq_b",
    "parts_scope",
    "parts_perm_layer",
    "parts_pat_layer",
    "parts_pat_head",
    "parts_pat_source",
    "parts_diff_layer",
)


def pick_model(device: str) -> tuple[ModelEntry, object, CheckpointMeta, Task] | None:
    """The model picker (with this session's uploads), the uploader, and the chosen model with
    its task (a toy Task, or the pretrained model's SentenceTask)."""
    entries, problems = list_models(device)
    uploads = session_uploads()
    entries += [upload.entry for upload in uploads.values()]
    by_key = {e.key: e for e in entries}
    if not entries:
        st.error(md_escape(t("sidebar.no_models", folder=BUNDLED_DIR)))
        for problem in problems:
            st.warning(md_escape(problem))
        return None
    share.restore_model(by_key)  # a shared link's model, on the session's first run
    opened = st.session_state.pop(OPEN_MODEL, None)  # "Show this model" under a training
    if opened in by_key:
        st.session_state["model"] = opened
    if st.session_state.get("model") not in (None, *by_key):
        st.session_state.pop("model")  # its file (or upload) is gone: back to the default
    keys = list(by_key)
    default = by_key.get(f"bundled:{DEFAULT_MODEL}", entries[0]).key
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    key = st.selectbox(
        t("sidebar.model"),
        keys,
        index=keys.index(default),
        format_func=lambda k: t(
            "sidebar.model_option",
            name=by_key[k].name,
            source=t(SOURCES.get(by_key[k].source, "sidebar.source.yours"), lang=lang),
            lang=lang,
        ),
        key="model",
        help=t("sidebar.model_help"),
    )
    for problem in problems:
        st.warning(md_escape(problem))
    upload_box(device)
    entry = by_key[key]
    if entry.key in uploads:
        model, meta = uploads[entry.key].model, uploads[entry.key].meta
    elif entry.source == "pretrained":
        with st.spinner(t("sidebar.loading", name=entry.name)):
            model, meta, task = load_pretrained(device)
        if model is None:
            st.error(md_escape(t("sidebar.cannot_load", name=entry.name, why=meta)))
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
    st.markdown(t("sidebar.task", name=md_escape(task.name)))
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
        label, value = best
        lengths = f"{meta.metrics.get('min_len', '?')}..{meta.metrics.get('max_len', '?')}"
        name_key = METRIC_NAMES.get(task.metric)
        st.metric(
            t(name_key) if name_key else label.capitalize(),
            value,
            help=t("sidebar.metric_help", n=meta.metrics.get("n", "?"), lengths=lengths),
        )
    mode = record.get("w_o", "learned")
    try:
        trained_with = w_o_label(mode)
    except (KeyError, ValueError, AttributeError):
        trained_with = str(mode)  # a checkpoint's record is data: shown as it is
    st.text(
        t("sidebar.size", d_model=c.d_model, heads=c.n_heads, layers=c.n_layers, d_ff=c.d_ff)
        + "\n"
        + t("sidebar.norm_embed", norm=c.norm, embed=c.embed)
        + "\n"
        + t("sidebar.trained", w_o=trained_with, steps=record.get("steps_done", "?"))
        + "\n"
        + t("sidebar.device", device=device.upper())
    )


def pretrained_info(meta: CheckpointMeta, task: Task, device: str) -> None:
    """What the pretrained model is, where it comes from, its licence, sizes and device."""
    c = meta.config
    st.markdown(t("sidebar.task", name=md_escape(task.name)))
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
        t("sidebar.size", d_model=c.d_model, heads=c.n_heads, layers=c.n_layers, d_ff=c.d_ff)
        + "\n"
        + t("sidebar.pretrained_kind", norm=c.norm, pieces=task.max_pieces)
        + "\n"
        + t("sidebar.device", device=device.upper())
    )


def task_description(task: Task) -> str:
    """What the task asks, in the student's language; a task the catalogue does not know yet (a
    new one in tfviz.tasks) keeps its own English description rather than showing a key."""
    key = f"task.{task.name.replace(' ', '_')}.description"
    return t(key) if key in catalogue(current()) else task.description


def chart_format_picker() -> None:
    """PNG or SVG: what the camera in every chart's toolbar saves (tfviz.ui.common.chart)."""
    st.segmented_control(
        t("sidebar.chart_format"),
        CHART_FORMATS,
        default=CHART_FORMATS[0],
        format_func=str.upper,
        key=CHART_FORMAT,
        required=True,
        help=t("sidebar.chart_format_help"),
    )


def switch_state(mode: str | None, layer: int | None, heads: tuple[str, ...]) -> dict:
    """The session_state values that make switch_controls show W_o mode (None: learned) in
    one layer (None: every layer) with heads zeroed: how a shared link is restored."""
    state: dict = {"w_o_mode": mode or "learned"}
    k = rank_of(mode) if mode else None
    if k is not None:  # the radio's "rank" option, with k in its number box
        state["w_o_mode"], state["w_o_rank"] = "rank", k
    state["w_o_scope"] = ALL_LAYERS if layer is None else f"layer {layer}"
    state["ablate"] = list(heads)
    return state


def restore_link(meta: CheckpointMeta, task: Task) -> None:
    """A shared link's switches and sequence(s), checked against the model (first run only)."""
    c = meta.config
    share.restore_for_model(
        n_layers=c.n_layers,
        n_heads=c.n_heads,
        d_model=c.d_model,
        validate=task.validate,
        sentences=task.kind == "sentence",
        switch_state=switch_state,
    )


def switch_controls(meta: CheckpointMeta) -> interventions.Interventions:
    """W_o learned / off / zero / block-diagonal / rank-k, in every layer or one, and heads
    zeroed before W_o. Rank-k asks for k (1..D) and is passed on as the mode "rank:K"."""
    c = meta.config
    lang = current()  # format_func runs outside the script: the language is fixed here
    rank = "rank"  # the radio's option for rank-k; k comes from the number box below it

    def mode_name(mode: str) -> str:
        return t("switch.rank_k", lang=lang) if mode == rank else w_o_label(mode, lang=lang)

    def scope_name(scope: str) -> str:
        if scope == ALL_LAYERS:
            return t("switch.all_layers", lang=lang)
        return t("switch.layer", lang=lang, layer=scope.split()[-1])

    st.subheader(t("switch.title"))
    w_o = st.radio(
        t("switch.w_o"),
        [*W_O_LABELS, rank],
        format_func=mode_name,
        key="w_o_mode",
        help=t("switch.w_o_help"),
    )
    if w_o == rank:
        if st.session_state.get("w_o_rank") not in (None, *range(1, c.d_model + 1)):
            st.session_state.pop("w_o_rank")  # k of a wider model: not a rank of this W_o
        k = st.number_input(
            t("switch.k", d=c.d_model),
            min_value=1,
            max_value=c.d_model,
            value=min(c.d_k, c.d_model),
            step=1,
            key="w_o_rank",
            help=t("switch.k_help", d=c.d_model),
        )
        w_o = f"rank:{int(k)}"
    scopes = [ALL_LAYERS] + [f"layer {lay}" for lay in range(c.n_layers)]
    scope = st.selectbox(t("switch.scope"), scopes, format_func=scope_name, key="w_o_scope")
    ablate = st.multiselect(
        t("switch.ablate"),
        interventions.head_names(c.n_layers, c.n_heads),
        key="ablate",
        placeholder=t("switch.ablate_none"),
        help=t("switch.ablate_help"),
    )
    return interventions.switches(
        w_o,
        None if scope == ALL_LAYERS else int(scope.split()[1]),
        [interventions.parse_head_name(name) for name in ablate],
    )
