"""The Train view's third part: the training timeline. For a model trained in the app, a slider
over its kept steps shows the attention of the typed sequence, head importance and W_o's mixing
index at that step (the scores once per timeline, the sequence's attention at every kept step
once per sequence, so a slider move is a lookup)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz import get_task, plots
from tfviz.refusal import Refusal, cause
from tfviz.training import timeline as tl
from tfviz.training.checkpoint import CheckpointError
from tfviz.ui import state
from tfviz.ui.i18n import current, t, why
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, plot_words

TIMELINE_N = 64  # fresh examples behind the head importance at each step of a timeline


# The timeline caches are keyed by the file (path, mtime, size) and the model's digest: the
# timeline and model objects themselves are passed unhashed.
@st.cache_resource(show_spinner=False, max_entries=16)
def cached_timeline(
    path: str, mtime_ns: int, size: int, digest: str, _config
) -> tuple[tl.Timeline | None, Refusal | str]:
    """(timeline, "") for a model's timeline file, or (None, why it cannot be read: the
    CheckpointError or the OSError's cause (tfviz.refusal.cause), worded in each session's
    language). Shared by every session: read-only (model_at builds a fresh model from it)."""
    try:
        return tl.load_timeline(path, _config), ""
    except CheckpointError as e:
        return None, e.detached()
    except OSError as e:
        return None, cause(e)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_scores(timeline_key: tuple, task_name: str, _timeline, _config, _task) -> tl.Scores:
    """W_o's mixing and head importance at every kept step, once per timeline: they do not
    depend on the typed sequence, so a slider move need not compute them."""
    return tl.scores(_timeline, _config, _task, n=TIMELINE_N)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_attention(
    timeline_key: tuple, task_name: str, text: str, _timeline, _config
) -> tuple[list[str], np.ndarray]:
    """(labels, (S, L, H, T, T)): the typed sequence's attention at every kept step, once per
    timeline and sequence. All steps at once: a small forward pass each for a bundled-size
    model, so every slider move is a lookup; one step at a time, a move to a new step was
    measurably slower than a move back (bench/timeline_slider.py)."""
    task = get_task(task_name)
    each = [tl.attention_at(_timeline, i, _config, task, text) for i in range(len(_timeline.steps))]
    return each[0][0], np.stack([attn for _, attn in each])


def timeline_section(view: View) -> None:
    st.caption(t("train.timeline.intro"))
    if not view.entry.path:  # an upload lives in memory only, and a timeline is a file beside
        st.info(t("train.timeline.none_upload"))
        return
    path = tl.timeline_path(view.entry.path)
    if not path.is_file():
        bundled = view.entry.source == "bundled"
        key = "train.timeline.none_bundled" if bundled else "train.timeline.none"
        st.info(t(key, name=md_escape(view.entry.name)))
        return
    if view.text is None:
        st.info(t("train.timeline.need_sequence"))
        return
    stat = path.stat()
    timeline_key = (str(path), stat.st_mtime_ns, stat.st_size, view.entry.digest)
    timeline, reason = cached_timeline(*timeline_key, _config=view.model.config)
    if timeline is None:
        st.error(t("train.timeline.unreadable", why=why(reason)))
        return
    steps = timeline.steps
    if state.TIMELINE_STEP.get() not in steps:  # another model's step
        state.TIMELINE_STEP.set(steps[-1])
    lang = current()
    step = st.select_slider(
        t("train.timeline.slider"),
        options=steps,
        format_func=lambda s: t("train.timeline.step_option", step=s, lang=lang),
        key=state.TIMELINE_STEP.name,
        help=t("train.timeline.slider_help", n=len(steps)),
    )
    config, index = view.model.config, steps.index(step)
    with st.spinner(t("train.timeline.computing", n=len(steps))):
        scores = cached_scores(timeline_key, view.task.name, timeline, config, view.task)
    labels, attn = cached_attention(timeline_key, view.task.name, view.text, timeline, config)
    rep = scores.at(index, labels, attn[index])
    st.caption(
        t("train.timeline.at", step=rep.step, last=steps[-1], loss=f"{rep.loss:.4g}", n=TIMELINE_N)
    )
    columns = st.columns(len(rep.mixing))
    for layer, (col, value) in enumerate(zip(columns, rep.mixing, strict=True)):
        col.metric(t("train.timeline.mixing", layer=layer), f"{value:.3f}")
    chart(
        plots.attention_grid(
            rep.attn,
            rep.labels,
            title=t("train.timeline.attention", step=rep.step),
            words=plot_words(),
        ),
        key="timeline_attention",
    )
    chart(
        plots.head_score_map(
            rep.importance,
            title=t("train.timeline.importance", step=rep.step),
            value=t("train.timeline.loss_change"),
            words=plot_words(),
        ),
        key="timeline_importance",
    )
