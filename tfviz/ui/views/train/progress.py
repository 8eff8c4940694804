"""What the Train view's training parts share: the training slots' line, a job's live progress
(the bar with the time left, its loss so far and a button to stop it), and the page's rerun once
a job that saves a model ends, so that every picker lists it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tfviz import plots
from tfviz.serve import jobs
from tfviz.ui import state
from tfviz.ui.i18n import t
from tfviz.ui.jobs import job_text, time_left
from tfviz.ui.models import ROOT
from tfviz.ui.text import md_escape
from tfviz.ui.view import POLL_SECONDS
from tfviz.ui.widgets import chart, plot_words


def loss_chart(losses, every: int, steps: int, key: str) -> None:
    """A job's loss so far (or all of it), in the student's words."""
    chart(plots.loss_curve(losses, every, steps, words=plot_words()), key=key)


def slots_caption(manager: jobs.JobManager, folder: Path) -> None:
    """How many training slots are busy, and where models are saved."""
    running, queued = manager.counts()
    # A path outside the app folder is the server's business, not every student's.
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder.name
    st.caption(
        t(
            "train.slots",
            running=running,
            slots=manager.max_jobs,
            queued=queued,
            folder=md_escape(f"{shown}/"),
        )
    )


def follow_job(
    job: jobs.Job | None,
    listed: state.Key,
    waiting_key: str,
    cancel_key: str = "cancel_training",
    chart_key: str = "live_loss",
) -> jobs.JobState | None:
    """This session's training job, which saves a model: its live progress while it is queued
    or running (None), or its final state once it has ended, after one whole-page run that lists
    the models again (listed: the Key holding the id of the job they were last listed after).
    No job yet: the caption waiting_key says where its progress will show."""
    if job is None:
        st.caption(t(waiting_key))
        return None
    snap = job.state()
    if snap.active:
        job_progress(job, listed, cancel_key, chart_key)
        return None
    if snap.status == jobs.DONE and listed.get() != job.id:
        # It ended after the sidebar listed the models in this run: list them again, so
        # the picker holds the model the message below says it holds.
        listed.set(job.id)
        st.rerun()
    return snap


@st.fragment(run_every=POLL_SECONDS)
def job_progress(
    job: jobs.Job,
    listed: state.Key,
    cancel_key: str = "cancel_training",
    chart_key: str = "live_loss",
) -> None:
    """Live progress of a queued or running training, polled: the bar with the time left
    (measured on the job's own first steps), its loss so far and a button to stop it; reruns the
    page once it ends."""
    snap = job.state()
    if not snap.active:
        listed.set(job.id)
        st.rerun()  # the whole page: the result shows, and a saved model joins the picker
    name = md_escape(snap.spec.name)
    if snap.position is not None:
        st.info(t("train.queued", name=name, position=snap.position))
    else:
        loss = t("train.loss_suffix", loss=f"{snap.losses[-1]:.4f}") if snap.losses else ""
        said = t("train.progress", name=name, step=snap.step, steps=snap.total, loss=loss)
        st.progress(snap.fraction, text=said + time_left(snap))
        st.caption(job_text(snap.message))
        if snap.losses:
            loss_chart(snap.losses, snap.loss_every, snap.total, chart_key)
    st.button(t("train.cancel"), key=cancel_key, on_click=job.cancel)
