"""Lesson step 4's reading of the atlases: the toy atlas's answer to "does W_o matter?" with the
mechanism's chart, and the language atlas's paragraph on real text. Every number is counted from
the bundled rows (tfviz.ui.atlas and tfviz.ui.language_atlas load them and word the sentences the
"Does W_o matter?" view shares with this step).
"""

from __future__ import annotations

import streamlit as st

from tfviz.core import modes
from tfviz.experiments import atlas, atlas_stats, language_report
from tfviz.plots import atlas as atlas_plots
from tfviz.ui import atlas as atlas_view
from tfviz.ui import language_atlas
from tfviz.ui.i18n import current, t
from tfviz.ui.labels import task_label
from tfviz.ui.widgets import chart

# The chart's measures: the final loss first, where the one-layer cells differ
# (atlas_stats.MEASURES).
LESSON_MEASURES = ("final_loss", "metric", "steps")
# How the answer names the largest difference's verdict (atlas_stats.Comparison.verdict).
LARGEST_VERDICTS = {
    "helps": "lessons.s4.largest.helps",
    "hurts": "lessons.s4.largest.hurts",
    "unclear": "lessons.s4.largest.unclear",
}


def atlas_answer(key: str = "lesson_atlas") -> str | None:
    """Lesson step 4's part: the atlas's answer and the mechanism's chart, every number counted
    from the bundled rows. Returns the answer to the step's question (None without an atlas)."""
    rows, results = atlas_view.load()
    if not results:
        st.info(t("atlas.empty"))
        return None
    st.markdown(t("lessons.s4.atlas_intro", runs=f"{len(rows):,}", cells=len(results)))
    against_none = atlas_view.summary(results, "identity")  # the articles' question: W_o or none
    st.markdown(against_none)
    cells = [
        k
        for k, r in results.items()
        if r.cell.n_layers == 1 and not r.cell.ffn and atlas.MECHANISM_ARM in r.arms
    ]
    if cells:
        arms = (*modes.CONDITIONS, atlas.MECHANISM_ARM)
        lang = current()
        measure = st.radio(
            t("lessons.s4.measure"),
            LESSON_MEASURES,
            format_func=lambda q: t(f"atlas.measure.{q}", lang=lang),
            key=f"{key}_measure",
            horizontal=True,
        )
        means = atlas_stats.arm_means(rows, cells, arms, measure)
        untrained = [task_label(results[c].cell.task) for c in cells if not results[c].trained]
        chart(
            atlas_plots.arm_bars(
                [
                    task_label(results[c].cell.task) + ("" if results[c].trained else "*")
                    for c in cells
                ],
                arms,
                means.mean,
                means.half_width,
                {a: t(atlas_view.ARM_LABELS[a]) for a in arms},
                title=t("lessons.s4.mechanism_title"),
                y_title=t(f"atlas.measure.{measure}"),
            ),
            key=f"{key}_mechanism",
        )
        st.caption(
            t("lessons.s4.mechanism_caption", untrained=t("atlas.list_sep").join(untrained) or "-")
        )
    st.markdown(atlas_view.mechanism_summary(results))
    if (hint := atlas_view.mechanism_hint_text(results)) is not None:
        st.markdown(hint)
    without, with_ffn = (
        atlas_stats.verdict_counts(results, "identity", ffn=ffn) for ffn in (False, True)
    )

    def trained(c: dict) -> int:
        return sum(c.values()) - c["not_trained"]

    counts = t(
        "lessons.s4.answer_atlas",
        noffn_helps=without["helps"],
        noffn_trained=trained(without),
        ffn_helps=with_ffn["helps"],
        ffn_trained=trained(with_ffn),
        hurts=without["hurts"] + with_ffn["hurts"],
    )
    helped = without["helps"] + with_ffn["helps"]
    verdict = t("lessons.s4.answer_some" if helped else "lessons.s4.answer_none")
    return " ".join(
        part for part in (counts, largest_text(results), verdict, reason_text(helped)) if part
    )


def largest_text(results: dict) -> str:
    """The largest measured difference the answer rests on, with its interval, as the atlas
    report gives it (learned W_o minus none, steps to the target, trained cells only)."""
    c = atlas_stats.largest_difference(results, "identity")
    if c is None:
        return ""
    return t(
        "lessons.s4.answer_largest",
        cell=atlas_view.cell_name(
            results[c.cell].cell, atlas_view.varied_fields([r.cell for r in results.values()])
        ),
        diff=f"{c.difference:+.0f}",
        low=f"{c.interval.low:+.0f}",
        high=f"{c.interval.high:+.0f}",
        p="-" if c.p_holm is None else f"{c.p_holm:.2g}",
        seeds=len(c.learned),
        verdict=t(LARGEST_VERDICTS[c.verdict]),
    )


def reason_text(helped: int) -> str:
    """Why W_o matters where the atlas says it does, and why not elsewhere: the mechanism's
    reading where it helped, the other maps that can mix heads where it did not."""
    return t("lessons.s4.answer_why_helps" if helped else "lessons.s4.answer_why")


def language_text() -> str | None:
    """Lesson step 4's paragraph on real text: the learned W_o against none on the final
    validation loss (counts with Holm's m, the largest difference with its interval), and against
    the gated W_o; None without rows."""
    rows, results = language_atlas.load()
    if not results:
        return None
    head = atlas_stats.LANGUAGE_HEADLINE
    values = language_atlas.recipe_values(rows, results)
    cells = [r.cell for r in results.values()]
    none, gated = (language_report.counts(results, arm, head) for arm in ("identity", "gated"))
    parts = [
        t(
            "lessons.s4.language",
            runs=values["runs"],
            cells=values["cells"],
            steps=values["steps"],
            helps=none["helps"],
            hurts=none["hurts"],
            unclear=none["unclear"],
            m=atlas_stats.family_size(results, "identity", head),
        )
    ]
    c = atlas_stats.largest_difference(results, "identity", head)
    if c is not None:
        parts.append(
            t(
                "lessons.s4.language_largest",
                cell=atlas_view.arch_label(results[c.cell].cell, atlas_view.varied_fields(cells)),
                diff=language_atlas.signed(c.difference),
                low=language_atlas.signed(c.interval.low),
                high=language_atlas.signed(c.interval.high),
                p="-" if c.p_holm is None else f"{c.p_holm:.2g}",
                seeds=len(c.learned),
            )
        )
    if sum(gated.values()):
        parts.append(
            t(
                "lessons.s4.language_gated",
                helps=gated["helps"],
                hurts=gated["hurts"],
                unclear=gated["unclear"],
                m=atlas_stats.family_size(results, "gated", head),
            )
        )
    return " ".join(parts)
