"""The W_o on/off experiment: t quantiles and Welch intervals by hand, summaries, verdicts that
follow the numbers, a tiny real run (batched equals sequential, progress, JSON round-trip,
cancelling, CLI), and the shipped files."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from tfviz.cli import experiment as cli
from tfviz.core.tasks import list_tasks
from tfviz.experiments import experiment as E
from tfviz.experiments import experiment_report as R
from tfviz.experiments import stats as S

TINY = dict(d_model=8, n_heads=2, d_ff=8, n_layers=1, eval_n=20, batch_size=8)


def _run(condition, seed, losses, metric=0.5, name="accuracy"):
    losses = tuple(float(x) for x in losses)
    return E.Run(
        condition=condition,
        seed=seed,
        losses=losses,
        final_loss=E.final_loss(losses),
        mean_loss=float(np.mean(losses)),
        metrics={name: metric, "n": 20},
        seconds=0.1,
    )


def _result(learned, identity, task="balanced", name="accuracy"):
    """A hand-made result: learned/identity are lists of (losses, metric)."""
    runs = [_run("learned", i, l_, m, name) for i, (l_, m) in enumerate(learned)]
    runs += [_run("identity", i, l_, m, name) for i, (l_, m) in enumerate(identity)]
    settings = {"seeds": list(range(len(learned))), "steps": 3, "batch_size": 8, "sizes": TINY}
    return E.ExperimentResult(task=task, settings=settings, runs=tuple(runs))


# ---- statistics ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "df, want", [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (1e6, 1.960)]
)
def test_t_quantile_matches_the_table(df, want):
    assert S.t_quantile(0.975, df) == pytest.approx(want, abs=6e-4)


def test_t_distribution_basics():
    assert S.t_cdf(0.0, 3.0) == pytest.approx(0.5)
    assert S.t_cdf(-1.5, 7.0) == pytest.approx(1 - S.t_cdf(1.5, 7.0))
    assert S.t_cdf(1.0, 1.0) == pytest.approx(0.75)  # Cauchy: 1/2 + atan(1)/pi
    assert S.t_quantile(0.025, 4) == pytest.approx(-S.t_quantile(0.975, 4))
    assert S.betainc(1.0, 1.0, 0.3) == pytest.approx(0.3)
    assert S.betainc(2.5, 2.5, 0.5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="p must be in"):
        S.t_quantile(1.0, 3)


def test_welch_interval_by_hand():
    # means 2 and 5, variances 1 and 1, n = 3: se^2 = 2/3, df = (2/3)^2 / (2 (1/3)^2 / 2) = 4.
    iv = S.welch_interval([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = 2.7764451 * math.sqrt(2 / 3)
    assert iv.df == pytest.approx(4.0)
    assert iv.difference == -3.0
    assert (iv.low, iv.high) == pytest.approx((-3 - half, -3 + half), abs=1e-5)
    flat = S.welch_interval([1.0, 1.0], [0.5, 0.5])  # no spread: the interval is the point
    assert (flat.low, flat.high) == (0.5, 0.5)
    with pytest.raises(ValueError, match="at least two runs"):
        S.welch_interval([1.0], [2.0, 3.0])


def test_final_loss_is_the_mean_of_the_last_five_percent():
    losses = list(range(100, 0, -1))  # 100 .. 1
    assert E.final_loss(losses) == pytest.approx(np.mean([5, 4, 3, 2, 1]))
    assert E.final_loss([3.0, 2.0]) == 2.0  # at least one step
    assert E.final_loss(list(range(30, 0, -1))) == 1.5  # 5% of 30 steps = 1.5: rounded up to 2


# ---- summaries and words ------------------------------------------------------------------------
def test_summarise_gives_mean_and_band_per_step():
    result = _result(
        [([1, 2, 3], 0.9), ([3, 4, 5], 0.8)],
        [([2, 2, 2], 0.7), ([2, 2, 2], 0.7)],
    )
    curves = E.summarise(result)
    assert curves.conditions == ("learned", "identity")
    np.testing.assert_array_equal(curves.step, [1, 2, 3])
    np.testing.assert_allclose(curves.mean[0], [2, 3, 4])
    np.testing.assert_allclose(curves.std[0], [math.sqrt(2)] * 3, rtol=1e-6)
    np.testing.assert_allclose(curves.upper[0] - curves.lower[0], 2 * curves.std[0])
    np.testing.assert_allclose(curves.std[1], 0.0)
    smooth = E.summarise(result, window=2)  # moving average over the run, then the mean
    np.testing.assert_allclose(smooth.mean[0], [2, 2.5, 3.5])
    # Stopped before the second condition had a finished run: said in the page's language.
    stopped = _result([([1, 2, 3], 0.9)], [])
    with pytest.raises(ValueError, match="at least one finished run") as refused:
        E.summarise(stopped)
    assert "至少需要一次完成的运行" in refused.value.text("zh")


def test_compare_rows_follow_the_runs():
    result = _result(
        [([1, 1, 0.2], 0.9), ([1, 1, 0.4], 0.8), ([1, 1, 0.3], 0.85)],
        [([1, 1, 0.5], 0.6), ([1, 1, 0.7], 0.7), ([1, 1, 0.6], 0.65)],
    )
    final, mean, metric = E.compare(result)
    assert final.quantity == "final_loss" and metric.quantity == "accuracy"
    assert final.mean_learned == pytest.approx(0.3) and final.mean_against == pytest.approx(0.6)
    assert final.difference == pytest.approx(-0.3)
    assert final.lower_is_better and not metric.lower_is_better
    assert final.interval.high < 0 and metric.interval.low > 0


def test_verdict_states_an_interval_that_excludes_zero():
    result = _result(
        [([1, 1, 0.2], 0.9), ([1, 1, 0.4], 0.8), ([1, 1, 0.3], 0.85)],
        [([1, 1, 0.5], 0.6), ([1, 1, 0.7], 0.7), ([1, 1, 0.6], 0.65)],
    )
    text = R.verdict(result)
    iv = E.compare(result)[0].interval
    assert "final training loss was lower by 0.3 " in text
    assert f"95% CI [{iv.low:.3g}, {iv.high:.3g}]" in text
    assert "the interval excludes 0, so in this setting the runs with W_o did better" in text
    assert "3 seeds with W_o and 3 without" in text


def test_verdict_claims_nothing_when_the_interval_includes_zero():
    result = _result(
        [([1, 1, 0.2], 0.7), ([1, 1, 0.6], 0.8)],
        [([1, 1, 0.5], 0.6), ([1, 1, 0.4], 0.9)],
    )
    text = R.verdict(result)
    assert "the interval includes 0, so this run does not show a difference" in text
    assert "excludes" not in text and "did better" not in text and "did worse" not in text


def test_verdict_with_one_seed_draws_no_conclusion():
    text = R.verdict(_result([([1, 0.5], 0.9)], [([1, 0.7], 0.8)]))
    assert "too few runs for a confidence interval" in text and "CI" not in text


def test_verdict_says_when_the_learned_runs_did_not_all_learn_the_task():
    # The atlas's rule: reverse's target is token_accuracy >= 0.95, for every learned run.
    note = "Not every run with the learned W_o reached the task's target"
    low = _result(
        [([1, 1], 0.3), ([1, 1], 0.31)],
        [([1, 1], 0.3), ([1, 1], 0.29)],
        task="reverse",
        name="token_accuracy",
    )
    assert note in R.verdict(low)
    one_short = _result(
        [([1, 1], 0.99), ([1, 1], 0.31)],
        [([1, 1], 0.99), ([1, 1], 0.99)],
        task="reverse",
        name="token_accuracy",
    )
    assert note in R.verdict(one_short)
    learned = _result(
        [([1, 1], 0.99), ([1, 1], 0.96)],
        [([1, 1], 0.3), ([1, 1], 0.29)],
        task="reverse",
        name="token_accuracy",
    )
    assert note not in R.verdict(learned)  # the other arm's failure is the finding, not a caveat


# ---- a real (tiny) run --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_result():
    return E.run_experiment("max_position", seeds=2, steps=6, **TINY)


def test_run_experiment_pairs_seeds_and_records_each_run(tiny_result):
    r = tiny_result
    assert [(x.condition, x.seed) for x in r.runs] == [
        ("learned", 0),
        ("identity", 0),
        ("learned", 1),
        ("identity", 1),
    ]
    assert not r.cancelled and r.metric == "accuracy"
    for run in r.runs:
        assert len(run.losses) == 6 and all(math.isfinite(x) for x in run.losses)
        assert run.final_loss == run.losses[-1]  # 5% of 6 steps rounds up to one step
        assert run.mean_loss == pytest.approx(np.mean(run.losses))
        assert 0.0 <= run.metrics["accuracy"] <= 1.0 and run.metrics["n"] == 20
    # Same seed, same initial weights and batches: the first step's loss differs only via W_o.
    assert r.runs[0].losses[0] != r.runs[1].losses[0]
    assert r.settings["config"]["d_model"] == 8 and r.settings["seeds"] == [0, 1]


def test_json_round_trip_is_exact(tiny_result, tmp_path):
    text = tiny_result.to_json()
    assert E.ExperimentResult.from_json(text) == tiny_result
    path = tiny_result.save(tmp_path / "x.json")
    assert E.ExperimentResult.load(path) == tiny_result
    assert json.loads(path.read_text())["format"] == E.FORMAT


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="other"), "not a tfviz experiment file"),
        (lambda d: d.update(task="nope"), "unknown task 'nope'"),
        (lambda d: d["runs"][0].update(condition="zero"), "has condition 'zero'"),
        (lambda d: d["runs"][1].pop("losses"), "run 1 of the experiment file is malformed"),
        (lambda d: d["runs"][0].update(losses=[]), "empty or non-finite"),
    ],
)
def test_from_json_refuses_malformed_files(tiny_result, edit, message):
    data = json.loads(tiny_result.to_json())
    edit(data)
    with pytest.raises(ValueError, match=message):
        E.ExperimentResult.from_json(json.dumps(data))
    with pytest.raises(ValueError, match="not valid JSON"):
        E.ExperimentResult.from_json("{")


def test_batched_runs_equal_sequential_runs(tiny_result):
    # Dropout 0 (the experiment's default): the same seeds give the same loss curves, whichever
    # way the runs are trained; the metrics come from equal weights, so they agree too.
    sequential = E.run_experiment("max_position", seeds=2, steps=6, batched=False, **TINY)
    assert [(r.condition, r.seed) for r in sequential.runs] == [
        (r.condition, r.seed) for r in tiny_result.runs
    ]
    for batched, alone in zip(tiny_result.runs, sequential.runs, strict=True):
        np.testing.assert_allclose(batched.losses, alone.losses, rtol=1e-4, atol=1e-6)
        assert batched.metrics["accuracy"] == pytest.approx(alone.metrics["accuracy"], abs=0.05)
    assert tiny_result.settings == sequential.settings


def test_progress_comes_once_per_run_and_step_in_run_order():
    seen = []
    r = E.run_experiment("sum", seeds=2, steps=3, on_progress=seen.append, **TINY)
    assert [(p.run, p.step) for p in seen] == [(i, s) for s in (1, 2, 3) for i in (1, 2, 3, 4)]
    assert [(p.condition, p.seed) for p in seen[:4]] == [
        ("learned", 0),
        ("identity", 0),
        ("learned", 1),
        ("identity", 1),
    ]
    assert all(p.runs == 4 and p.steps == 3 for p in seen)
    # Each call carries its own run's loss.
    for p in seen:
        assert p.loss == pytest.approx(r.runs[p.run - 1].losses[p.step - 1], rel=1e-5)


def test_progress_callback_can_cancel():
    seen = []

    def stop_in_second_run(p: E.Progress):
        seen.append((p.run, p.step))
        return not (p.run == 2 and p.step == 3)

    r = E.run_experiment("balanced", seeds=2, steps=5, on_progress=stop_in_second_run, **TINY)
    # The runs train together, so none has finished when the stop comes: none is kept.
    assert r.cancelled and r.runs == ()
    assert seen[0] == (1, 1) and seen[-1] == (2, 3) and len(seen) == 2 * 4 + 2
    assert "cancelled" in R.verdict(r) and "nothing can be compared" in R.verdict(r)


def test_sequential_progress_callback_keeps_finished_runs():
    seen = []

    def stop_in_second_run(p: E.Progress):
        seen.append((p.run, p.step))
        return not (p.run == 2 and p.step == 3)

    r = E.run_experiment(
        "balanced", seeds=2, steps=5, on_progress=stop_in_second_run, batched=False, **TINY
    )
    assert r.cancelled and len(r.runs) == 1 and r.runs[0].condition == "learned"
    assert seen[-1] == (2, 3) and seen[0] == (1, 1) and len(seen) == 5 + 3
    assert "cancelled" in R.verdict(r) and "nothing can be compared" in R.verdict(r)


@pytest.mark.parametrize("batched", [True, False])
def test_bad_settings_are_refused(batched):
    run = functools.partial(E.run_experiment, batched=batched)
    with pytest.raises(ValueError, match="seeds must be"):
        run("sum", seeds=[1, 1], steps=2, **TINY)
    with pytest.raises(ValueError, match="unknown task"):
        run("nope", seeds=2, steps=2)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        run("sum", seeds=2, steps=0, **TINY)


def test_cli_runs_and_prints_the_table(tmp_path, capsys):
    threads = torch.get_num_threads()
    out = tmp_path / "sum.json"
    try:
        args = ["--task", "sum", "--seeds", "2", "--steps", "4", "--out", str(out), "--quiet"]
        args += ["--d-model", "8", "--n-heads", "2", "--d-ff", "8", "--n-layers", "1"]
        assert cli.main(args + ["--eval-n", "10", "--batch-size", "8"]) == 0
    finally:
        torch.set_num_threads(threads)  # the CLI sets it for its own process
    printed = capsys.readouterr().out
    result = E.ExperimentResult.load(out)
    assert result.task == "sum" and len(result.runs) == 4 and result.settings["steps"] == 4
    assert R.format_table(result) in printed and "MAE on fresh data" in printed
    assert R.verdict(result) in printed


# ---- the shipped results ------------------------------------------------------------------------
@pytest.mark.parametrize("task", list_tasks())
def test_shipped_result_loads_and_matches_the_defaults(task):
    result = E.load_precomputed(task)
    assert result is not None, f"models/experiments/{task}.json is missing"
    s = result.settings
    assert result.task == task and not result.cancelled
    assert s["seeds"] == list(range(E.DEFAULTS["seeds"]))
    for key in ("steps", "batch_size", "lr", "schedule", "sizes", "eval_n"):
        assert s[key] == E.DEFAULTS[key], key
    # Every comparison is shipped: each seed with the learned W_o, W_o off and block-diagonal.
    assert result.against == E.AGAINST
    for condition in E.KNOWN_CONDITIONS:
        assert sorted(r.seed for r in result.runs_of(condition)) == s["seeds"], condition
    for run in result.runs:
        assert len(run.losses) == s["steps"]
        assert run.final_loss == pytest.approx(E.final_loss(run.losses), rel=1e-12)
        assert result.metric in run.metrics
    for against in E.AGAINST:
        curves = E.summarise(result, against=against)
        assert curves.conditions == ("learned", against)
        assert curves.mean.shape == (2, s["steps"]) and np.isfinite(curves.mean).all()


def test_shipped_readme_is_generated_from_the_shipped_results():
    text = (E.EXPERIMENTS / "README.md").read_text()
    for task in list_tasks():
        result = E.load_precomputed(task)
        for against in E.AGAINST:
            assert R.format_table(result, against) in text
            assert R.verdict(result, against) in text


# ---- learned against block-diagonal -------------------------------------------------------------
@pytest.fixture(scope="module")
def block_result():
    return E.run_experiment(
        "sort", seeds=2, steps=6, conditions=("learned", "block_diagonal"), **TINY
    )


def test_block_diagonal_runs_pair_with_learned_runs_seed_by_seed(block_result):
    r = block_result
    assert [(x.condition, x.seed) for x in r.runs] == [
        ("learned", 0),
        ("block_diagonal", 0),
        ("learned", 1),
        ("block_diagonal", 1),
    ]
    assert r.against == ("block_diagonal",)
    # Same initial weights and batches; W_o's mixing blocks alone differ, so the losses do too.
    assert r.runs[0].losses[0] != r.runs[1].losses[0]
    rows = E.compare(r, against="block_diagonal")
    assert [row.against for row in rows] == ["block_diagonal"] * 3
    learned = [x.final_loss for x in r.runs_of("learned")]
    block = [x.final_loss for x in r.runs_of("block_diagonal")]
    assert rows[0].mean_learned == pytest.approx(np.mean(learned))
    assert rows[0].mean_against == pytest.approx(np.mean(block))
    assert rows[0].difference == pytest.approx(np.mean(learned) - np.mean(block))
    want = S.welch_interval(learned, block)
    assert (rows[0].interval.low, rows[0].interval.high) == pytest.approx((want.low, want.high))
    # A comparison the result does not hold has no runs on its side, and so no interval.
    assert E.compare(r, against="identity")[0].n_against == 0
    assert E.compare(r, against="identity")[0].interval is None


def test_block_diagonal_batched_equals_sequential(block_result):
    sequential = E.run_experiment(
        "sort", seeds=2, steps=6, conditions=("learned", "block_diagonal"), batched=False, **TINY
    )
    for batched, alone in zip(block_result.runs, sequential.runs, strict=True):
        assert (batched.condition, batched.seed) == (alone.condition, alone.seed)
        np.testing.assert_allclose(batched.losses, alone.losses, rtol=1e-4, atol=1e-6)


def test_block_diagonal_verdict_and_table_name_the_comparison(block_result):
    text = R.verdict(block_result, against="block_diagonal")
    assert "2 seeds with the learned W_o and 2 with a block-diagonal one" in text
    assert "learned minus block-diagonal" in text and "without" not in text
    assert "block-diagonal W_o (mean ± std)" in R.format_table(block_result, "block_diagonal")
    # The default comparison of this result has nothing to compare with.
    assert "nothing can be compared" in R.verdict(block_result)
    with pytest.raises(ValueError, match="compared with one of"):
        R.verdict(block_result, against="zero")
    with pytest.raises(ValueError, match="compared with one of"):
        E.summarise(block_result, against="rank:2")


def test_old_files_with_identity_runs_load_and_merge_with_block_diagonal_runs(
    tiny_result, tmp_path
):
    # A file written before block-diagonal runs existed: learned and identity only.
    old = E.ExperimentResult.from_json(tiny_result.to_json())
    assert old.against == ("identity",)
    extra = E.run_experiment(
        "max_position", seeds=2, steps=6, conditions=("block_diagonal",), **TINY
    )
    merged = old.merged(extra)
    assert merged.against == ("identity", "block_diagonal")
    assert merged.runs[: len(old.runs)] == old.runs
    assert E.ExperimentResult.from_json(merged.to_json()) == merged
    # Trained in their own batch, the block-diagonal runs are those trained beside the learned
    # ones (each is the run train() makes alone), so they pair with the old runs seed by seed.
    together = E.run_experiment(
        "max_position", seeds=2, steps=6, conditions=("learned", "block_diagonal"), **TINY
    )
    for alone, beside in zip(extra.runs, together.runs_of("block_diagonal"), strict=True):
        np.testing.assert_allclose(alone.losses, beside.losses, rtol=1e-4, atol=1e-6)
    other = E.run_experiment(
        "max_position", seeds=2, steps=5, conditions=("block_diagonal",), **TINY
    )
    with pytest.raises(ValueError, match="differ in steps"):
        old.merged(other)
    with pytest.raises(ValueError, match="conditions are"):
        E.run_experiment("max_position", seeds=2, steps=2, conditions=("learned", "zero"), **TINY)


def test_cli_adds_block_diagonal_runs_to_an_existing_file(tiny_result, tmp_path, capsys):
    out = tmp_path / "max_position.json"
    tiny_result.save(out)
    threads = torch.get_num_threads()
    args = ["--task", "max_position", "--seeds", "2", "--steps", "6", "--out", str(out)]
    args += ["--d-model", "8", "--n-heads", "2", "--d-ff", "8", "--n-layers", "1", "--quiet"]
    args += ["--eval-n", "20", "--batch-size", "8", "--against", "block_diagonal", "--add"]
    try:
        assert cli.main(args) == 0
    finally:
        torch.set_num_threads(threads)
    result = E.ExperimentResult.load(out)
    assert result.runs[:4] == tiny_result.runs and len(result.runs) == 6
    printed = capsys.readouterr().out
    assert R.verdict(result, "block_diagonal") in printed and R.verdict(result) in printed


def test_the_verdict_s_values_are_what_the_english_is_worded_from():
    from tfviz.experiments.verdict import Target, verdict_of

    low = _result(
        [([1, 1], 0.3), ([1, 1], 0.31)],
        [([1, 1], 0.3), ([1, 1], 0.29)],
        task="reverse",
        name="token_accuracy",
    )
    v = verdict_of(low)
    assert v.comparable and (v.n_learned, v.n_against) == (2, 2) and not v.cancelled
    assert [r.outcome for r in v.rows] == [r.outcome for r in E.compare(low)]
    assert v.unreached == Target("token_accuracy", ">=", 0.95)  # the atlas's target for reverse
    learned = verdict_of(
        _result([([1, 1], 0.96), ([1, 1], 0.99)], [([1, 1], 0.3)] * 2, "reverse", "token_accuracy")
    )
    assert learned.unreached is None  # every learned run reached it: the comparison is read
    half = verdict_of(
        _result([([1, 1], 0.96), ([1, 1], 0.5)], [([1, 1], 0.99)] * 2, "reverse", "token_accuracy")
    )
    assert half.unreached is not None  # one learned run short of it is enough to say so
    one = verdict_of(_result([([1, 0.5], 0.9)], [([1, 0.7], 0.8)]))
    assert {r.outcome for r in one.rows} == {"no_interval"}
    assert set(E.OUTCOMES) == set(R.SUMMARY_WORDS)  # every outcome has its README words
    cut = verdict_of(replace(low, runs=low.runs_of("learned"), cancelled=True))
    assert cut.cancelled and not cut.comparable and cut.rows == () and cut.unreached is None
