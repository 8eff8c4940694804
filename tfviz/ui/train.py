"""The Train view: train a small model in a worker thread, watch it, and open it when saved.

Training runs under one server-wide cap (jobs.JobManager, one per process); a job stops when the
browser session that started it has been gone longer than Streamlit's reconnect grace time. A
saved model goes to the user models folder and into every session's picker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from tfviz import get_task, jobs, list_tasks, plots, settings
from tfviz.checkpoint import safe_model_path
from tfviz.metrics import headline
from tfviz.ui.common import POLL_SECONDS, TRAINS_TOYS, View, chart, md_escape, toy_only
from tfviz.ui.models import ROOT, bundled_names, user_models_dir

TRAIN_W_O_LABELS = {"learned": "learn W_o", "identity": "no W_o (identity)"}
LISTED_AFTER = "_train_listed_after"  # session_state: id of the job the picker was listed after


@st.cache_resource(show_spinner=False)
def job_manager() -> jobs.JobManager:
    """One manager for the process, so the cap on concurrent training jobs holds for everyone.

    Experiment reruns (tfviz.ui.experiment) take their slots from this manager too.
    """
    return jobs.JobManager()


def render(view: View) -> None:
    if toy_only(view, "Training", TRAINS_TOYS):
        return
    try:
        manager = job_manager()
    except ValueError as e:  # a bad TFVIZ_MAX_JOBS / TFVIZ_MAX_QUEUE setting on the server
        st.error(md_escape(f"Training is not available: {e}"))
        return
    folder = user_models_dir()
    form_col, status_col = st.columns(2)
    with form_col:
        train_form(manager, folder, default_task=view.task.name)
    with status_col:
        running, queued = manager.counts()
        # A path outside the app folder is the server's business, not every student's.
        shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder.name
        st.caption(
            md_escape(
                f"Training slots: {running} of {manager.max_jobs} busy, {queued} waiting. "
                f"Models are saved in {shown}/ and listed in the picker for everyone."
            )
        )
        job: jobs.Job | None = st.session_state.get("train_job")
        if job is None:
            st.caption("Your training job will show its progress here.")
            return
        snap = job.snapshot()
        if snap.active:
            job_progress(job)
            return
        if snap.status == jobs.DONE and st.session_state.get(LISTED_AFTER) != job.id:
            # It ended after the sidebar listed the models in this run: list them again, so
            # the picker holds the model the message below says it holds.
            st.session_state[LISTED_AFTER] = job.id
            st.rerun()
        job_result(snap)


def train_form(manager: jobs.JobManager, folder: Path, default_task: str) -> None:
    tasks = list_tasks()
    with st.form("train_form"):
        task = st.selectbox("Task", tasks, index=tasks.index(default_task), key="train_task")
        a, b, c, d = st.columns(4)
        d_model = a.selectbox("d_model", [16, 32, 64, 128, 256], index=2, key="train_d_model")
        n_heads = b.selectbox("Heads", [1, 2, 4, 8], index=2, key="train_heads")
        n_layers = c.selectbox("Layers", [1, 2, 3, 4], index=1, key="train_layers")
        d_ff = d.selectbox("d_ff", [32, 64, 128, 256, 512], index=2, key="train_d_ff")
        # The numbers are float inputs without widget bounds, checked below with a message that
        # names the field: Streamlit silently puts an out-of-range value back to the default,
        # and an int input fails inside Streamlit itself when a request sends NaN or inf.
        a, b, c = st.columns(3)
        steps = a.number_input(
            "Steps",
            value=1000.0,
            step=100.0,
            format="%.0f",
            key="train_steps",
            help=f"A whole number from 1 to {settings.MAX_STEPS:,}.",
        )
        lr = b.number_input(
            "Learning rate",
            value=3e-3,
            step=5e-4,
            format="%g",
            key="train_lr",
            help=f"From {settings.MIN_LR:g} to {settings.MAX_LR:g}.",
        )
        seed = c.number_input(
            "Seed",
            value=0.0,
            step=1.0,
            format="%.0f",
            key="train_seed",
            help=f"A whole number from 0 to {settings.MAX_SEED:,}; one seed, one model.",
        )
        w_o = st.radio(
            "W_o",
            list(TRAIN_W_O_LABELS),
            format_func=TRAIN_W_O_LABELS.get,
            key="train_w_o",
            horizontal=True,
            help="no W_o: the model is trained with concat going straight into the residual "
            "stream, to see what it can do without mixing heads.",
        )
        name = st.text_input(
            "Model name",
            value="my_model",
            key="train_name",
            max_chars=64,
            help="Letters, digits, '_', '-' and '.'; saved as NAME.safetensors.",
        )
        submitted = st.form_submit_button("Start training", key="train_submit", type="primary")
    if not submitted:
        return
    job = st.session_state.get("train_job")
    if job is not None and job.snapshot().active:
        st.error("Your training job is still running: cancel it or wait for it to finish.")
        return
    numbers, problems = form_numbers(steps, lr, seed)
    try:
        safe_model_path(folder, name, reserved=bundled_names())  # nothing is written yet
    except ValueError as e:
        problems.append(str(e))
    if problems:
        st.error("Training not started:\n\n" + "\n".join(f"- {md_escape(p)}" for p in problems))
        return
    spec = jobs.JobSpec(
        task=task,
        name=name,
        d_model=int(d_model),
        n_heads=int(n_heads),
        n_layers=int(n_layers),
        d_ff=int(d_ff),
        w_o=w_o,
        **numbers,
    )
    try:
        work = jobs.TrainWork(spec, folder, reserved=bundled_names())
        st.session_state["train_job"] = manager.submit(work, is_alive=session_alive_check())
    except (ValueError, jobs.QueueFull) as e:
        st.error(md_escape(str(e)))


def form_numbers(steps, lr, seed) -> tuple[dict, list[str]]:
    """The Train form's numbers checked: ({steps, lr, seed}, []) or ({...}, what is wrong)."""
    numbers, problems = {}, []
    checks = (
        ("steps", lambda: jobs.whole_number(steps, "Steps", 1, settings.MAX_STEPS)),
        (
            "lr",
            lambda: jobs.number_in_range(lr, "The learning rate", settings.MIN_LR, settings.MAX_LR),
        ),
        ("seed", lambda: jobs.whole_number(seed, "The seed", 0, settings.MAX_SEED)),
    )
    for field, check in checks:
        try:
            numbers[field] = check()
        except ValueError as e:
            problems.append(str(e))
    return numbers, problems


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

    grace_s = float(st.get_option("server.disconnectedSessionTTL"))
    return jobs.alive_with_grace(session_open, grace_s)


@st.fragment(run_every=POLL_SECONDS)
def job_progress(job: jobs.Job) -> None:
    """Live progress of a queued or running job, polled; reruns the page once it ends."""
    snap = job.snapshot()
    if not snap.active:
        st.session_state[LISTED_AFTER] = job.id
        st.rerun()  # the whole page: the result shows, and a saved model joins the picker
    name = md_escape(snap.spec.name)
    if snap.position is not None:
        st.info(
            f"{name} is waiting for a free training slot: position {snap.position} in the queue."
        )
    else:
        loss = f" · loss {snap.losses[-1]:.4f}" if snap.losses else ""
        st.progress(
            snap.step / snap.spec.steps,
            text=f"Training {name}: step {snap.step} of {snap.spec.steps}{loss}",
        )
        st.caption(md_escape(snap.message))
        if snap.losses:
            chart(plots.loss_curve(snap.losses, snap.loss_every, snap.spec.steps), key="live_loss")
    st.button("Cancel training", key="cancel_training", on_click=job.cancel)


def job_result(snap: jobs.JobSnapshot) -> None:
    """How a finished job ended, its loss curve, and a button to open the saved model."""
    name = snap.spec.name
    if snap.status == jobs.DONE:
        best = headline(get_task(snap.spec.task).metric, snap.result.metrics)
        score = f" ({best[0]} {best[1]})" if best else ""
        st.success(
            md_escape(
                f"Trained {name} in {snap.seconds:.0f} s{score}. It is in the model picker "
                f"as '{name} (yours)'."
            )
        )
        st.button(
            "Show this model", key="open_trained", on_click=set_model, args=(f"yours:{name}",)
        )
    elif snap.status == jobs.CANCELLED:
        st.warning(md_escape(f"{name}: {snap.message}"))
    else:
        st.error(md_escape(f"Training {name} failed: {snap.message}"))
    if snap.losses:
        chart(plots.loss_curve(snap.losses, snap.loss_every, snap.spec.steps), key="final_loss")


def set_model(key: str) -> None:
    st.session_state["model"] = key
