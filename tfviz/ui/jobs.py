"""What the views that run jobs share: the server's one job manager, the one job panel, a job's
words in the page's language, and whether the session that started a job is still there.

Training (the Train view), experiment reruns and atlas sweeps ("Does W_o matter?") and the
lessons' training all take their slots from one manager per process
(tfviz.serve.jobs.JobManager), and stop when the browser session that started them has been gone
longer than Streamlit's reconnect grace time. Every view draws its job with one panel
(`job_panel`: its place in the queue, the progress bar with the time left, the stop button, and
how it ended), in that view's own words (`JobWords`). What a job says (tfviz.messages.Message: a
key and values) is worded here (`job_text`). The session's own training (`training_in_progress`,
`resume`) is here too: the address names it, and app.py asks for it on every run without
importing the Train view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from tfviz import settings
from tfviz.messages import Message
from tfviz.serve import jobs
from tfviz.ui import compute, share, state
from tfviz.ui.i18n import current, t
from tfviz.ui.models import user_models_dir
from tfviz.ui.shutdown import drain_on_sigterm
from tfviz.ui.text import md_escape

RECONNECT_GRACE_OPTION = "server.disconnectedSessionTTL"  # how long a dropped session may return
POLL_SECONDS = 0.5  # how often a running job's panel is redrawn


def job_manager() -> jobs.JobManager:
    """One manager for the process (tfviz.ui.compute.once), so the cap on concurrent training
    jobs holds for everyone.

    Experiment reruns (tfviz.ui.views.experiment) and W_o retrainings take their slots from it
    too. From now on SIGTERM lets its running jobs finish first (tfviz.ui.shutdown).
    """
    return compute.once("job_manager", new_manager)


def new_manager() -> jobs.JobManager:
    manager = jobs.JobManager()
    drain_on_sigterm(manager, settings.drain_seconds())
    return manager


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


# ---- the job panel -----------------------------------------------------------------------------


def no_values(snap: jobs.JobState) -> dict:
    """A view whose sentences need no values of its own."""
    return {}


@dataclass(frozen=True)
class JobWords:
    """What one view's job panel says, as catalogue keys.

    waiting: a caption while the session has no job (None: nothing); queued: its place in the
    queue; progress: the progress bar's text (starting, where given, before its first loss);
    stop: the stop button; done, cancelled, failed: how it ended.

    The panel fills each sentence with what the job's state says of it (queued: position;
    progress: step, steps, done; done: seconds; cancelled and failed: message and why, the job's
    Message worded in the page's language), then with the view's own values(snap) (a model's
    name, a task, a loss...), which win.
    """

    queued: str
    progress: str
    stop: str
    done: str
    cancelled: str
    failed: str
    waiting: str | None = None
    starting: str | None = None
    values: Callable[[jobs.JobState], dict] = no_values

    def say(self, key: str, snap: jobs.JobState, **own) -> str:
        """The sentence key in the page's language: the panel's values (own), then the view's."""
        return t(key, **(own | self.values(snap)))


def job_panel(
    job: jobs.Job | None,
    key: str,
    words: JobWords,
    *,
    snap: jobs.JobState | None = None,
    live: Callable[[jobs.JobState], None] | None = None,
    listed: state.Key | None = None,
    every: float = POLL_SECONDS,
) -> jobs.JobState | None:
    """The session's job, drawn in the view's words: a caption while there is none, its
    progress while it is queued or running, or how it ended. Returns the state of a job that has
    ended, for the view to draw what it produced below; None otherwise.

    Progress is a fragment polled every `every` seconds: its place in the queue, or the progress
    bar with the time left (measured on the job's own first steps) and what `live(snap)` draws
    under it (a loss so far); and the stop button, keyed `key`. Once the job ends the whole page
    runs again, and the panel says how it ended: done, stopped or failed, from its Message.

    snap: the state the view already read in this run (one state for the whole run: a job that
    ends mid-run is reported as the view found it). listed: for a job that saves a model, the Key
    holding the id of the job after which the page last ran whole; a job that has finished gets
    one more whole run, so that the model pickers drawn above list the model its sentence names.
    """
    if job is None:
        if words.waiting is not None:
            st.caption(t(words.waiting))
        return None
    snap = job.state() if snap is None else snap
    if snap.active:
        st.fragment(job_progress, run_every=every)(job, key, words, live, listed)
        return None
    if listed is not None and snap.status == jobs.DONE and listed.get() != job.id:
        listed.set(job.id)  # it ended after the sidebar listed the models in this run
        st.rerun()
    job_outcome(snap, words)
    return snap


def job_progress(
    job: jobs.Job,
    key: str,
    words: JobWords,
    live: Callable[[jobs.JobState], None] | None,
    listed: state.Key | None,
) -> None:
    """A queued or running job's progress, polled as a fragment (job_panel); the whole page runs
    again once it ends."""
    snap = job.state()
    if not snap.active:
        if listed is not None:
            listed.set(job.id)
        st.rerun()  # the whole page: the outcome shows, and what the job made (a saved model)
    if snap.position is not None:
        st.info(words.say(words.queued, snap, position=snap.position))
    elif words.starting is not None and snap.loss is None:
        st.progress(snap.fraction, text=t(words.starting))
    else:
        said = words.say(words.progress, snap, step=snap.step, steps=snap.total, done=snap.done)
        st.progress(snap.fraction, text=said + time_left(snap))
        if live is not None:
            live(snap)
    st.button(t(words.stop), key=key, on_click=job.cancel)


def job_outcome(snap: jobs.JobState, words: JobWords) -> None:
    """How an ended job ended, in the view's words: done, stopped (by its stop button, a closed
    session or a server shutting down) or failed, from its Message."""
    if snap.status == jobs.DONE:
        st.success(words.say(words.done, snap, seconds=f"{snap.seconds:.0f}"))
        return
    how = job_text(snap.message)
    if snap.status == jobs.CANCELLED:
        st.warning(words.say(words.cancelled, snap, message=how, why=how))
    else:
        st.error(words.say(words.failed, snap, message=how, why=how))


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
