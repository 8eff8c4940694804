"""The language atlas in the app, through AppTest: "Does W_o matter?" shows its own grid beside
the toy atlas (architectures down, the arms compared with the learned W_o across), a sentence per
arm counted as tfviz.experiments.atlas_stats.analyse_language counts, the runs' induction scores,
a cell's validation curves and numbers, in English and Chinese; without rows it says how to make
them; lesson step 4 quotes it. The rows are made here, small and by hand, so that the test does
not depend on the sweep's (models/atlas/language.jsonl is filled by a sweep)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import page_figures, start_app
from tfviz.analysis.induction import HEAD_FORMED
from tfviz.experiments import atlas_stats, atlas_store, language_report
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LANGUAGE_FORMAT, LanguageCell
from tfviz.ui.atlas import ARM_LABELS, arch_label, varied_fields
from tfviz.ui.i18n import translate

VIEW = "app.view.experiment"
CLEAR = LanguageCell(2, False, 4, 64).key  # no W_o is clearly worse here (every seed)
NOISY = LanguageCell(2, True, 8, 128).key  # and not told apart from the learned W_o here
SEEDS = (0, 1, 2)
WIGGLE = (0.0, 0.012, -0.009)  # per seed: a spread of about 0.01 nats
# Final validation loss by cell and arm, before each seed's wiggle.
LOSS = {
    CLEAR: {"learned": 2.10, "identity": 2.40, "block_diagonal": 2.12, "frozen": 2.20,
            "gated": 2.08},
    NOISY: {"learned": 1.90, "identity": 1.90, "block_diagonal": 1.91, "frozen": 1.95,
            "gated": 1.90},
}  # fmt: skip
SHUFFLE = {"identity": (0.0, -0.011, 0.013)}  # NOISY's no-W_o seeds wiggle otherwise: unclear
INDUCTION = {"learned": 0.45, "identity": 0.05, "block_diagonal": 0.2, "frozen": 0.1, "gated": 0.25}


def atlas_row(cell: str, arm: str, seed: int) -> dict:
    wiggle = (SHUFFLE.get(arm, WIGGLE) if cell == NOISY else WIGGLE)[seed]
    loss = LOSS[cell][arm] + wiggle
    curve = [[step, round(loss + (1000 - step) / 1000, 5)] for step in range(100, 1001, 100)]
    return {
        "format": LANGUAGE_FORMAT,
        "key": f"{cell}/{arm}/s{seed}",
        "cell": cell,
        "arm": arm,
        "seed": seed,
        "steps": 1000,
        "recipe": {
            "context": 64,
            "batch_size": 16,
            "lr": 0.003,
            "weight_decay": 0.1,
            "positions": "learned",
            "schedule": "cosine",
        },  # fmt: skip
        "valid_loss": round(loss, 5),
        "valid_windows": 1000,
        "valid_curve": curve,
        "curve_windows": 64,
        "final_loss": round(loss - 0.05, 5),
        "curve": [round(loss + 1 - i / 100, 5) for i in range(100)],
        "curve_every": 10,
        "induction": {"layer": 1, "head": 0, "score": INDUCTION[arm] - 0.01 * seed},
        "previous_token": 0.2,
        "in_context_drop": 0.1,
        "seconds": 10.0,
        "torch_version": "test",
    }


ROWS = [atlas_row(cell, arm, seed) for cell in LOSS for seed in SEEDS for arm in LANGUAGE_ARMS]


@pytest.fixture
def rows_file(fresh_app, tmp_path, monkeypatch):
    """The hand-made rows in a file of their own, where the app reads the language atlas."""
    path = tmp_path / "language.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.setattr(atlas_store, "LANGUAGE", path)
    return path


def squeezed_title(text: str) -> str:
    """A title without its line breaks and spaces: a wrapped Chinese title breaks mid-word."""
    return "".join(text.replace("<br>", "").split())


def squeezed_titles(at) -> list[str]:
    return [squeezed_title(f["layout"]["title"]["text"]) for f in page_figures(at)]


def figure(at, title: str) -> dict:
    return next(
        f
        for f in page_figures(at)
        if squeezed_title(f["layout"]["title"]["text"]) == squeezed_title(title)
    )


def summary(lang: str, results: dict, arm: str, measure: str) -> str:
    """The sentence the page must show, with counts computed here from the analysis."""
    counts = atlas_stats.verdict_counts(results, arm, measure)
    return translate(
        lang,
        "latlas.summary",
        other=translate(lang, f"atlas.versus.{arm}"),
        what=translate(lang, f"atlas.measure.{measure}"),
        cells=counts["helps"] + counts["hurts"] + counts["unclear"],
        helps=counts["helps"],
        hurts=counts["hurts"],
        unclear=counts["unclear"],
        m=atlas_stats.family_size(results, arm, measure),
    )


def cell_table(at):
    """The language atlas's table of a cell (the toy atlas's has another measure)."""
    measure = translate("en", "atlas.col.measure")
    valid = translate("en", "atlas.measure.valid_loss")
    return next(d.value for d in at.dataframe if valid in d.value.get(measure, []).tolist())


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_the_rows_hold_one_clear_and_one_unclear_comparison():
    results = atlas_stats.analyse_language(ROWS)
    head = atlas_stats.LANGUAGE_HEADLINE
    assert results[CLEAR].verdict("identity", head) == "helps"
    assert results[NOISY].verdict("identity", head) == "unclear"
    assert atlas_stats.family_size(results, "identity", head) == 2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_language_grid_and_its_counted_sentences(rows_file, lang):
    results = atlas_stats.analyse_language(ROWS)
    at = start_app(view=translate(lang, VIEW), lang=lang)
    assert not at.error, [e.value for e in at.error]
    text = markdown_text(at)
    assert "⟦" not in text and "⟦" not in " ".join(c.value for c in at.caption)
    # The grid: architectures down, the four arms compared across, in the page's language.
    head = atlas_stats.LANGUAGE_HEADLINE
    what = translate(lang, f"atlas.measure.{head}")
    grid = figure(at, translate(lang, "latlas.grid.title", what=what))
    grey, sure, unsure = grid["data"]
    assert len(grey["y"]) == 2 and len(grey["x"]) == len(LANGUAGE_ARMS) - 1
    assert {len(r) for r in grey["customdata"]} == {len(LANGUAGE_ARMS) - 1}
    # CLEAR's square against no W_o: the verdict's mark and learned minus no W_o, drawn in full;
    # NOISY's: pale.
    c = results[CLEAR].comparisons[("identity", head)]
    assert sure["z"][0][0] is not None and sure["z"][0][0] > 0  # the learned W_o does better
    assert sure["text"][0][0] == f"✓<br>{c.difference:+.3f}"
    assert unsure["z"][1][0] is not None and sure["z"][1][0] is None
    assert unsure["text"][1][0].startswith("≈<br>")
    hover = grey["customdata"][0][0]
    assert f"{c.interval.low:+.3f}" in hover and f"{c.p_holm:.3g}" in hover
    # A sentence per arm, its counts as the analysis counts them; and the induction scores.
    for arm in LANGUAGE_ARMS[1:]:
        assert summary(lang, results, arm, head) in text, arm
    # The best induction score of each arm's runs; every run of the learned W_o reached tfviz's
    # line for an induction head, 0.3 (0.45 to 0.43), none of another arm did.
    best = translate(lang, "atlas.list_sep").join(
        translate(
            lang,
            "latlas.induction.arm",
            other=translate(lang, ARM_LABELS[arm]),
            score=f"{max(r['induction']['score'] for r in ROWS if r['arm'] == arm):.3f}",
        )
        for arm in LANGUAGE_ARMS
    )
    assert language_report.INDUCTION_LINE == HEAD_FORMED == 0.3
    some = translate(
        lang,
        "latlas.induction.some",
        what=best,
        line=language_report.INDUCTION_LINE,
        runs=len(LOSS) * len(SEEDS),
        total=len(ROWS),
        other=translate(lang, ARM_LABELS["learned"]),
    )
    assert some in text


def test_the_measure_radio_switches_the_grid_and_the_sentences(rows_file):
    results = atlas_stats.analyse_language(ROWS)
    at = start_app(view=translate("en", VIEW))
    radio = at.radio(key="latlas_measure")
    assert list(radio.options) == [
        translate("en", f"atlas.measure.{m}") for m in atlas_stats.LANGUAGE_MEASURES
    ]
    radio.set_value("induction").run()
    assert not at.exception, at.exception
    what = translate("en", "atlas.measure.induction")
    assert squeezed_title(translate("en", "latlas.grid.title", what=what)) in squeezed_titles(at)
    for arm in LANGUAGE_ARMS[1:]:
        assert summary("en", results, arm, "induction") in markdown_text(at)
    assert translate("en", "latlas.grid.legend.score") in [c.value for c in at.caption]
    # Higher is better for the score: the learned W_o's higher score reads as doing better.
    c = results[CLEAR].comparisons[("identity", "induction")]
    assert c.difference > 0 and c.verdict == "helps"


def test_a_cell_opens_its_validation_curves_and_its_numbers_with_their_intervals(rows_file):
    results = atlas_stats.analyse_language(ROWS)
    at = start_app(view=translate("en", VIEW))
    picker = at.selectbox(key="latlas_cell")
    assert picker.value == CLEAR  # the first cell where W_o helps against none
    varied = varied_fields([r.cell for r in results.values()])
    name = arch_label(results[CLEAR].cell, varied, "en")
    curves = figure(at, translate("en", "latlas.curves.title", cell=name))
    assert len(curves["data"]) == len(LANGUAGE_ARMS) * len(SEEDS)  # every arm, every seed
    assert curves["data"][0]["x"][0] == 100 and curves["data"][0]["x"][-1] == 1000
    table = cell_table(at)
    assert len(table) == (len(LANGUAGE_ARMS) - 1) * len(atlas_stats.LANGUAGE_MEASURES)
    c = results[CLEAR].comparisons[("identity", "valid_loss")]
    interval = f"[{c.interval.low:.3f}, {c.interval.high:.3f}]"
    assert interval in table[translate("en", "atlas.col.ci")].tolist()
    # Another cell: its own curves and numbers.
    picker.set_value(NOISY).run()
    assert not at.exception, at.exception
    name = arch_label(results[NOISY].cell, varied, "en")
    assert squeezed_title(translate("en", "latlas.curves.title", cell=name)) in squeezed_titles(at)
    table = cell_table(at)
    c = results[NOISY].comparisons[("identity", "valid_loss")]
    assert f"[{c.interval.low:.3f}, {c.interval.high:.3f}]" in table["95% interval"].tolist()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("content", [None, ""], ids=["no file", "empty file"])
def test_without_rows_the_page_says_how_to_make_them(
    fresh_app, tmp_path, monkeypatch, lang, content
):
    path = tmp_path / "language.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setattr(atlas_store, "LANGUAGE", path)
    at = start_app(view=translate(lang, VIEW), lang=lang)
    empty = translate(lang, "latlas.empty")
    assert empty in [i.value for i in at.info]
    assert "python -m tfviz.cli.atlas run --language" in empty
    assert at.radio(key="atlas_arm") is not None  # the toy atlas is there still


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lesson_step_4_quotes_the_language_atlas(rows_file, lang):
    results = atlas_stats.analyse_language(ROWS)
    at = start_app(view=translate(lang, "app.view.lessons"), lang=lang)
    at.selectbox(key="lesson_step").set_value(4).run()
    assert not at.exception, at.exception
    text = markdown_text(at)
    head = atlas_stats.LANGUAGE_HEADLINE
    none = atlas_stats.verdict_counts(results, "identity", head)
    opening = translate(
        lang,
        "lessons.s4.language",
        runs=len(ROWS),
        cells=len(results),
        steps="1,000",
        helps=none["helps"],
        hurts=none["hurts"],
        unclear=none["unclear"],
        m=atlas_stats.family_size(results, "identity", head),
    )
    assert opening in text
    c = atlas_stats.largest_difference(results, "identity", head)
    assert c.cell == CLEAR
    cells = [r.cell for r in results.values()]
    largest = translate(
        lang,
        "lessons.s4.language_largest",
        cell=arch_label(results[c.cell].cell, varied_fields(cells), lang),
        diff=f"{c.difference:+.3f}",
        low=f"{c.interval.low:+.3f}",
        high=f"{c.interval.high:+.3f}",
        p=f"{c.p_holm:.2g}",
        seeds=len(SEEDS),
    )
    assert largest in text
    gated = atlas_stats.verdict_counts(results, "gated", head)
    assert (
        translate(
            lang,
            "lessons.s4.language_gated",
            helps=gated["helps"],
            hurts=gated["hurts"],
            unclear=gated["unclear"],
            m=atlas_stats.family_size(results, "gated", head),
        )
        in text
    )
    # The step's question and its folded answer are there still.
    assert translate(lang, "lessons.show_answer") in [e.label for e in at.expander]


def test_lesson_step_4_says_nothing_of_the_language_atlas_without_rows(
    fresh_app, tmp_path, monkeypatch
):
    monkeypatch.setattr(atlas_store, "LANGUAGE", tmp_path / "missing.jsonl")
    at = start_app(view=translate("en", "app.view.lessons"))
    at.selectbox(key="lesson_step").set_value(4).run()
    assert not at.exception, at.exception
    assert "**On real text:**" not in markdown_text(at)
    assert translate("en", "lessons.show_answer") in [e.label for e in at.expander]
