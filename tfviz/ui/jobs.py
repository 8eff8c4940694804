"""What the views that run jobs share: the server's one job manager, a job's words in the page's
language, and whether the session that started a job is still there.

Training (the Train view), experiment reruns ("Does W_o matter?") and the lessons' training all
take their slots from one manager per process (tfviz.serve.jobs.JobManager), and stop when the
browser session that started them has been gone longer than Streamlit's reconnect grace time. What a
job says (tfviz.messages.Message: a key and values) is worded here (`job_text`). The session's
own training (`training_in_progress`, `resume`) is here too: the address names it, and app.py asks
for it on every run without importing the Train view.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from tfviz import settings
from tfviz.messages import Message, Refused
from tfviz.serve import jobs
from tfviz.ui import share, state
from tfviz.ui.i18n import current, t
from tfviz.ui.models import user_models_dir
from tfviz.ui.shutdown import drain_on_sigterm
from tfviz.ui.text import md_escape

RECONNECT_GRACE_OPTION = "server.disconnectedSessionTTL"  # how long a dropped session may return


@st.cache_resource(show_spinner=False)
def job_manager() -> jobs.JobManager:
    """One manager for the process, so the cap on concurrent training jobs holds for everyone.

    Experiment reruns (tfviz.ui.views.does_w_o_matter) and W_o retrainings take their slots from it
    too. From now on SIGTERM lets its running jobs finish first (tfviz.ui.shutdown).
    """
    manager = jobs.JobManager()
    drain_on_sigterm(manager, settings.drain_seconds())
    return manager


def refusal(e: Exception) -> str:
    """Why a job was not started, in the page's language: the manager's refusals are worded
    from their numbers, a check's (Refused) from its message; any other ValueError (a model
    name the checkpoint module refuses) is shown as it is, inert."""
    if isinstance(e, jobs.Draining):
        return t("jobs.draining")
    if isinstance(e, jobs.QueueFull):
        return t("jobs.queue_full", slots=e.slots, waiting=e.waiting)
    if isinstance(e, Refused):
        return job_text(e.message)
    return md_escape(str(e))


def job_text(message: Message, lang: str | None = None) -> str:
    """A job's or a check's message in the page's language (tfviz.messages: the catalogue
    words it), with names shown inert."""
    return message.text(current() if lang is None else lang, name=md_escape)


def time_left(snap: jobs.JobState, lang: str | None = None) -> str:
    """The progress bar's ending: the time the job's remaining steps take at the speed measured
    on its own first steps (tfviz.serve.jobs.estimate_left), or that it is being measured."""
    if snap.seconds_left is None:
        return t("jobs.left.measuring", lang=lang)
    # Rounded as a clock would not be: to 5 s above 20 s, where the estimate is no finer.
    seconds = round(snap.seconds_left)
    if seconds > 20:
        seconds = 5 * round(seconds / 5)
    minutes, seconds = divmod(seconds, 60)
    left = (
        t("jobs.left.minutes", m=minutes, s=seconds, lang=lang)
        if minutes
        else t("jobs.left.seconds", s=seconds, lang=lang)
    )
    return t("jobs.left.about", left=left, lang=lang)


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

    grace_s = float(st.get_option(RECONNECT_GRACE_OPTION))
    return jobs.alive_with_grace(session_open, grace_s)


def training_in_progress() -> str | None:
    """The name of the model this session is training (queued or running), for the address: a
    page reloaded, or reconnected to another server, can then say what became of it."""
    job = state.TRAIN_JOB.get()
    if job is None or not job.state().active:
        return None
    return job.spec.name


def claim_model(name: str) -> None:
    """This session trains (or trained) the model `name`: the picker says it is theirs
    (trained_here)."""
    names = state.TRAINED_HERE.setdefault([])
    if name not in names:
        names.append(name)


def trained_here() -> frozenset[str]:
    """The names of the models this session trained (or is training): its own, "yours" in the
    picker. A model another visitor trained is in the same folder, but not theirs."""
    names = set(state.TRAINED_HERE.get([]))
    job = state.TRAIN_JOB.get()
    if job is not None:  # also a training taken back after a reload (resume)
        names.add(job.spec.name)
    return frozenset(names)


def resume(name: str) -> None:
    """A reloaded or reconnected page whose address says it was training `name`: take the job
    back if this server runs it, else say whether the model was saved or the training was lost
    (it ran on a server that stopped: a restart, or a replica that died)."""
    try:
        job = job_manager().training(name)
    except ValueError:  # a bad TFVIZ_MAX_JOBS setting: the Train tab says so
        return
    if job is not None:
        state.TRAIN_JOB.set(job)
        reason = "training_running"
    elif (user_models_dir() / f"{name}.safetensors").is_file():
        # Its trainer's own address (a shared link carries no training): the model is theirs.
        claim_model(name)
        reason = "training_done"
    else:
        reason = "training_lost"
    share.add_notice(share.Notice(share.TRAINING, reason, name))
