"""The Train view's language part: train a small character language model on the bundled
Shakespeare corpus. A worker thread trains it (work.LanguageWork); it is saved as a model folder in
the user models folder, with its validation loss and induction score, and joins every session's
picker (tfviz.ui.folders lists it). Its progress is the toy training's: the bar with the time left
measured on the job's own first steps, the loss so far and a button to stop it."""

from __future__ import annotations

import functools
import secrets
from pathlib import Path

import streamlit as st

from tfviz import settings
from tfviz.core.interventions import head_name
from tfviz.serve import jobs, work
from tfviz.training.checkpoint import safe_model_path
from tfviz.ui import folders, state
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import claim_model, job_panel, session_alive_check
from tfviz.ui.models import bundled_names, user_models_dir
from tfviz.ui.text import md_escape
from tfviz.ui.views.train.fields import seed_box, w_o_radio
from tfviz.ui.views.train.new_model import form_numbers
from tfviz.ui.views.train.progress import (
    live_loss,
    loss_chart,
    slots_caption,
    training_values,
    training_words,
)

LAYERS = list(range(work.LM_LAYERS[0], work.LM_LAYERS[1] + 1))
HEADS = [1, 2, 4, 8]
DEFAULTS = work.LanguageSpec(name="")  # the form's first values: the spec's defaults


def language_section(manager: jobs.JobManager) -> None:
    folder = user_models_dir()
    st.caption(t("train.lm.intro"))
    form_col, status_col = st.columns(2)
    with form_col:
        language_form(manager, folder)
    with status_col:
        slots_caption(manager, folder)
        snap = job_panel(
            state.LM_JOB.get(),
            "cancel_lm",
            WORDS,
            live=functools.partial(live_loss, chart_key="lm_live_loss"),
            listed=state.LM_LISTED_AFTER,
        )
        if snap is not None:
            after_training(snap)


def reserved_names() -> frozenset[str]:
    """Names a language model may not take: the bundled toy models' and language models'."""
    root = folders.LANGUAGE_DIR
    bundled_lm = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    return bundled_names() | bundled_lm


def free_name(folder: Path) -> str:
    """A name no saved model (folder or checkpoint) has: "shakespeare_" and a short random
    suffix, so a class pressing Start with the defaults never takes each other's name."""
    taken = reserved_names()
    for _ in range(100):
        name = f"shakespeare_{secrets.token_hex(2)}"
        used = (folder / name).exists() or (folder / f"{name}.safetensors").exists()
        if name not in taken and not used:
            return name
    return f"shakespeare_{secrets.token_hex(6)}"


def language_form(manager: jobs.JobManager, folder: Path) -> None:
    if not state.LM_NAME.is_set() or state.LM_NAME_USED.pop(False):
        state.LM_NAME.set(free_name(folder))
    with st.form(key="lm_form"):
        fields = model_fields() | training_fields()
        # No max_chars: the check on submit says what the limit is (see the toy form's name).
        fields["name"] = st.text_input(
            t("train.name"), key=state.LM_NAME.name, help=t("train.lm.name_help")
        )
        submitted = st.form_submit_button(t("train.lm.submit"), key="lm_submit", type="primary")
    if submitted:
        start_language(manager, folder, fields)


def model_fields() -> dict:
    """The language form's model (inside the form): layers, heads, D, context, the feed-forward
    net and the positions."""
    lang = current()
    a, b, c, d = st.columns(4)
    fields = {
        "n_layers": a.selectbox(
            t("train.layers"), LAYERS, index=LAYERS.index(DEFAULTS.n_layers), key="lm_layers"
        ),
        "n_heads": b.selectbox(
            t("train.heads"),
            HEADS,
            index=HEADS.index(DEFAULTS.n_heads),
            key="lm_heads",
            help=t("train.lm.heads_help"),
        ),
    }
    sizes = list(work.LM_D_MODELS)
    fields["d_model"] = c.selectbox(
        t("train.d_model"), sizes, index=sizes.index(DEFAULTS.d_model), key="lm_d_model"
    )
    contexts = list(work.LM_CONTEXTS)
    fields["context"] = d.selectbox(
        t("train.lm.context"),
        contexts,
        index=contexts.index(DEFAULTS.context),
        key="lm_context",
        help=t("train.lm.context_help"),
    )
    a, b = st.columns(2)
    fields["ffn"] = a.checkbox(
        t("train.lm.ffn"), value=DEFAULTS.ffn, key="lm_ffn", help=t("train.lm.ffn_help")
    )
    fields["positions"] = b.radio(
        t("train.lm.positions"),
        list(work.LM_POSITIONS),
        format_func=lambda p: t(f"train.lm.positions.{p}", lang=lang),
        key="lm_positions",
        horizontal=True,
        help=t("train.lm.positions_help"),
    )
    return fields


def training_fields() -> dict:
    """The language form's training (inside the form): steps, learning rate, seed and W_o."""
    # Float inputs checked on submit, as the toy form's are (NaN, inf, 2.5, 1e30).
    a, b, c = st.columns(3)
    steps = a.number_input(
        t("train.steps"),
        value=float(DEFAULTS.steps),
        step=100.0,
        format="%.0f",
        key="lm_steps",
        help=t("train.lm.steps_help", high=f"{settings.MAX_STEPS:,}", default=DEFAULTS.steps),
    )
    lr = b.number_input(
        t("train.lr"),
        value=DEFAULTS.lr,
        step=5e-4,
        format="%g",
        key="lm_lr",
        help=t("train.lm.lr_help", high=f"{work.LM_MAX_LR:g}"),
    )
    seed = seed_box(c, float(DEFAULTS.seed), "lm_seed")
    return {"steps": steps, "lr": lr, "seed": seed, "w_o": w_o_radio("lm_w_o")}


def start_language(manager: jobs.JobManager, folder: Path, fields: dict) -> None:
    """The submitted form: its numbers and name checked, then the training submitted as this
    session's job; what is wrong is said instead."""
    job = state.LM_JOB.get()
    if job is not None and job.state().active:
        st.error(t("train.still_running"))
        return
    reserved = reserved_names()
    numbers, problems = form_numbers(fields["steps"], fields["lr"], fields["seed"])
    try:
        safe_model_path(folder, fields["name"], reserved=reserved)  # nothing is written yet
    except ValueError as e:
        problems.append(why(e))
    if problems:
        listed = "\n".join(f"- {p}" for p in problems)
        st.error(t("train.not_started", problems=listed))
        return
    spec = work.LanguageSpec(
        name=fields["name"],
        n_layers=int(fields["n_layers"]),
        n_heads=int(fields["n_heads"]),
        d_model=int(fields["d_model"]),
        ffn=bool(fields["ffn"]),
        context=int(fields["context"]),
        positions=fields["positions"],
        w_o=fields["w_o"],
        **numbers,
    )
    try:
        training = work.LanguageWork(spec, folder, reserved=reserved)
        job = manager.submit(training, is_alive=session_alive_check())
    except (ValueError, jobs.QueueFull) as e:
        st.error(t("train.not_started", problems=f"- {why(e)}"))
        return
    state.LM_JOB.set(job)
    claim_model(job.spec.name)
    # The name is taken now: the next run of the form proposes another free one.
    state.LM_NAME_USED.set(True)


def language_values(snap: jobs.JobState) -> dict:
    """A language model's sentences' values; once done, what its record measured and its name
    in the picker."""
    values = training_values(snap)
    if snap.status != jobs.DONE:
        return values
    result: work.LanguageResult = snap.result
    source = t("folder.option_lm_class")
    return values | {
        "loss": f"{result.valid_loss:.3f}",
        "head": head_name(result.induction_layer, result.induction_head),
        "score": f"{result.induction:.2f}",
        "listed": md_escape(t("sidebar.model_option", name=snap.spec.name, source=source)),
    }


WORDS = training_words("train.lm.progress_here", "train.lm.done", language_values)


def after_training(snap: jobs.JobState) -> None:
    """Under a finished language model's outcome (job_panel says how it ended): its validation
    loss and induction score, a button to open it, and its loss curve."""
    if snap.status == jobs.DONE:
        values = language_values(snap)
        head, loss, score = values["head"], values["loss"], values["score"]
        a, b = st.columns(2)
        a.metric(t("train.lm.valid_loss"), loss, help=t("train.lm.valid_loss_help"))
        b.metric(t("train.lm.induction", head=head), score, help=t("train.lm.induction_help"))
        if st.button(t("train.open"), key="open_lm"):
            # As the toy training's button: the picker takes it on the whole-page run.
            state.OPEN_MODEL.set(f"{folders.YOURS_KEY_PREFIX}{snap.spec.name}")
            st.rerun(scope="app")
    if snap.losses:
        loss_chart(snap.losses, snap.loss_every, snap.total, "lm_final_loss")
