"""The bundled language atlas (models/atlas/language.jsonl): every run of the plan is there, made
by the recipe the code states; the README and docs/claims(.zh).md say what its rows give; and a
re-run of one cell reproduces its verdict on this machine, whatever processor it has (training is
chaotic and float kernels differ between processors, so digits are reproduced only within what
training allows)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest

from tfviz.experiments import atlas_report, atlas_stats, language_atlas, language_report
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LANGUAGE_FORMAT
from tfviz.experiments.atlas_store import LANGUAGE, LANGUAGE_LR, read_made, read_rows

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The cell re-run in full (both arms of its verdict, every seed): attention alone, 4 heads, D 64,
# the cheapest (about 10 s a run on one thread) and the induction-head model's shape.
RERUN_CELL = "language/L2/noffn/H4/D64"
RERUN_PROCESSES = 2  # the cores CI has


@pytest.fixture(scope="module")
def rows():
    found = read_rows(LANGUAGE, LANGUAGE_FORMAT)
    assert found, "models/atlas/language.jsonl has no rows"
    return found


def test_every_run_of_the_plan_is_bundled_with_the_stated_recipe(rows):
    plan = language_atlas.plan(5)
    assert {s.key for s in plan} <= set(rows)
    assert len(plan) == 8 * len(LANGUAGE_ARMS) * 5 == 200
    for row in rows.values():
        assert row["steps"] == language_atlas.STEPS
        assert row["recipe"] == {
            "context": language_atlas.CONTEXT,
            "batch_size": language_atlas.BATCH,
            "lr": language_atlas.LR,
            "weight_decay": language_atlas.WEIGHT_DECAY,
            "positions": language_atlas.POSITIONS,
            "schedule": "cosine",
        }
        assert row["valid_windows"] == language_atlas.VALID_WINDOWS
        assert [s for s, _ in row["valid_curve"]] == list(range(100, 1001, 100))
    made = read_made(LANGUAGE)
    assert made and {m["torch"] for m in made} == {r["torch_version"] for r in rows.values()}


def test_the_readme_and_the_claims_say_what_the_rows_give(rows):
    readme = (LANGUAGE.parent / "README.md").read_text(encoding="utf-8")
    assert readme == atlas_report.readme()
    begin, end = language_report.LANGUAGE_MARKERS
    for name, lang in (("claims.md", "en"), ("claims.zh.md", "zh")):
        doc = (DOCS / name).read_text(encoding="utf-8")
        section = doc.split(begin, 1)[1].split(end, 1)[0]
        probe = read_rows(LANGUAGE_LR, LANGUAGE_FORMAT)
        assert section == "\n" + language_report.claims_section(rows, lang, probe), name


def test_the_claims_section_quotes_the_analysis(rows):
    # The generator's own figures, recomputed here from the rows by hand for one of them.
    results = atlas_stats.analyse_language(rows)
    c = results[RERUN_CELL].comparisons[("identity", "valid_loss")]
    learned = [rows[f"{RERUN_CELL}/learned/s{s}"]["valid_loss"] for s in range(5)]
    none = [rows[f"{RERUN_CELL}/identity/s{s}"]["valid_loss"] for s in range(5)]
    assert c.difference == pytest.approx(sum(learned) / 5 - sum(none) / 5)
    text = language_report.claims_section(rows, "en")
    assert f"{c.difference:+.3f}".replace("-", "−") in text
    assert f"m = {atlas_stats.family_size(results, 'identity', 'valid_loss')}" in text


def test_a_rerun_of_one_cell_reproduces_its_verdict(rows):
    """Both arms of the cell's learned-versus-none verdict, every seed, trained again here."""
    cell = language_atlas.LanguageCell.from_key(RERUN_CELL)
    specs = [
        language_atlas.LanguageRunSpec(cell, arm, seed)
        for arm in ("learned", "identity")
        for seed in range(5)
    ]
    # The ten runs are independent, one thread each, and run_language is a module-level function
    # of a dict (the atlas's own runner sends it to Dask workers): two processes train them at
    # once, so the other core works too whenever the other test worker waits on a browser. A
    # fresh (spawned) process, as a Dask worker is: no forked copy of this one's torch threads.
    with ProcessPoolExecutor(RERUN_PROCESSES, mp_context=get_context("spawn")) as pool:
        made = list(pool.map(language_atlas.run_language, [s.to_dict() for s in specs]))
    again = {}
    for spec, row in zip(specs, made, strict=True):
        stored = rows[spec.key]
        # The first 10 steps agree to float noise on any processor; the end within what
        # training allows.
        assert row["key"] == spec.key
        assert row["curve"][0] == pytest.approx(stored["curve"][0], abs=1e-3)
        assert row["valid_loss"] == pytest.approx(stored["valid_loss"], abs=0.05)
        again[spec.key] = row
    mixed = {**rows, **again}  # the cell's rows replaced, the other cells' kept for Holm's m
    before = atlas_stats.analyse_language(rows)[RERUN_CELL]
    after = atlas_stats.analyse_language(mixed)[RERUN_CELL]
    assert after.verdict("identity", "valid_loss") == before.verdict("identity", "valid_loss")
