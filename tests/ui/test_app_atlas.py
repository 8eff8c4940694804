"""The atlas in the app (issue 29), through AppTest: "Does W_o matter?" opens on the bundled
atlas with every sentence worded from its numbers, and a student runs the open cell again in a
process of its own, a job of the server's one manager, whose rows come back to the page."""

from __future__ import annotations

from tests.conftest import page_figures, start_app
from tfviz.experiments import atlas, atlas_stats
from tfviz.experiments.atlas_store import BUNDLED, read_rows
from tfviz.serve import jobs
from tfviz.ui import atlas as atlas_view
from tfviz.ui.i18n import translate
from tfviz.ui.jobs import job_manager, job_text

VIEW = translate("en", "app.view.experiment")


def test_the_view_opens_on_the_atlas_with_its_counted_summary(fresh_app):
    rows = read_rows(BUNDLED)
    results = atlas_stats.analyse(rows)
    at = start_app(view=VIEW)
    titles = [f["layout"]["title"]["text"].replace("<br>", " ") for f in page_figures(at)]
    other = translate("en", "atlas.versus.identity")
    assert translate("en", "atlas.grid.title", other=other) in titles
    counts = atlas_stats.verdict_counts(results, "identity")
    summary = translate(
        "en",
        "atlas.summary",
        cells=len(results),
        trained=len(results) - counts["not_trained"],
        helps=counts["helps"],
        hurts=counts["hurts"],
        unclear=counts["unclear"] + counts["missing"],
        not_trained=counts["not_trained"],
        other=other,
        m=atlas_stats.family_size(results, "identity"),
    )
    assert summary in [m.value for m in at.markdown]
    # A square not told apart from zero is drawn pale, each square by one trace only.
    grid = page_figures(at)[0]
    grey, sure, unsure = grid["data"]
    assert unsure["opacity"] < sure.get("opacity", 1)
    drawn = [sum(v is not None for row in tr["z"] for v in row) for tr in (sure, unsure)]
    # and the untrained cells read at a longer budget (models/atlas/longer.jsonl), marked *
    longer = atlas_view.load_longer(results)
    read = [x.result for x in longer.values() if x.state == "read"]
    pale = counts["unclear"] + sum(r.verdict("identity") == "unclear" for r in read)
    assert drawn[1] == pale and sum(drawn) == len(results) - counts["not_trained"] + len(read)
    # One colour bar, on a layer that draws squares; every square's sentence on hover.
    scales = [tr for tr in (sure, unsure) if tr.get("showscale")]
    assert len(scales) == 1 and any(v is not None for row in scales[0]["z"] for v in row)
    rows_, cols = len(sure["z"]), len(sure["z"][0])
    assert len(grey["customdata"]) == rows_ and {len(r) for r in grey["customdata"]} == {cols}
    # Against the block-diagonal W_o: the grid and its sentence follow the choice.
    at.radio(key="atlas_arm").set_value("block_diagonal").run()
    titles = [f["layout"]["title"]["text"].replace("<br>", " ") for f in page_figures(at)]
    block = translate("en", "atlas.versus.block_diagonal")
    assert translate("en", "atlas.grid.title", other=block) in titles


def test_a_student_runs_the_open_cell_again_outside_the_server(fresh_app, monkeypatch):
    monkeypatch.setattr(atlas_view, "APP_BUDGET", 3)  # a few steps a run: seconds, not minutes
    at = start_app(view=VIEW)
    cell = at.selectbox(key="atlas_cell").value
    at.number_input(key="atlas_own_seeds").set_value(2)
    at.button(key="atlas_own_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    job = at.session_state["atlas_job"]  # a job of the server's one manager, like a training
    try:
        assert job.kind == "atlas_sweep" and job.spec.cell == cell
        assert sum(job_manager().counts()) == 1  # it takes one of the server's slots
        runs = len(atlas.plan_cells([atlas.Cell.from_key(cell)], 2))
        assert job.wait(timeout=240) and job.work.process.returncode == 0
        at.run()
        done = translate("en", "atlas.own.done", done=runs, runs=runs)
        assert done in [s.value for s in at.success]
        titles = [f["layout"]["title"]["text"].replace("<br>", " ") for f in page_figures(at)]
        name = atlas_view.cell_name(atlas.Cell.from_key(cell), set())
        assert translate("en", "atlas.own.curves", cell=name) in titles
        out = job.spec.out
        assert read_rows(out) and out.parent != BUNDLED.parent  # the bundled file untouched
    finally:
        job.cancel()
        job.wait(60)


def test_a_session_runs_one_sweep_at_a_time_and_stops_it(fresh_app, monkeypatch):
    """As a training: while the session's sweep runs, the form says so instead of starting
    another, and the panel's stop button stops it."""
    monkeypatch.setattr(atlas_view, "APP_BUDGET", 3)
    at = start_app(view=VIEW)
    at.number_input(key="atlas_own_seeds").set_value(5)
    at.button(key="atlas_own_start").click().run()
    job = at.session_state["atlas_job"]
    try:
        assert job.state().active and at.get("progress")
        at.button(key="atlas_own_start").click().run()
        assert [e.value for e in at.error] == [translate("en", "atlas.own.still_running")]
        assert at.session_state["atlas_job"] is job
        at.button(key="atlas_own_stop").click().run()
        assert job.wait(60)
        at.run()
        assert job.state().status == jobs.CANCELLED, job.state().message
        said = translate("en", "atlas.own.cancelled", message=job_text(job.state().message))
        assert said in [w.value for w in at.warning]
    finally:
        job.cancel()
        job.wait(60)


def test_a_cell_that_did_not_train_says_what_more_steps_made_of_it(
    fresh_app, tmp_path, monkeypatch
):
    """With longer runs on file: the square of a cell read at the longer budget carries its
    verdict marked *, every untrained square says its state, and a sentence counts them."""
    import json

    from tests.experiments.test_atlas import longer_rows
    from tfviz.experiments import atlas_store

    rows = longer_rows(3000, {"learned": [1200, 1300, 1250], "identity": [2000, 2100, 1900]})
    path = tmp_path / "longer.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows.values()), encoding="utf-8")
    monkeypatch.setattr(atlas_store, "LONGER", path)
    results = atlas_stats.analyse(read_rows(BUNDLED))
    longer = atlas_stats.longer(results, rows)
    at = start_app(view=VIEW)
    assert not at.exception, at.exception
    counts = atlas_stats.longer_counts(longer)
    budget = f"{atlas.RECIPES['reverse'].steps:,}"
    said = translate("en", "atlas.longer.summary", cells=len(longer), budget=budget, **counts)
    assert said in [m.value for m in at.markdown]
    grid = page_figures(at)[0]
    texts = [t for tr in grid["data"] for row in tr.get("text") or [] for t in row if t]
    assert any(t.startswith("✓*") for t in texts)  # reverse, one layer, 4 heads: read at 3,000
    hovers = " ".join(str(h) for row in grid["data"][0]["customdata"] for h in row)
    read = translate("en", "atlas.longer.read", budget=3000, seeds=3, reached=3)
    assert read.split(",")[0] in hovers.replace("<br>", " ")
    assert translate("en", "atlas.longer.pending") in hovers.replace("<br>", " ")
