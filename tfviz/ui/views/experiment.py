"""The "Does W_o matter?" view: the bundled W_o atlas (tfviz.ui.atlas) first, the language atlas
on real text (tfviz.ui.language_atlas) beside it, then the sidebar task's own experiment: seeds
trained with the learned W_o and with what it is compared against (W_o off, or a block-diagonal
W_o), shipped and rerunnable.

The model in the sidebar only picks the task. A choice says what the learned W_o is compared with;
the shipped result (models/experiments/<task>.json, which holds every comparison) is shown with a
smoothing slider, a table with confidence intervals and a verdict; a rerun with fewer seeds or
steps runs in a worker thread that takes slots of the one training JobManager, and its result
stays in this browser session only.
"""

from __future__ import annotations

import streamlit as st

import tfviz.experiments.experiment as experiment
from tfviz import plots, settings
from tfviz.core import modes
from tfviz.core.metrics import compact
from tfviz.experiments.verdict import verdict_of
from tfviz.serve import jobs, work
from tfviz.ui import compute, state
from tfviz.ui.atlas import render_atlas
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import JobWords, job_manager, job_panel, job_text, session_alive_check
from tfviz.ui.labels import task_label
from tfviz.ui.language_atlas import render_language_atlas
from tfviz.ui.text import md_escape
from tfviz.ui.view import TRAINS_TOYS, View, toy_only
from tfviz.ui.widgets import chart, plot_words

AGAINST_LABELS = {mode: f"experiment.against.{mode}" for mode in modes.AGAINST}
SOURCE_LABELS = {"shipped": "experiment.source.shipped", "rerun": "experiment.source.rerun"}
CONDITION_LABELS = {mode: f"experiment.condition.{mode}" for mode in modes.CONDITIONS}


def render(view: View) -> None:
    render_atlas()  # the answer first, whatever model the sidebar holds
    render_language_atlas()  # its own grid beside the toy one: the same question on real text
    st.subheader(t("experiment.own_title"))
    st.caption(t("experiment.own_caption"))
    if toy_only(view, t("experiment.what"), TRAINS_TOYS):
        return
    task = view.task.name
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    against = st.radio(
        t("experiment.against"),
        experiment.AGAINST,
        format_func=lambda a: t(AGAINST_LABELS[a], lang=lang),
        key="exp_against",
        horizontal=True,
        help=t("experiment.against_help"),
    )
    # Reruns are kept per task and comparison: one of each per session.
    reruns: dict = state.EXPERIMENT_RERUNS.setdefault({})
    job: jobs.Job | None = state.EXPERIMENT_JOB.get()
    # One job state for the whole run: a rerun that ends mid-run is then both collected above and
    # reported below, never reported as shown above while it is not.
    snap = None if job is None else job.state()
    if snap is not None and not snap.active:
        collect_finished_rerun(job.id, snap, reruns, task, against)
    try:
        shipped = compute.cached_precomputed(task)
    except ValueError as e:  # a damaged file: say so, and still offer the rerun
        st.error(t("experiment.shipped_unreadable", task=task_label(task), why=why(e)))
        shipped = None
    if shipped is not None and not shipped.runs_of(against):
        shipped = None  # a file from before this comparison was shipped
    sources = {"shipped": shipped, "rerun": reruns.get((task, against))}
    sources = {k: v for k, v in sources.items() if v is not None}
    st.caption(t(f"experiment.intro.{against}"))
    if not sources:
        st.info(t("experiment.no_result", task=task_label(task)))
    else:
        if len(sources) > 1:
            if state.EXPERIMENT_SOURCE.get() not in sources:
                state.EXPERIMENT_SOURCE.pop()
            source = st.radio(
                t("experiment.show"),
                list(sources),
                format_func=lambda s: t(SOURCE_LABELS[s], lang=lang),
                key=state.EXPERIMENT_SOURCE.name,
                horizontal=True,
            )
        else:
            source = next(iter(sources))
        show_experiment(sources[source], against)
    st.subheader(t("experiment.rerun_title"))
    form_col, status_col = st.columns(2)
    with form_col:
        experiment_form(task, against)
    with status_col:
        now = state.EXPERIMENT_JOB.get()  # the form may have submitted a new one
        job_panel(now, "cancel_experiment", WORDS, snap=snap if now is job else None)


def collect_finished_rerun(
    job_id: int, snap: jobs.JobState, reruns: dict, task: str, against: str
) -> None:
    """Once per ended rerun: keep its result in this session, shown if it is what is open."""
    if state.EXPERIMENT_COLLECTED.get() == job_id:
        return
    state.EXPERIMENT_COLLECTED.set(job_id)
    result: experiment.ExperimentResult | None = snap.result
    if result is not None and result.runs:
        for compared in result.against:  # a rerun compares with one; a loaded file may hold both
            reruns[(result.task, compared)] = result  # this session only: never on disk
        if result.task == task and against in result.against:
            state.EXPERIMENT_SOURCE.set("rerun")


def experiment_table(result: experiment.ExperimentResult, against: str) -> list[dict]:
    def spread(mean: float, std: float) -> str:
        return f"{compact(mean)} ± {compact(std)}"

    rows = []
    for row in experiment.compare(result, against=against):
        iv = row.interval
        rows.append(
            {
                t("experiment.col.quantity"): t(f"experiment.quantity.{row.quantity}"),
                t(CONDITION_LABELS[modes.LEARNED]): spread(row.mean_learned, row.std_learned),
                t(CONDITION_LABELS[against]): spread(row.mean_against, row.std_against),
                t("experiment.col.difference"): compact(row.difference),
                t("experiment.col.ci"): (
                    f"[{compact(iv.low)}, {compact(iv.high)}]" if iv else t("experiment.ci_missing")
                ),
                t("experiment.col.runs"): f"{row.n_learned} + {row.n_against}",
            }
        )
    return rows


def show_experiment(result: experiment.ExperimentResult, against: str) -> None:
    v = verdict_of(result, against)
    st.caption(
        t(
            f"experiment.settings.{against}",
            learned=v.n_learned,
            other=v.n_against,
            steps=v.steps,
            batch=v.batch_size,
            lr=v.lr,
            d_model=v.d_model,
            heads=v.n_heads,
            layers=v.n_layers,
        )
    )
    window = st.select_slider(
        t("experiment.smoothing"),
        options=[1, 5, 10, 25, 50],
        value=10,
        key="exp_window",
        help=t("experiment.smoothing_help"),
    )
    try:
        curves = experiment.summarise(result, window=int(window), against=against)
    except ValueError as e:
        st.warning(t("experiment.no_curves", why=why(e)))
    else:
        chart(
            plots.experiment_curves(
                curves.step,
                curves.mean,
                curves.lower,
                curves.upper,
                curves.conditions,
                [t(CONDITION_LABELS[c]) for c in curves.conditions],
                words=plot_words(),
            ),
            key="experiment_curves",
        )
    st.dataframe(experiment_table(result, against), hide_index=True, key="experiment_table")
    st.caption(t(f"experiment.table_caption.{against}"))
    verdict(result, against)


def verdict(result: experiment.ExperimentResult, against: str) -> None:
    """What the runs show, claiming no more than each interval does, in the page's language."""
    lines = findings(result, against)
    st.markdown(t("experiment.findings") + "\n" + "\n".join(f"- {line}" for line in lines))


def findings(result: experiment.ExperimentResult, against: str) -> list[str]:
    """tfviz.experiments.verdict's values in the student's language: whether the runs were cut short
    or cannot be compared, one sentence per quantity claiming no more than its interval does
    (Row.outcome), a warning when the models are partly trained, and what the intervals are."""
    v = verdict_of(result, against)
    lines = [t("experiment.finding.cancelled")] if v.cancelled else []
    if not v.comparable:
        return [*lines, t("experiment.finding.nothing_to_compare")]
    other = t(f"experiment.versus.{against}")
    for row in v.rows:
        what, iv = t(f"experiment.quantity.{row.quantity}"), row.interval
        if row.outcome == "no_interval":
            lines.append(t("experiment.finding.no_interval", what=what))
            continue
        values = dict(low=compact(iv.low), high=compact(iv.high), diff=compact(row.difference))
        lines.append(t(f"experiment.finding.{row.outcome}", what=what, other=other, **values))
    if v.unreached is not None:
        lines.append(t("experiment.finding.partly_trained"))
    lines.append(t("experiment.finding.caveat"))
    return lines


def experiment_form(task: str, against: str) -> None:
    with st.form(key="experiment_form"):
        a, b = st.columns(2)
        seeds = a.number_input(
            t("experiment.seeds"),
            min_value=1,
            max_value=settings.EXPERIMENT_MAX_SEEDS,
            value=2,
            key="exp_seeds",
            help=t("experiment.seeds_help", high=settings.EXPERIMENT_MAX_SEEDS),
        )
        steps = b.number_input(
            t("experiment.steps"),
            min_value=1,
            max_value=settings.EXPERIMENT_MAX_STEPS,
            value=200,
            step=50,
            key="exp_steps",
            help=t(
                "experiment.steps_help",
                high=f"{settings.EXPERIMENT_MAX_STEPS:,}",
                shipped=experiment.DEFAULTS["steps"],
            ),
        )
        submitted = st.form_submit_button(
            t(f"experiment.submit.{against}", task=task_label(task)),
            key="exp_submit",
            type="primary",
        )
    if not submitted:
        return
    job = state.EXPERIMENT_JOB.get()
    if job is not None and job.state().active:
        st.error(t("experiment.still_running"))
        return
    spec = work.ExperimentSpec(task=task, seeds=int(seeds), steps=int(steps), against=against)
    try:
        job = job_manager().submit(work.ExperimentWork(spec), is_alive=session_alive_check())
        state.EXPERIMENT_JOB.set(job)
    except (ValueError, jobs.QueueFull) as e:
        st.error(why(e))


def experiment_values(snap: jobs.JobState) -> dict:
    """A rerun's sentences' values: its task, what it is doing (or how it ended), the steps of
    one run and its last loss."""
    loss = t("experiment.loss_suffix", loss=f"{snap.loss:.4f}") if snap.loss is not None else ""
    return {
        "task": md_escape(task_label(snap.spec.task)),
        "message": job_text(snap.message),
        "steps": snap.spec.steps,
        "loss": loss,
    }


WORDS = JobWords(
    waiting="experiment.progress_here",
    queued="experiment.queued",
    progress="experiment.progress",
    stop="experiment.cancel",
    done="experiment.done",
    cancelled="experiment.cancelled",
    failed="experiment.failed",
    values=experiment_values,
)
