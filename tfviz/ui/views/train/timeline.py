"""The Train view's third part: the training timeline. For a model trained in the app, a slider
over its kept steps shows the attention of the typed sequence, head importance and W_o's mixing
index at that step (the scores once per timeline, the sequence's attention at every kept step
once per sequence, so a slider move is a lookup)."""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.training import timeline as tl
from tfviz.ui import compute, state
from tfviz.ui.compute import TIMELINE_N
from tfviz.ui.i18n import current, t, why
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, plot_words


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
    timeline, reason = compute.cached_timeline(*timeline_key, _config=view.model.config)
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
        scores = compute.cached_timeline_scores(
            timeline_key, view.task.name, timeline, config, view.task
        )
    labels, attn = compute.cached_timeline_attention(
        timeline_key, view.task.name, view.text, timeline, config
    )
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
