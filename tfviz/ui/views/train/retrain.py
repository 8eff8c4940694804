"""The Train view's second part: retrain W_o alone. A copy of the chosen model with every weight
but W_o frozen, W_o started from identity, zeros, random or the learned one (work.RetrainWoWork);
its accuracy over the steps is drawn against the learned W_o's. Nothing is saved and the shared
model is never changed."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from tfviz import get_task, settings
from tfviz.experiments.experiment import headline_metric
from tfviz.messages import CHOICES
from tfviz.serve import checks, jobs, work
from tfviz.training.train import W_O_STARTS
from tfviz.ui import state
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import JobWords, job_panel, session_alive_check
from tfviz.ui.labels import metric_name, metric_text
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.views.train.progress import live_loss

# Where W_o starts from, worded as a job message words it (tfviz.messages.CHOICES["start"]).
START_PREFIX, STARTS = CHOICES["start"]
START_LABELS = {start: f"{START_PREFIX}{start}" for start in STARTS}
RETRAIN_DEFAULT_STEPS = 300


def retrain_section(view: View, manager: jobs.JobManager) -> None:
    st.caption(t("train.retrain.intro", name=md_escape(view.entry.name)))
    form_col, status_col = st.columns(2)
    with form_col:
        retrain_form(view, manager)
    with status_col:
        live = functools.partial(live_loss, chart_key="retrain_loss")
        snap = job_panel(state.RETRAIN_JOB.get(), "cancel_retrain", WORDS, live=live)
        if snap is not None and snap.status == jobs.DONE:
            retrain_result(snap)


def retrain_form(view: View, manager: jobs.JobManager) -> None:
    lang = current()
    with st.form(key="retrain_form"):
        a, b = st.columns(2)
        start = a.selectbox(
            t("train.retrain.start"),
            W_O_STARTS,
            format_func=lambda s: t(START_LABELS[s], lang=lang),
            key="retrain_start",
            help=t("train.retrain.start_help"),
        )
        # A float input checked below, as the Train form's numbers are (NaN, inf, 2.5, 1e30).
        steps = b.number_input(
            t("train.retrain.steps"),
            value=float(RETRAIN_DEFAULT_STEPS),
            step=50.0,
            format="%.0f",
            key="retrain_steps",
            help=t("train.retrain.steps_help", high=f"{settings.RETRAIN_MAX_STEPS:,}"),
        )
        submitted = st.form_submit_button(
            t("train.retrain.submit"), key="retrain_submit", type="primary"
        )
    if not submitted:
        return
    job = state.RETRAIN_JOB.get()
    if job is not None and job.state().active:
        st.error(t("train.retrain.still_running"))
        return
    try:
        steps = checks.whole_number(steps, "steps", 1, settings.RETRAIN_MAX_STEPS)
        spec = work.RetrainSpec(task=view.task.name, start=start, steps=steps)
        retraining = work.RetrainWoWork(spec, view.model)  # trains a copy: the shared model stays
        job = manager.submit(retraining, is_alive=session_alive_check())
    except (ValueError, jobs.QueueFull) as e:
        st.error(t("train.retrain.not_started", why=why(e)))
        return
    state.RETRAIN_JOB.set(job)
    state.RETRAIN_MODEL_NAME.set(view.entry.name)


def retrain_values(snap: jobs.JobState) -> dict:
    """A retraining's sentences' values: its last loss on the bar; once done, the model, W_o's
    start and the steps."""
    loss = t("train.loss_suffix", loss=f"{snap.loss:.4f}") if snap.loss is not None else ""
    if snap.status != jobs.DONE:
        return {"loss": loss}
    spec: work.RetrainSpec = snap.spec
    name = md_escape(state.RETRAIN_MODEL_NAME.get(""))
    return {"loss": loss, "name": name, "start": t(START_LABELS[spec.start]), "steps": spec.steps}


WORDS = JobWords(
    waiting="train.retrain.progress_here",
    queued="train.retrain.queued",
    progress="train.retrain.progress",
    stop="train.retrain.cancel",
    done="train.retrain.done",
    cancelled="train.retrain.cancelled",
    failed="train.retrain.failed",
    values=retrain_values,
)


def retrain_result(snap: jobs.JobState) -> None:
    """Under a finished retraining's outcome (job_panel says how it ended): the metric over its
    steps beside the learned W_o's."""
    spec: work.RetrainSpec = snap.spec
    result: work.RetrainResult = snap.result
    key = headline_metric(get_task(spec.task))
    label = metric_name(key, capital=True)
    start_label = t(START_LABELS[spec.start])
    a, b, c = st.columns(3)
    learned, start, after = (result.metrics_learned, result.metrics_start, result.metrics_after)
    a.metric(t("train.retrain.learned"), metric_text(key, learned[key]))
    b.metric(t("train.retrain.at_start", start=start_label), metric_text(key, start[key]))
    c.metric(t("train.retrain.after", steps=spec.steps), metric_text(key, after[key]))
    accuracy_chart(result, key, label, spec.steps, learned[key])
    st.caption(t("train.retrain.caption", n=work.RETRAIN_EVAL_N, metric=label))


def accuracy_chart(result: work.RetrainResult, key: str, label: str, steps: int, learned) -> None:
    """The metric over the retraining's steps and the learned W_o's level, as a line each.

    Both axes get their domain here: Vega-Lite otherwise computes it from the data, and its first
    draw, before the data has arrived, warns of an "Infinite extent" in the browser's console.
    """
    import altair as alt  # as st.line_chart would: only this chart needs it

    retrained, learned_name = t("train.retrain.col.retrained"), t("train.retrain.col.learned")
    curve = [m[key] for m in result.curve]
    # Plain column names: a catalogue word may hold "." or ":", which Vega-Lite would parse.
    frame = pd.DataFrame(
        {
            "step": list(result.curve_steps) * 2,
            "value": curve + [learned] * len(curve),
            "line": [retrained] * len(curve) + [learned_name] * len(curve),
        }
    )
    low, high = min(*curve, learned), max(*curve, learned)
    pad = (high - low) * 0.05 or 0.01
    chart = (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=alt.X(
                "step:Q",
                scale=alt.Scale(domain=[0, max(steps, 1)]),
                title=t("train.retrain.step"),
            ),
            y=alt.Y("value:Q", scale=alt.Scale(domain=[low - pad, high + pad]), title=label),
            color=alt.Color("line:N", title=None, legend=alt.Legend(orient="bottom")),
        )
    )
    st.altair_chart(chart, width="stretch")
