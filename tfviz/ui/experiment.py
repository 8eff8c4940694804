"""The "Does W_o matter?" view: seeds trained with and without W_o, shipped and rerunnable.

The model in the sidebar only picks the task. The shipped result (models/experiments/<task>.json)
is shown with a smoothing slider, a table with confidence intervals and a verdict; a rerun with
fewer seeds or steps runs in a worker thread that takes slots of the one training JobManager,
and its result stays in this browser session only.
"""

from __future__ import annotations

import streamlit as st

import tfviz.experiment as experiment
from tfviz import jobs, plots, settings
from tfviz.ui.common import POLL_SECONDS, TRAINS_TOYS, View, chart, md_escape, toy_only
from tfviz.ui.train import job_manager, session_alive_check


@st.cache_data(show_spinner=False, max_entries=16)
def cached_precomputed(task_name: str) -> experiment.ExperimentResult | None:
    """The shipped result for a task (models/experiments/<task>.json), or None."""
    return experiment.load_precomputed(task_name)


def render(view: View) -> None:
    if toy_only(view, '"Does W_o matter?"', TRAINS_TOYS):
        return
    task = view.task.name
    reruns: dict = st.session_state.setdefault("experiment_reruns", {})
    job: jobs.Job | None = st.session_state.get("experiment_job")
    # One snapshot for the whole run: a rerun that ends mid-run is then both collected above and
    # reported below, never reported as shown above while it is not.
    snap = None if job is None else job.snapshot()
    if snap is not None and not snap.active:
        collect_finished_rerun(job.id, snap, reruns, task)
    try:
        shipped = cached_precomputed(task)
    except ValueError as e:  # a damaged file: say so, and still offer the rerun
        st.error(md_escape(f"The shipped result for {task} cannot be read: {e}"))
        shipped = None
    sources = {"shipped": shipped, "rerun": reruns.get(task)}
    sources = {k: v for k, v in sources.items() if v is not None}
    st.caption(
        "Seed 000 claims that without W_o training converges more slowly and ends worse. Here "
        "is what training with and without W_o measured for this model's task."
    )
    if not sources:
        st.info(md_escape(f"No result for the {task} task yet: rerun the experiment below."))
    else:
        if len(sources) > 1:
            if st.session_state.get("exp_source") not in sources:
                st.session_state.pop("exp_source", None)
            source = st.radio(
                "Show",
                list(sources),
                format_func={"shipped": "shipped result", "rerun": "your rerun"}.get,
                key="exp_source",
                horizontal=True,
            )
        else:
            source = next(iter(sources))
        show_experiment(sources[source])
    st.subheader("Rerun the experiment")
    form_col, status_col = st.columns(2)
    with form_col:
        experiment_form(task)
    with status_col:
        now = st.session_state.get("experiment_job")  # the form may have submitted a new one
        if now is None:
            st.caption(
                "Your rerun will show its progress here. Its result stays in this browser "
                "session only; the shipped results are not changed."
            )
        elif now is job and not snap.active:
            experiment_outcome(snap)
        else:  # running, or just submitted: its fragment reruns the page once it ends
            experiment_progress(now)


def collect_finished_rerun(job_id: int, snap: jobs.JobSnapshot, reruns: dict, task: str) -> None:
    """Once per ended rerun: keep its result in this session, shown if it is this task's."""
    if st.session_state.get("experiment_collected") == job_id:
        return
    st.session_state["experiment_collected"] = job_id
    if snap.result is not None and snap.result.runs:
        reruns[snap.spec.task] = snap.result  # this session only: never written to disk
        if snap.spec.task == task:
            st.session_state["exp_source"] = "rerun"


def sig(x: float) -> str:
    """x to 3 significant digits, in scientific notation when tiny."""
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def experiment_table(result: experiment.ExperimentResult) -> list[dict]:
    rows = []
    for row in experiment.compare(result):
        iv = row.interval
        rows.append(
            {
                "quantity": row.label,
                "with W_o": f"{sig(row.mean_learned)} ± {sig(row.std_learned)}",
                "without W_o": f"{sig(row.mean_identity)} ± {sig(row.std_identity)}",
                "difference": sig(row.difference),
                "95% CI": f"[{sig(iv.low)}, {sig(iv.high)}]" if iv else "n/a (needs 2+ seeds)",
                "runs": f"{row.n_learned} + {row.n_identity}",
            }
        )
    return rows


def show_experiment(result: experiment.ExperimentResult) -> None:
    s = result.settings
    sizes = s.get("sizes", {})
    n = [len(result.runs_of(c)) for c in experiment.CONDITIONS]
    st.caption(
        md_escape(
            f"{n[0]} seeds with W_o and {n[1]} without, {s.get('steps')} steps × batch "
            f"{s.get('batch_size')}, lr {s.get('lr')}, D={sizes.get('d_model')}, "
            f"{sizes.get('n_heads')} heads, {sizes.get('n_layers')} layers: fresh small models "
            "trained for this experiment (not the model in the sidebar, which only picks the "
            "task). Seed s starts both conditions from the same weights and batches. Without W_o "
            "each layer has D·D + D fewer parameters: this compares the two architectures, not "
            "equal parameter counts."
        )
    )
    window = st.select_slider(
        "Smoothing (steps averaged)",
        options=[1, 5, 10, 25, 50],
        value=10,
        key="exp_window",
        help="A moving average over each run's loss before averaging over seeds.",
    )
    try:
        curves = experiment.summarise(result, window=int(window))
    except ValueError as e:
        st.warning(md_escape(f"No curves to draw: {e}"))
    else:
        chart(
            plots.experiment_curves(
                curves.step,
                curves.mean,
                curves.lower,
                curves.upper,
                curves.conditions,
                [experiment.LABELS[c] for c in curves.conditions],
            ),
            key="experiment_curves",
        )
    st.dataframe(experiment_table(result), hide_index=True, key="experiment_table")
    st.caption(
        "Mean ± standard deviation over seeds; difference = with W_o minus without; 95% CI: "
        "Welch's confidence interval for that difference. Lower is better for the losses and "
        "the MAE, higher for accuracies."
    )
    st.markdown("**What these runs show:** " + md_escape(experiment.verdict(result)))


def experiment_form(task: str) -> None:
    with st.form("experiment_form"):
        a, b = st.columns(2)
        seeds = a.number_input(
            "Seeds per condition",
            min_value=1,
            max_value=settings.EXPERIMENT_MAX_SEEDS,
            value=2,
            key="exp_seeds",
            help="Each seed trains once with W_o and once without. A confidence interval needs "
            f"at least 2; at most {settings.EXPERIMENT_MAX_SEEDS}.",
        )
        steps = b.number_input(
            "Steps per run",
            min_value=1,
            max_value=settings.EXPERIMENT_MAX_STEPS,
            value=200,
            step=50,
            key="exp_steps",
            help=f"At most {settings.EXPERIMENT_MAX_STEPS:,}. The shipped results used "
            f"{experiment.DEFAULTS['steps']}.",
        )
        submitted = st.form_submit_button(f"Rerun for {task}", key="exp_submit", type="primary")
    if not submitted:
        return
    job = st.session_state.get("experiment_job")
    if job is not None and job.snapshot().active:
        st.error("Your rerun is still going: cancel it or wait for it to finish.")
        return
    spec = jobs.ExperimentSpec(task=task, seeds=int(seeds), steps=int(steps))
    try:
        st.session_state["experiment_job"] = job_manager().submit(
            jobs.ExperimentWork(spec), is_alive=session_alive_check()
        )
    except (ValueError, jobs.QueueFull) as e:
        st.error(md_escape(str(e)))


@st.fragment(run_every=POLL_SECONDS)
def experiment_progress(job: jobs.Job) -> None:
    """Live progress of this session's rerun, polled; reruns the page once it ends."""
    snap = job.snapshot()
    if not snap.active:
        st.rerun()  # the whole page: the result shows above
    if snap.position is not None:
        st.info(
            f"Your rerun is waiting for a free training slot: position {snap.position} in the "
            "queue."
        )
    else:
        loss = f" · loss {snap.loss:.4f}" if snap.loss is not None else ""
        st.progress(
            snap.fraction,
            text=md_escape(
                f"Rerunning {snap.spec.task}: {snap.message}, step {snap.step} of "
                f"{snap.spec.steps}{loss}"
            ),
        )
    st.button("Cancel the rerun", key="cancel_experiment", on_click=job.cancel)


def experiment_outcome(snap: jobs.JobSnapshot) -> None:
    task = snap.spec.task
    if snap.status == jobs.DONE:
        st.success(
            md_escape(
                f"Rerun finished in {snap.seconds:.0f} s: {snap.message}. Shown above as 'your "
                f"rerun' while the model picked is a {task} model."
            )
        )
    elif snap.status == jobs.CANCELLED:
        st.warning(md_escape(f"Rerun for {task} {snap.message}."))
    else:
        st.error(md_escape(f"The rerun for {task} failed: {snap.message}"))
