"""What the Train view's training parts share: the training slots' line, and a training's words
and live loss for the one job panel (tfviz.ui.jobs.job_panel: the bar with the time left, its loss
so far and a button to stop it; the page runs whole once a job that saves a model ends, so that
every picker lists it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from tfviz import plots
from tfviz.serve import jobs
from tfviz.ui.i18n import t
from tfviz.ui.jobs import JobWords, job_text
from tfviz.ui.models import ROOT
from tfviz.ui.text import md_escape
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


def training_words(waiting: str, done: str, values: Callable[[jobs.JobState], dict]) -> JobWords:
    """A training's sentences (a toy model's or a language model's): its name waits for a slot,
    trains step by step with its last loss, is cancelled or fails; waiting and done are the
    part's own, and values(snap) adds what its done sentence says (training_values first)."""
    return JobWords(
        waiting=waiting,
        queued="train.queued",
        progress="train.progress",
        stop="train.cancel",
        done=done,
        cancelled="train.cancelled",
        failed="train.failed",
        values=values,
    )


def training_values(snap: jobs.JobState) -> dict:
    """What every sentence of a training says: the model's name (inert), and the bar its last
    loss."""
    loss = t("train.loss_suffix", loss=f"{snap.losses[-1]:.4f}") if snap.losses else ""
    return {"name": md_escape(snap.spec.name), "loss": loss}


def live_loss(snap: jobs.JobState, chart_key: str) -> None:
    """Under a running job's bar (job_panel's live): what it is doing, and its loss so far."""
    st.caption(job_text(snap.message))
    if snap.losses:
        loss_chart(snap.losses, snap.loss_every, snap.total, chart_key)
