"""The Train view's first part: train a model. A worker thread trains it (work.TrainWork); it is
saved to the user models folder with its timeline beside it, and joins every session's picker."""

from __future__ import annotations

import functools
import secrets
from pathlib import Path

import streamlit as st

from tfviz import get_task, list_tasks, settings
from tfviz.messages import Refused
from tfviz.serve import checks, jobs, work
from tfviz.training.checkpoint import safe_model_path
from tfviz.training.recipes import CLASS_SIZES, class_recipe, learned
from tfviz.ui import state
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import claim_model, job_panel, session_alive_check
from tfviz.ui.labels import metric_name, metric_text, task_label, task_short
from tfviz.ui.models import SOURCES, bundled_names, user_models_dir
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.views.train.fields import seed_box, w_o_radio
from tfviz.ui.views.train.progress import (
    live_loss,
    loss_chart,
    slots_caption,
    training_values,
    training_words,
)


def train_section(view: View, manager: jobs.JobManager) -> None:
    folder = user_models_dir()
    form_col, status_col = st.columns(2)
    with form_col:
        train_form(manager, folder, default_task=view.task.name)
    with status_col:
        slots_caption(manager, folder)
        snap = job_panel(
            state.TRAIN_JOB.get(),
            "cancel_training",
            WORDS,
            live=functools.partial(live_loss, chart_key="live_loss"),
            listed=state.TRAIN_LISTED_AFTER,
        )
        if snap is not None:
            after_training(snap)


def train_form(manager: jobs.JobManager, folder: Path, default_task: str) -> None:
    task, name = task_and_name(folder, default_task)
    with st.form(key="train_form"):
        fields = form_fields(task)
        submitted = st.form_submit_button(t("train.submit"), key="train_submit", type="primary")
    if submitted:
        start_training(manager, folder, task, name, fields)


def task_and_name(folder: Path, default_task: str) -> tuple[str, str]:
    """The task and the model's name, above the form, and what the task's first run reaches."""
    tasks = list_tasks()
    if not state.TRAIN_TASK.is_set():  # the session's first visit: the model's task
        state.TRAIN_TASK.set(default_task)
        use_task_defaults(folder)
    if state.TRAIN_NAME_USED.pop(False):
        propose_name(folder)
    # Outside the form: picking a task puts its own defaults into the form (a widget inside a
    # form changes nothing until the form is submitted).
    task = st.selectbox(
        t("train.task"),
        tasks,
        format_func=functools.partial(task_label, lang=current()),
        key=state.TRAIN_TASK.name,
        on_change=use_task_defaults,
        args=(folder,),
    )
    # Outside the form too, so that the name follows a change of task unless one was typed. No
    # max_chars: the browser would silently refuse a longer paste; the check below says what the
    # limit is instead.
    name = st.text_input(t("train.name"), key=state.TRAIN_NAME.name, help=t("train.name_help"))
    recipe, metric_key = class_recipe(task), get_task(task).metric
    st.caption(
        t(
            "train.expect",
            level=metric_text(metric_key, recipe.expected),
            metric=metric_name(metric_key, capital=True),
        )
    )
    return task, name


def form_fields(task: str) -> dict:
    """The Train form's widgets (inside the form): the model's sizes, the training's numbers
    (checked on submit), its W_o and whether the model is causal."""
    recipe = class_recipe(task)
    a, b, c, d = st.columns(4)
    # The first-run sizes (CLASS_SIZES) chosen, which the weak-result hints compare with.
    fields = {
        "d_model": size_box(a, "train.d_model", [16, 32, 64, 128, 256], "d_model", "train_d_model"),
        "n_heads": size_box(b, "train.heads", [1, 2, 4, 8], "n_heads", "train_heads"),
        "n_layers": size_box(c, "train.layers", [1, 2, 3, 4], "n_layers", "train_layers"),
        "d_ff": size_box(d, "train.d_ff", [32, 64, 128, 256, 512], "d_ff", "train_d_ff"),
    }
    # The numbers are float inputs without widget bounds, checked on submit with a message that
    # names the field: Streamlit silently puts an out-of-range value back to the default, and an
    # int input fails inside Streamlit itself when a request sends NaN or inf. Their values are
    # the task's first-run recipe, put into session_state by use_task_defaults.
    a, b, c = st.columns(3)
    fields["steps"] = a.number_input(
        t("train.steps"),
        value=float(recipe.steps),  # also what Streamlit puts back for NaN or inf
        step=100.0,
        format="%.0f",
        key=state.TRAIN_STEPS.name,
        help=t("train.steps_help", high=f"{settings.MAX_STEPS:,}"),
    )
    fields["lr"] = b.number_input(
        t("train.lr"),
        value=recipe.lr,
        step=5e-4,
        format="%g",
        key=state.TRAIN_LR.name,
        help=t("train.lr_help", low=f"{settings.MIN_LR:g}", high=f"{settings.MAX_LR:g}"),
    )
    fields["seed"] = seed_box(c, 0.0, "train_seed")
    fields["w_o"] = w_o_radio("train_w_o")
    # A causal model reads its answer at the last token: only the tasks with one answer per
    # sequence can be learned so (use_task_defaults clears the box for the others).
    learns_causally = get_task(task).learns_causally
    causal = st.checkbox(
        t("train.causal"),
        key=state.TRAIN_CAUSAL.name,
        disabled=not learns_causally,
        help=t("train.causal_help", tasks=causal_tasks()),
    )
    fields["causal"] = bool(causal) and learns_causally
    return fields


def start_training(
    manager: jobs.JobManager, folder: Path, task: str, name: str, fields: dict
) -> None:
    """The submitted form: its numbers and name checked, then the training submitted as this
    session's job; what is wrong is said instead."""
    job = state.TRAIN_JOB.get()
    if job is not None and job.state().active:
        st.error(t("train.still_running"))
        return
    numbers, problems = form_numbers(fields["steps"], fields["lr"], fields["seed"])
    try:
        safe_model_path(folder, name, reserved=bundled_names())  # nothing is written yet
    except ValueError as e:
        problems.append(why(e))
    if problems:
        listed = "\n".join(f"- {p}" for p in problems)
        st.error(t("train.not_started", problems=listed))
        return
    sizes = {size: int(fields[size]) for size in CLASS_SIZES}
    spec = work.JobSpec(
        task=task, name=name, w_o=fields["w_o"], causal=fields["causal"], **sizes, **numbers
    )
    try:
        training = work.TrainWork(spec, folder, reserved=bundled_names())
        job = manager.submit(training, is_alive=session_alive_check())
    except (ValueError, jobs.QueueFull) as e:
        st.error(why(e))
        return
    state.TRAIN_JOB.set(job)
    claim_model(job.spec.name)
    # The name is taken now: the next run of the form proposes another free one (this run's
    # name field is drawn already and cannot be changed).
    state.TRAIN_NAME_USED.set(True)


def causal_tasks() -> str:
    """The tasks a causal model can learn, by their short names in the page's language."""
    names = [task_short(name) for name in list_tasks() if get_task(name).learns_causally]
    return t("train.causal_sep").join(names)


def size_box(col, label: str, options: list[int], size: str, key: str) -> int:
    """A model-size picker of the Train form, on the first-run size (CLASS_SIZES[size])."""
    return col.selectbox(t(label), options, index=options.index(CLASS_SIZES[size]), key=key)


def use_task_defaults(folder: Path) -> None:
    """Put the chosen task's first-run recipe into the form, and a free name for it unless the
    student typed a name of their own (an on_change callback: it runs before the widgets)."""
    task = state.TRAIN_TASK.get()
    recipe = class_recipe(task)
    state.TRAIN_STEPS.set(float(recipe.steps))
    state.TRAIN_LR.set(recipe.lr)
    if not get_task(task).learns_causally:
        state.TRAIN_CAUSAL.set(False)  # the box is off for this task: not ticked either
    if state.TRAIN_NAME.get() in (None, "", state.TRAIN_NAME_PROPOSED.get()):
        propose_name(folder)


def propose_name(folder: Path) -> None:
    name = free_name(state.TRAIN_TASK.get(), folder)
    state.TRAIN_NAME.set(name)
    state.TRAIN_NAME_PROPOSED.set(name)


def free_name(task: str, folder: Path) -> str:
    """A model name no saved model has: the task and a short random suffix (reverse_3f9a), so
    forty students pressing Start with the defaults never take each other's name."""
    taken = bundled_names()
    for _ in range(100):
        name = f"{task}_{secrets.token_hex(2)}"
        if name not in taken and not (folder / f"{name}.safetensors").exists():
            return name
    return f"{task}_{secrets.token_hex(6)}"  # 100 collisions in 65,536 names: a full folder


def form_numbers(steps, lr, seed) -> tuple[dict, list[str]]:
    """The Train form's numbers checked: ({steps, lr, seed}, []) or ({...}, what is wrong, in
    the page's language)."""
    numbers, problems = {}, []
    fields = (
        ("steps", lambda: checks.whole_number(steps, "steps", 1, settings.MAX_STEPS)),
        ("lr", lambda: checks.number_in_range(lr, "lr", settings.MIN_LR, settings.MAX_LR)),
        ("seed", lambda: checks.whole_number(seed, "seed", 0, settings.MAX_SEED)),
    )
    for field, check in fields:
        try:
            numbers[field] = check()
        except Refused as e:
            problems.append(why(e))
    return numbers, problems


def reached(snap: jobs.JobState) -> float | None:
    """The task's metric a finished training reached on fresh examples (None if not measured)."""
    return snap.result.metrics.get(get_task(snap.spec.task).metric)


def train_values(snap: jobs.JobState) -> dict:
    """A training's sentences' values; once done, its score and its name in the picker."""
    values = training_values(snap)
    if snap.status != jobs.DONE:
        return values
    metric, value = get_task(snap.spec.task).metric, reached(snap)
    # The metric's name from the catalogue: the library's label is English.
    shown = metric_text(metric, value) if value is not None else None
    score = t("train.done_score", metric=metric_name(metric, capital=True), value=shown)
    listed = t("sidebar.model_option", name=snap.spec.name, source=t(SOURCES["yours"]))
    return values | {"score": md_escape(score if shown else ""), "listed": md_escape(listed)}


WORDS = training_words("train.progress_here", "train.done", train_values)


def after_training(snap: jobs.JobState) -> None:
    """Under a finished training's outcome (job_panel says how it ended): a model that did not
    learn its task is said to be one, with what to change; a button opens the saved model; and
    its loss curve."""
    if snap.status == jobs.DONE:
        task, value = get_task(snap.spec.task), reached(snap)
        if value is not None and not learned(task.name, task.metric, value):
            st.warning(weak_result(snap.spec, task.metric, value))
        if st.button(t("train.open"), key="open_trained"):
            # The button is in the main area, a fragment: its click reruns only the fragment,
            # and the sidebar's picker would not change. The picker takes the model on the
            # whole-page run asked for here (sidebar.pick_model, before it is drawn).
            state.OPEN_MODEL.set(f"yours:{snap.spec.name}")
            st.rerun(scope="app")
    if snap.losses:
        loss_chart(snap.losses, snap.loss_every, snap.spec.steps, "final_loss")


def weak_result(spec: work.JobSpec, metric: str, value: float) -> str:
    """Said under a model that did not reach its task's first-run level: how far it got, what the
    task's defaults reach, and what to change (the settings that differ from them first)."""
    recipe = class_recipe(spec.task)
    hints = []
    if spec.lr != recipe.lr:
        hints.append(t("train.weak.lr", lr=f"{recipe.lr:g}"))
    if spec.steps < recipe.steps:
        hints.append(t("train.weak.steps", steps=f"{recipe.steps:,}"))
    sizes = (spec.d_model, spec.n_heads, spec.n_layers, spec.d_ff)
    if sizes != tuple(CLASS_SIZES.values()):
        hints.append(t("train.weak.sizes", **CLASS_SIZES))
    if spec.w_o != "learned":
        hints.append(t("train.weak.w_o"))
    if not hints:  # the defaults themselves, on an unlucky seed
        hints.append(t("train.weak.seed"))
    return t(
        "train.weak",
        name=md_escape(spec.name),
        reached=metric_text(metric, value),
        expected=metric_text(metric, recipe.expected),
        hints="\n".join(f"- {hint}" for hint in hints),
    )
