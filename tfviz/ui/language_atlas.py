"""The language atlas in the page: does W_o matter on real text? Its grid (architectures down, the
arms compared with the learned W_o across), a sentence per arm, the runs' induction scores, a
cell's validation curves and numbers. Every sentence is worded here from
tfviz.experiments.atlas_stats' values of the rows in models/atlas/language.jsonl (never written
for a particular result).

Used by the "Does W_o matter?" view, beside the toy atlas (tfviz.ui.atlas), and by lesson step 4
(its paragraph on real text: tfviz.ui.views.lessons.experiment); a module below the views, so
neither view imports the other.
"""

from __future__ import annotations

import streamlit as st

from tfviz.core import modes
from tfviz.experiments import atlas_stats, atlas_store, language_report
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS
from tfviz.plots import atlas as atlas_plots
from tfviz.ui import compute
from tfviz.ui.atlas import (
    ARM_LABELS,
    MARKS,
    arch_label,
    comparison_rows,
    pick_cell,
    short_arch,
    varied_fields,
)
from tfviz.ui.i18n import current, t
from tfviz.ui.widgets import chart

AGAINST = tuple(arm for arm in LANGUAGE_ARMS if arm != modes.LEARNED)
MEASURES = atlas_stats.LANGUAGE_MEASURES
COLUMN_WIDTH = 14  # columns of an arm's label in the grid's column heads (read on phones)


def load() -> tuple[dict, dict]:
    """The language atlas's rows and results, from atlas_store.LANGUAGE as it is now; ({}, {})
    without a file."""
    path = atlas_store.LANGUAGE
    try:
        st_ = path.stat()
    except OSError:
        return {}, {}
    return compute.cached_language(str(path), (st_.st_mtime_ns, st_.st_size))


def number(x: float) -> str:
    """A value of any measure: nats per character and induction scores alike, 3 decimals."""
    return f"{x:.3f}"


def signed(x: float) -> str:
    return f"{x:+.3f}"


def kind(measure: str) -> str:
    """How a measure reads: "score" (higher is better) or "loss" (nats per character)."""
    return "score" if measure == "induction" else "loss"


def ordered(results: dict) -> list[str]:
    """The cells in the sweep's order: attention alone first, narrower first, fewer heads first."""

    def place(k: str) -> tuple:
        c = results[k].cell
        return (c.n_layers, c.ffn, c.d_model, c.n_heads)

    return sorted(results, key=place)


def compared(res: atlas_stats.CellResult, arm: str, measure: str):
    """A cell's comparison of the learned W_o with arm on measure; None where the two have no
    seed in common yet (a sweep fills the file as it goes)."""
    comp = res.comparisons.get((arm, measure))
    return comp if comp is not None and comp.learned else None


def arms_present(results: dict, measure: str) -> list[str]:
    return [a for a in AGAINST if any((a, measure) in r.comparisons for r in results.values())]


def hover_lines(comp: atlas_stats.Comparison, m: int) -> list[str]:
    """A square's numbers, in the page's language."""
    other = t(f"atlas.versus.{comp.arm}")
    iv = comp.interval
    if iv is None or comp.p_holm is None:
        text = t("latlas.hover.no_interval", other=other, diff=signed(comp.difference))
    else:
        text = t(
            "latlas.hover",
            other=other,
            diff=signed(comp.difference),
            low=signed(iv.low),
            high=signed(iv.high),
            p=f"{comp.p_holm:.3g}",
            m=m,
            verdict=t(f"latlas.verdict.{comp.verdict}"),
        )
    return atlas_plots.wrap_lines(text, 60)


def grid(results: dict, measure: str, key: str) -> None:
    """Architectures down, the arms compared with the learned W_o across; each square coloured
    by the learned W_o's advantage, marked with its verdict and the difference learned - arm."""
    keys = ordered(results)
    arms = arms_present(results, measure)
    if not arms:  # only the learned W_o's first runs so far: nothing is compared yet
        return
    cells = [results[k].cell for k in keys]
    varied = varied_fields(cells)
    R, C = len(keys), len(arms)
    effect = [[float("nan")] * C for _ in range(R)]
    faint = [[False] * C for _ in range(R)]
    texts: list[list[list[str]]] = [[["·"] for _ in range(C)] for _ in range(R)]
    hover: list[list[list[str]]] = [[[] for _ in range(C)] for _ in range(R)]
    for j, arm in enumerate(arms):
        m = atlas_stats.family_size(results, arm, measure)
        for i, k in enumerate(keys):
            name = arch_label(results[k].cell, varied)
            comp = compared(results[k], arm, measure)
            if comp is None:
                hover[i][j] = [name, t("atlas.grid.missing")]
                continue
            effect[i][j] = atlas_stats.relative(comp, 1)
            faint[i][j] = comp.verdict == "unclear"
            texts[i][j] = [MARKS[comp.verdict], signed(comp.difference)]
            hover[i][j] = [name, *hover_lines(comp, m)]
    what = t(f"atlas.measure.{measure}")
    figure = atlas_plots.atlas_grid(
        effect,
        texts,
        [" · ".join(short_arch(c, varied)) for c in cells],
        [atlas_plots.wrap_lines(t(f"latlas.col.{a}"), COLUMN_WIDTH) for a in arms],  # short
        hover,
        title=t("latlas.grid.title", what=what),
        colour_title=t("latlas.grid.colour"),
        faint=faint,
    )
    chart(figure, key=key)
    st.caption(t(f"latlas.grid.legend.{kind(measure)}"))


def summary(results: dict, arm: str, measure: str) -> str:
    """One sentence: in how many cells the learned W_o does better than arm, worse, or is not
    told apart, on the measure, with Holm's m."""
    c = language_report.counts(results, arm, measure)
    return t(
        "latlas.summary",
        other=t(f"atlas.versus.{arm}"),
        what=t(f"atlas.measure.{measure}"),
        cells=c["helps"] + c["hurts"] + c["unclear"],
        helps=c["helps"],
        hurts=c["hurts"],
        unclear=c["unclear"],
        m=c["m"],
    )


def induction_text(rows: dict) -> str:
    """The best induction score any run of each arm reached, and how many runs reached the score
    from which tfviz counts a head as an induction head (language_report.INDUCTION_LINE)."""
    scores = atlas_stats.language_values_by_arm(rows, "induction")
    arms = [a for a in LANGUAGE_ARMS if a in scores]
    best = t("atlas.list_sep").join(
        t("latlas.induction.arm", other=t(ARM_LABELS[a]), score=number(max(scores[a])))
        for a in arms
    )
    over = [a for a in arms if max(scores[a]) >= language_report.INDUCTION_LINE]
    values = dict(
        what=best,
        line=language_report.INDUCTION_LINE,
        total=sum(len(scores[a]) for a in arms),
        runs=sum(s >= language_report.INDUCTION_LINE for a in arms for s in scores[a]),
    )
    if not over:
        return t("latlas.induction.none", **values)
    names = t("atlas.list_sep").join(t(ARM_LABELS[a]) for a in over)
    return t("latlas.induction.some", other=names, **values)


def cell_detail(rows: dict, results: dict, key: str) -> str | None:
    """A picker of cells; the chosen one's validation curves (every arm, every seed) and its
    comparisons on every measure."""
    keys = ordered(results)
    if not keys:
        return None
    varied = varied_fields([r.cell for r in results.values()])
    lang = current()

    def name(k: str) -> str:
        return arch_label(results[k].cell, varied, lang)

    headline = atlas_stats.LANGUAGE_HEADLINE
    default = next(
        (k for k in keys if results[k].verdict("identity", headline) == "helps"), keys[0]
    )
    chosen = pick_cell(keys, default, name, key)
    curves = atlas_stats.curves(rows, chosen, "valid_curve")
    chart(
        atlas_plots.step_curves(
            curves,
            {a: t(ARM_LABELS[a]) for a in curves},
            title=t("latlas.curves.title", cell=name(chosen)),
            step_word=t("atlas.curves.step"),
            loss_word=t("latlas.curves.loss"),
            seed_word=t("atlas.curves.seed"),
        ),
        key=f"{key}_curves",
    )
    table = comparison_rows(results[chosen].comparisons, number)
    st.dataframe(table, hide_index=True, key=f"{key}_table")
    st.caption(t("latlas.table_caption"))
    return chosen


def recipe_values(rows: dict, results: dict) -> dict:
    """What the caption says of how the runs were made, from the rows and their cells (values
    that differ between rows are listed)."""
    sep = t("atlas.list_sep")

    def values(get) -> str:
        found = sorted({get(r) for r in rows.values()})
        return sep.join(f"{v:,}" if isinstance(v, int) else str(v) for v in found)

    layers = sorted({res.cell.n_layers for res in results.values()})
    return dict(
        runs=len(rows),
        cells=len(results),
        seeds=len({r["seed"] for r in rows.values()}),
        layers=sep.join(str(n) for n in layers),
        steps=values(lambda r: int(r["steps"])),
        context=values(lambda r: int(r["recipe"]["context"])),
        batch=values(lambda r: int(r["recipe"]["batch_size"])),
        lr=values(lambda r: r["recipe"]["lr"]),
        windows=values(lambda r: int(r["valid_windows"])),
    )


def render_language_atlas(key: str = "latlas") -> None:
    """The language atlas's block: what the models are, a measure, the grid, a sentence per arm
    and one on induction heads, a cell opened."""
    st.subheader(t("latlas.title"))
    rows, results = load()
    if not results:
        st.info(t("latlas.empty"))
        return
    st.caption(t("latlas.intro", **recipe_values(rows, results)))
    st.caption(t("latlas.arms"))
    lang = current()
    measure = st.radio(
        t("latlas.measure"),
        MEASURES,
        format_func=lambda q: t(f"atlas.measure.{q}", lang=lang),
        key=f"{key}_measure",
        horizontal=True,
    )
    grid(results, measure, key=f"{key}_grid")
    lines = [f"- {summary(results, arm, measure)}" for arm in arms_present(results, measure)]
    st.markdown("\n".join(lines))
    st.markdown(induction_text(rows))
    cell_detail(rows, results, key=f"{key}_cell")
