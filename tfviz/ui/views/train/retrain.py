"""The Train view's second part: retrain W_o alone. A copy of the chosen model with every weight
but W_o frozen, W_o started from identity, zeros, random or the learned one (work.RetrainWoWork);
its accuracy over the steps is drawn against the learned W_o's. Nothing is saved and the shared
model is never changed."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tfviz import get_task, settings
from tfviz.experiments.experiment import headline_metric
from tfviz.messages import CHOICES
from tfviz.serve import checks, jobs, work
from tfviz.training.train import W_O_STARTS
from tfviz.ui import state
from tfviz.ui.i18n import current, t
from tfviz.ui.jobs import job_text, refusal, session_alive_check, time_left
from tfviz.ui.labels import METRIC_NAMES, metric_text
from tfviz.ui.text import md_escape
from tfviz.ui.view import POLL_SECONDS, View
from tfviz.ui.views.train.progress import loss_chart

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
        job: jobs.Job | None = state.RETRAIN_JOB.get()
        if job is None:
            st.caption(t("train.retrain.progress_here"))
            return
        snap = job.state()
        if snap.active:
            retrain_progress(job)
        else:
            retrain_result(snap, state.RETRAIN_MODEL_NAME.get(""))


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
        st.error(t("train.retrain.not_started", why=refusal(e)))
        return
    state.RETRAIN_JOB.set(job)
    state.RETRAIN_MODEL_NAME.set(view.entry.name)


@st.fragment(run_every=POLL_SECONDS)
def retrain_progress(job: jobs.Job) -> None:
    """Live progress of this session's W_o retraining, polled; reruns the page once it ends."""
    snap = job.state()
    if not snap.active:
        st.rerun()
    if snap.position is not None:
        st.info(t("train.retrain.queued", position=snap.position))
    else:
        loss = t("train.loss_suffix", loss=f"{snap.loss:.4f}") if snap.loss is not None else ""
        st.progress(
            snap.fraction,
            text=t("train.retrain.progress", step=snap.step, steps=snap.total, loss=loss)
            + time_left(snap),
        )
        st.caption(job_text(snap.message))
        if snap.losses:
            loss_chart(snap.losses, snap.loss_every, snap.total, "retrain_loss")
    st.button(t("train.retrain.cancel"), key="cancel_retrain", on_click=job.cancel)


def retrain_result(snap: jobs.JobState, model_name: str) -> None:
    """The metric over the retraining's steps beside the learned W_o's, or how it ended."""
    spec: work.RetrainSpec = snap.spec
    if snap.status == jobs.CANCELLED:
        st.warning(t("train.retrain.cancelled", why=job_text(snap.message)))
        return
    if snap.status != jobs.DONE:
        st.error(t("train.retrain.failed", why=job_text(snap.message)))
        return
    result: work.RetrainResult = snap.result
    key = headline_metric(get_task(spec.task))
    label = t(METRIC_NAMES[key])
    start_label = t(START_LABELS[spec.start])
    st.success(
        t(
            "train.retrain.done",
            name=md_escape(model_name),
            start=start_label,
            steps=spec.steps,
            seconds=f"{snap.seconds:.0f}",
        )
    )
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
