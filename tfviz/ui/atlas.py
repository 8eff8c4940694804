"""The bundled W_o atlas in the page: its grid, a cell's curves and numbers, and every sentence
about them worded here from tfviz.experiments.atlas_stats' values (never written for a particular
result).

Used by the "Does W_o matter?" view and by lesson step 4 (which words its own answer from these
values: tfviz.ui.views.lessons.experiment); a module below the views, so neither view imports the
other.
"""

from __future__ import annotations

import functools
import math
import tempfile
import uuid
from pathlib import Path

import numpy as np
import streamlit as st

from tfviz.core.metrics import compact
from tfviz.experiments import atlas, atlas_stats, atlas_store
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS
from tfviz.experiments.atlas_store import BUNDLED, read_rows
from tfviz.plots import atlas as atlas_plots  # tfviz.experiments.atlas is the sweep's own module
from tfviz.serve import jobs, work
from tfviz.ui import compute, i18n, state
from tfviz.ui.i18n import current, t
from tfviz.ui.jobs import POLL_SECONDS, JobWords, job_manager, job_panel, session_alive_check
from tfviz.ui.labels import task_label, task_short
from tfviz.ui.widgets import chart

APP_BUDGET: int | None = None  # steps per run of a sweep; None: the recipe's (as bundled)
MAX_SEEDS = work.SWEEP_MAX_SEEDS

# Both atlases' arms: the toy atlas's (atlas.ARMS) and the language atlas's (LANGUAGE_ARMS).
ARM_LABELS = {arm: f"atlas.arm.{arm}" for arm in (*atlas.ARMS, *LANGUAGE_ARMS)}
MARKS = {"helps": "✓", "hurts": "✗", "unclear": "≈", "not_trained": "–", "missing": ""}


def load(path=BUNDLED) -> tuple[dict, dict]:
    try:
        st_ = path.stat()
    except OSError:
        return {}, {}
    return compute.cached_atlas(str(path), (st_.st_mtime_ns, st_.st_size))


def load_longer(results: dict, path=None) -> dict:
    """The cells that did not train, as the longer runs leave them (atlas_stats.longer), by key;
    path: atlas_store.LONGER, read when called (a test points it elsewhere)."""
    rows, _ = load(atlas_store.LONGER if path is None else path)
    return atlas_stats.longer(results, rows)


def longer_text(item: atlas_stats.Longer, arm: str) -> str:
    """What a cell that did not train became with more steps, for one arm."""
    if item.state == "pending":
        return t("atlas.longer.pending")
    said = t(f"atlas.longer.{item.state}", budget=item.budget, seeds=item.seeds,
             reached=item.reached)  # fmt: skip
    if item.state != "read":
        return said
    m = atlas_stats.family_size({item.cell: item.result}, arm)
    return said + " " + verdict_text(item.result, arm, m, budget=item.budget)


def arch_label(cell: atlas.Cell, varied: set[str], lang: str | None = None) -> str:
    """An architecture as a row label; D and the norm are named only where the atlas varies them.
    lang: fixed for a widget's format_func, which Streamlit may call outside the script."""
    ffn = t("atlas.ffn.on" if cell.ffn else "atlas.ffn.off", lang=lang)
    label = t("atlas.arch", layers=cell.n_layers, ffn=ffn, heads=cell.n_heads, lang=lang)
    if "d_model" in varied:
        label += f" · D{cell.d_model}"
    if "norm" in varied:
        label += " · " + t(f"atlas.norm.{cell.norm}", lang=lang)
    return label


def cell_name(cell: atlas.Cell, varied: set[str], lang: str | None = None) -> str:
    return f"{task_label(cell.task, lang)} · {arch_label(cell, varied, lang)}"


def varied_fields(cells: list) -> set[str]:
    """The fields a label names only where the cells differ in them (D, the norm)."""
    return {f for f in ("d_model", "norm") if len({getattr(c, f) for c in cells}) > 1}


def verdict_text(res: atlas_stats.CellResult, arm: str, m: int, budget: int | None = None) -> str:
    """What one cell shows for one arm, in the page's language, from its numbers alone.
    budget: the runs' steps, if not their task's recipe's (a longer budget)."""
    other = t(f"atlas.versus.{arm}")
    budget = atlas.RECIPES[res.cell.task].steps if budget is None else budget
    if not res.trained:
        return t(
            "atlas.verdict.not_trained",
            reached=res.learned_reached,
            seeds=res.seeds,
            budget=budget,
        )
    comp = res.comparisons.get((arm, atlas_stats.HEADLINE))
    if comp is None or comp.interval is None:
        return t("atlas.verdict.missing", other=other)
    iv = comp.interval
    text = t(
        f"atlas.verdict.{comp.verdict}",
        other=other,
        steps=compact(abs(comp.difference)),
        low=compact(iv.low),
        high=compact(iv.high),
        p=f"{comp.p_holm:.3g}",
        m=m,
    )
    if comp.censored:
        text += " " + t("atlas.verdict.censored", runs=comp.censored, budget=budget)
    return text


def grid(rows: dict, results: dict, arm: str, key: str, longer: dict | None = None) -> None:
    """The atlas's grid for one arm against the learned W_o: tasks down, architectures across.
    longer: the cells that did not train, given more steps (load_longer): those read at the
    longer budget are drawn with their verdict there, marked *."""
    longer = longer or {}
    cells = [r.cell for r in results.values()]
    varied = varied_fields(cells)
    tasks = [name for name in atlas.ATLAS_TASKS if any(c.task == name for c in cells)]
    archs = sorted({c.arch for c in cells}, key=lambda a: atlas.Cell.from_key("sum/" + a))
    R, C = len(tasks), len(archs)
    effect = np.full((R, C), np.nan)
    faint = np.zeros((R, C), bool)
    texts: list[list[list[str]]] = [[[] for _ in range(C)] for _ in range(R)]
    hover: list[list[list[str]]] = [[[] for _ in range(C)] for _ in range(R)]
    m = atlas_stats.family_size(results, arm)
    for i, task in enumerate(tasks):
        for j, a in enumerate(archs):
            res = results.get(f"{task}/{a}")
            if res is None:
                texts[i][j] = ["·"]
                hover[i][j] = [t("atlas.grid.missing")]
                continue
            said = verdict_text(res, arm, m)
            budget, star = atlas.RECIPES[task].steps, ""
            more = longer.get(res.cell.key)
            if more is not None:
                said += " " + longer_text(more, arm)
                if more.state == "read":  # read at the longer budget instead
                    res, budget, star = more.result, more.budget, "*"
            verdict = res.verdict(arm)
            comp = res.comparisons.get((arm, atlas_stats.HEADLINE))
            if verdict == "not_trained":
                texts[i][j] = [MARKS[verdict]]
            elif comp is not None and comp.interval is not None:
                effect[i, j] = atlas_stats.relative(comp, budget)
                faint[i, j] = verdict == "unclear"
                texts[i][j] = [MARKS[verdict] + star, f"{-comp.difference:+.0f}"]
            hover[i][j] = [cell_name(res.cell, varied), *atlas_plots.wrap_lines(said, 60)]
    figure = atlas_plots.atlas_grid(
        effect,
        texts,
        [task_short(name) for name in tasks],  # full names are in the hover
        [short_arch(atlas.Cell.from_key("sum/" + a), varied) for a in archs],
        hover,
        title=t("atlas.grid.title", other=t(f"atlas.versus.{arm}")),
        colour_title=t("atlas.grid.colour"),
        faint=faint,
    )
    chart(figure, key=key)
    st.caption(t("atlas.grid.legend"))


def short_arch(cell: atlas.Cell, varied: set[str]) -> list[str]:
    """An architecture as a column label of short lines (the grid is read on phones)."""
    lines = [
        t("atlas.col.layers", layers=cell.n_layers),
        t("atlas.col.heads", heads=cell.n_heads),
        t("atlas.ffn_short.on" if cell.ffn else "atlas.ffn_short.off"),
    ]
    if "d_model" in varied:
        lines.append(f"D{cell.d_model}")
    if "norm" in varied:
        lines.append(t(f"atlas.norm.{cell.norm}"))
    return lines


def summary(results: dict, arm: str) -> str:
    """One sentence: how many cells trained, and in how many W_o helped, hurt or is unclear."""
    counts = atlas_stats.verdict_counts(results, arm)
    return t(
        "atlas.summary",
        cells=len(results),
        trained=len(results) - counts["not_trained"],
        helps=counts["helps"],
        hurts=counts["hurts"],
        unclear=counts["unclear"] + counts["missing"],
        not_trained=counts["not_trained"],
        other=t(f"atlas.versus.{arm}"),
        m=atlas_stats.family_size(results, arm),
    )


def longer_summary(results: dict, longer: dict) -> str | None:
    """How the cells that did not train fared with more steps; None when every cell trained."""
    if not longer:
        return None
    counts = atlas_stats.longer_counts(longer)
    tasks = {results[k].cell.task for k in longer}
    return t(
        "atlas.longer.summary",
        cells=len(longer),
        budget="/".join(sorted({f"{atlas.RECIPES[task].steps:,}" for task in tasks})),
        **counts,
    )


def mechanism_summary(results: dict) -> str:
    """What the mechanism runs show, counted from them."""
    runs = atlas_stats.mechanism(results)
    helped = [r for r in runs if r.recovers is not None]
    if not runs:
        return t("atlas.mechanism.none")
    if not helped:
        return t("atlas.mechanism.no_effect", cells=len(runs))
    recovered = sum(bool(r.recovers) for r in helped)
    return t("atlas.mechanism.result", helped=len(helped), recovered=recovered)


def mechanism_hint_text(results: dict) -> str | None:
    """What the mechanism run suggests in the cells that did not train: labelled a hint."""
    loss, metric = (atlas_stats.mechanism_hint(results, m) for m in ("final_loss", "metric"))
    if not loss.cells:
        return None
    return t(
        "atlas.mechanism.hint",
        cells=len(loss.cells),
        names=t("atlas.list_sep").join(task_label(results[c].cell.task) for c in loss.cells),
        loss_helped=len(loss.helped),
        loss_recovered=len(loss.recovered),
        metric_helped=len(metric.helped),
        metric_recovered=len(metric.recovered),
    )


def pick_cell(keys: list[str], default: str, name, key: str) -> str:
    """A picker of an atlas's cells (name: key -> its label, in a language fixed now); a value
    left from another set of rows is dropped, so the picker opens on default."""
    if state.widget_value(key) not in keys:
        state.forget(key)
    return st.selectbox(t("atlas.cell"), keys, index=keys.index(default), format_func=name, key=key)


def comparison_rows(comparisons: dict, number=compact) -> list[dict]:
    """A cell's comparisons as a table: the arm, the measure, each side's mean over seeds, their
    difference (learned minus other) with its 95% interval, the Holm-adjusted p and the seeds;
    number writes a value (the toy atlas's 3 significant digits, the language atlas's 3
    decimals). Both atlases' cell tables."""
    table = []
    for (other, measure), comp in comparisons.items():
        iv = comp.interval
        table.append(
            {
                t("atlas.col.arm"): t(ARM_LABELS[other]),
                t("atlas.col.measure"): t(f"atlas.measure.{measure}"),
                t("atlas.col.learned"): number(float(np.mean(comp.learned))),
                t("atlas.col.other"): number(float(np.mean(comp.other))),
                t("atlas.col.difference"): number(comp.difference),
                t("atlas.col.ci"): f"[{number(iv.low)}, {number(iv.high)}]" if iv else "",
                t("atlas.col.p_holm"): _p(comp.p_holm),
                t("atlas.col.seeds"): len(comp.learned),
            }
        )
    return table


def cell_detail(
    rows: dict, results: dict, arm: str, key: str, longer: dict | None = None
) -> str | None:
    """A picker of cells; the chosen one's curves (every seed, every arm), numbers and verdict;
    for a cell that did not train, what more steps made of it (longer, load_longer)."""
    keys = list(results)
    if not keys:
        return None
    varied = varied_fields([r.cell for r in results.values()])
    lang = current()

    def name(k: str) -> str:
        return cell_name(results[k].cell, varied, lang)

    # A cell where W_o helps, else one that trained: never one nothing is read from.
    trained = [k for k in keys if results[k].trained] or keys
    default = next((k for k in trained if results[k].verdict(arm) == "helps"), trained[0])
    chosen = pick_cell(keys, default, name, key)
    res = results[chosen]
    curves = atlas_stats.curves(rows, chosen)
    every = next(iter(rows.values()))["curve_every"]
    chart(
        atlas_plots.cell_curves(
            curves,
            every,
            {a: t(ARM_LABELS[a]) for a in curves},
            title=t("atlas.curves.title", cell=name(chosen)),
            step_word=t("atlas.curves.step"),
            loss_word=t("atlas.curves.loss"),
            seed_word=t("atlas.curves.seed"),
        ),
        key=f"{key}_curves",
    )
    st.dataframe(comparison_rows(res.comparisons), hide_index=True, key=f"{key}_table")
    m = atlas_stats.family_size(results, arm)
    st.markdown(verdict_text(res, arm, m))
    if (more := (longer or {}).get(chosen)) is not None:
        st.markdown(longer_text(more, arm))
    return chosen


def _p(p: float | None) -> str:
    return "" if p is None or not math.isfinite(p) else f"{p:.3g}"


def render_atlas(key: str = "atlas") -> None:
    """The whole atlas block: intro, arm, grid, summary, mechanism, a cell opened."""
    rows, results = load()
    st.subheader(t("atlas.title"))
    if not results:
        st.info(t("atlas.empty"))
        return
    seeds = max(r.seeds for r in results.values())
    st.caption(t("atlas.intro", runs=f"{len(rows):,}", cells=len(results), seeds=seeds))
    present = [
        a
        for a in atlas.AGAINST
        if any((a, atlas_stats.HEADLINE) in r.comparisons for r in results.values())
    ]
    lang = current()
    arm = st.radio(
        t("atlas.against"),
        present,
        format_func=lambda a: t(ARM_LABELS[a], lang=lang),
        key=f"{key}_arm",
        horizontal=True,
    )
    longer = load_longer(results)
    grid(rows, results, arm, key=f"{key}_grid", longer=longer)
    st.markdown(summary(results, arm))
    if (more := longer_summary(results, longer)) is not None:
        st.markdown(more)
    st.markdown(mechanism_summary(results))
    if (hint := mechanism_hint_text(results)) is not None:
        st.markdown(hint)
    chosen = cell_detail(rows, results, arm, key=f"{key}_cell", longer=longer)
    if chosen is not None:
        name = cell_name(results[chosen].cell, varied_fields([r.cell for r in results.values()]))
        own_sweep(chosen, name, arm, key=f"{key}_own")


# ---- a sweep started here: a job under the server's one manager, in a process of its own ------
def owner() -> str:
    return state.ATLAS_OWNER.setdefault(uuid.uuid4().hex)


def own_sweep(cell: str, name: str, arm: str, key: str) -> None:
    """Run the open cell again, outside the server's process (tfviz.serve.work.AtlasSweep, a job
    like a training: it takes one of the server's slots); its rows are this session's."""
    job = state.ATLAS_JOB.get()
    with st.expander(t("atlas.own.title"), expanded=job is not None):
        st.caption(t("atlas.own.what"))
        seeds = st.number_input(
            t("atlas.own.seeds"), min_value=2, max_value=MAX_SEEDS, value=2, key=f"{key}_seeds"
        )
        if st.button(t("atlas.own.start", cell=name), key=f"{key}_start", type="primary"):
            start_sweep(cell, int(seeds))
        live = functools.partial(sweep_rows, arm=arm, key=key)
        snap = job_panel(
            state.ATLAS_JOB.get(), f"{key}_stop", SWEEP_WORDS, live=live, every=POLL_SECONDS * 4
        )
        if snap is not None and snap.result:  # the sweep's own cell, maybe not the open one
            sweep_rows(snap, arm, key, rows=snap.result)


def start_sweep(cell: str, seeds: int) -> None:
    """Submit a sweep of the cell as this session's job, unless its last one still runs."""
    job = state.ATLAS_JOB.get()
    if job is not None and job.state().active:
        st.error(t("atlas.own.still_running"))
        return
    out = Path(tempfile.gettempdir()) / "tfviz-atlas" / f"{owner()}.jsonl"
    spec = work.SweepSpec(cell=cell, seeds=seeds, out=out, budget=APP_BUDGET)
    try:
        job = job_manager().submit(work.AtlasSweep(spec), is_alive=session_alive_check())
    except (ValueError, jobs.QueueFull) as e:
        st.error(t("atlas.own.not_started", why=i18n.why(e)))
        return
    state.ATLAS_JOB.set(job)


def sweep_values(snap: jobs.JobState) -> dict:
    """A sweep's sentences' values: the runs done of those planned."""
    return {"done": snap.done, "runs": snap.total}


SWEEP_WORDS = JobWords(
    queued="atlas.own.queued",
    progress="atlas.own.progress",
    stop="atlas.own.stop",
    done="atlas.own.done",
    cancelled="atlas.own.cancelled",
    failed="atlas.own.failed",
    values=sweep_values,
)


def sweep_rows(snap: jobs.JobState, arm: str, key: str, rows: dict | None = None) -> None:
    """A sweep's rows (read from its file while it runs) as curves, and its verdict once there
    are some."""
    rows = read_rows(snap.spec.out) if rows is None else rows
    if not rows:
        return
    cell = snap.spec.cell
    results = atlas_stats.analyse(rows)
    res = results.get(cell)
    if res is None:
        return
    curves = atlas_stats.curves(rows, cell)
    chart(
        atlas_plots.cell_curves(
            curves,
            next(iter(rows.values()))["curve_every"],
            {a: t(ARM_LABELS[a]) for a in curves},
            title=t("atlas.own.curves", cell=cell_name(res.cell, set())),
            step_word=t("atlas.curves.step"),
            loss_word=t("atlas.curves.loss"),
            seed_word=t("atlas.curves.seed"),
        ),
        key=f"{key}_curves",
    )
    st.markdown(verdict_text(res, arm, 1))
