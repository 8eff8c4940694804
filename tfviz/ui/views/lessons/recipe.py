"""Lesson step 3: the digit-sum model of seed 002 in its original setting, trained again as a job of
the app's one job manager (tfviz.lessons.recipe), the bundled `sum_seed` answering at once; it
predicts the sums the student types and shows two inputs' attention side by side.
"""

from __future__ import annotations

import streamlit as st

from tfviz import get_task, lessons, plots
from tfviz.core.metrics import compact
from tfviz.serve import checks, jobs
from tfviz.training.recipes import RECIPES
from tfviz.ui import state
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import JobWords, job_manager, job_panel, session_alive_check
from tfviz.ui.models import BUNDLED_DIR, file_sha256, load_model
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import question
from tfviz.ui.widgets import chart, index_picker, plot_words

MAX_LESSON_STEPS = 2000  # training steps a student may ask for (the recipe's own is 500)
DIGITS_EXAMPLE = "31415926"
DIGITS_B = "01234567"  # seed 002 compares [0..7] with [9]*8
MODEL_LABELS = {"bundled": "lessons.s3.model.bundled", "trained": "lessons.s3.model.trained"}


def bundled_seed_model(device: str):
    """The bundled sum_seed model (shared, never changed: tfviz.ui.models loads it once), or None
    if its file is unusable."""
    path = BUNDLED_DIR / f"{lessons.LESSON_RECIPE}.safetensors"
    try:
        stat = path.stat()
    except OSError:
        return None
    digest = file_sha256(str(path), stat.st_mtime_ns, stat.st_size)
    model, _, _ = load_model(str(path), digest, device)
    return model


def step_train(view: View) -> None:
    recipe = RECIPES[lessons.LESSON_RECIPE]
    sizes = recipe["sizes"]
    st.markdown(t("lessons.s3.intro"))
    st.markdown(
        t(
            "lessons.s3.recipe",
            d_model=sizes["d_model"],
            heads=sizes["n_heads"],
            layers=sizes["n_layers"],
            d_ff=sizes["d_ff"],
            dropout=sizes["dropout"],
            steps=recipe["steps"],
            batch=recipe["batch_size"],
            lr=recipe["lr"],
            length=recipe["max_len"],
        )
    )
    st.info(t("lessons.s3.look"))
    collect_trained()
    train_controls(recipe["steps"])
    snap = job_panel(state.LESSON_JOB.get(), "lesson_cancel", LESSON_WORDS)
    if snap is not None and snap.status == jobs.DONE:
        chart(
            plots.loss_curve(snap.losses, snap.loss_every, snap.total, words=plot_words()),
            key="lesson_loss_curve",
        )
    bundled = bundled_seed_model(str(view.model.device))
    models = {}
    if bundled is not None:
        models["bundled"] = bundled
    else:
        st.error(t("lessons.s3.no_bundled"))
    trained = state.LESSON_TRAINED.get()
    if trained is not None:
        models["trained"] = trained.model
    if not models:
        return
    if state.LESSON_MODEL_CHOICE.get() not in models:
        state.LESSON_MODEL_CHOICE.pop()
    lang = current()
    choice = st.radio(
        t("lessons.s3.which_model"),
        list(models),
        format_func=lambda k: t(MODEL_LABELS[k], lang=lang),
        key=state.LESSON_MODEL_CHOICE.name,
        horizontal=True,
    )
    # No max_chars: a browser drops a longer paste without a word; the check below says why.
    text = st.text_input(t("lessons.s3.digits"), value=DIGITS_EXAMPLE, key="lesson_digits")
    task = get_task(recipe["task"])
    valid = text.isascii() and text.isdigit() and 1 <= len(text) <= task.max_len
    if not valid:
        st.error(t("lessons.s3.bad_digits", n=task.max_len))
    else:
        predicted, right = lessons.predict(models[choice], task, text)
        st.markdown(t("lessons.s3.prediction", text=text, predicted=predicted, right=right))
        if len(text) != recipe["max_len"]:
            st.caption(t("lessons.s3.other_length", length=recipe["max_len"]))
    if valid:
        compare_attention(models[choice], task, text)
    probe = "9" * recipe["max_len"]
    predicted, right = lessons.predict(models[choice], task, probe)
    question(
        "lessons.s3.question",
        t("lessons.s3.answer", text=probe, predicted=predicted, right=right),
    )


def compare_attention(model, task, text: str) -> None:
    """Seed 002's point: attention is computed from the input. The typed digits' attention
    beside a second sequence's (the article's 01234567 unless the student types another)."""
    st.markdown(t("lessons.s3.attention_intro"))
    other = st.text_input(t("lessons.s3.digits_b"), value=DIGITS_B, key="lesson_digits_b")
    if not (other.isascii() and other.isdigit() and len(other) == len(text)):
        st.error(t("lessons.s3.bad_digits_b", n=len(text)))
        return
    n_layers = len(model.layers)
    layer = index_picker(t("lessons.layer"), n_layers, key="lesson_attn_layer", prefix="L")
    pair = lessons.attention_pair(model, task, text, other)
    for col, side, shown, attn, labels in zip(
        st.columns(2), "ab", (text, other), pair.attn, pair.labels, strict=True
    ):
        with col:
            figure = plots.attention_grid(
                attn[[layer]], labels, [layer], title=shown, words=plot_words()
            )
            chart(figure, key=f"lesson_attention_{side}")
    st.markdown(t("lessons.s3.attention_diff", layer=layer, diff=compact(pair.max_diff[layer])))


def train_controls(recipe_steps: int) -> None:
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    steps = left.number_input(
        t("lessons.s3.steps"),
        value=float(recipe_steps),
        step=100.0,
        format="%.0f",
        key="lesson_steps",
        help=t("lessons.s3.steps_help", n=MAX_LESSON_STEPS, recipe=recipe_steps),
    )
    clicked = right.button(t("lessons.s3.start"), key="lesson_train", type="primary")
    if not clicked:
        return
    job = state.LESSON_JOB.get()
    if job is not None and job.state().active:
        st.error(t("lessons.s3.still_running"))
        return
    try:
        n = checks.whole_number(steps, "steps", 1, MAX_LESSON_STEPS)
    except ValueError:
        st.error(t("lessons.s3.bad_steps", n=MAX_LESSON_STEPS))
        return
    work = lessons.RecipeWork(lessons.RecipeSpec(steps=n))
    try:
        state.LESSON_JOB.set(job_manager().submit(work, is_alive=session_alive_check()))
    except (ValueError, jobs.QueueFull) as e:
        st.error(t("lessons.s3.not_started", why=why(e)))


def collect_trained() -> None:
    """Once per finished lesson job: keep its model in this session and show it."""
    job: jobs.Job | None = state.LESSON_JOB.get()
    if job is None or state.LESSON_COLLECTED.get() == job.id:
        return
    snap = job.state()
    if snap.active:
        return
    state.LESSON_COLLECTED.set(job.id)
    if snap.status == jobs.DONE and snap.result is not None:
        state.LESSON_TRAINED.set(snap.result)  # this session only: never saved
        state.LESSON_MODEL_CHOICE.set("trained")


def lesson_values(snap: jobs.JobState) -> dict:
    """The lesson training's sentences' values: the steps done and the last loss on the bar; once
    done, the steps, the time to a tenth of a second and the error on fresh sequences."""
    if snap.status == jobs.DONE:
        mae = compact(snap.result.metrics["mae"]) if snap.result is not None else ""
        return {"steps": snap.total, "seconds": f"{snap.seconds:.1f}", "mae": mae}
    loss = compact(snap.loss) if snap.loss is not None else ""
    return {"step": snap.done, "steps": snap.total, "loss": loss}


LESSON_WORDS = JobWords(
    queued="lessons.s3.queued",
    progress="lessons.s3.progress",
    starting="lessons.s3.starting",
    stop="lessons.s3.cancel",
    done="lessons.s3.done",
    cancelled="lessons.s3.cancelled",
    failed="lessons.s3.failed",
    values=lesson_values,
)
