"""The Analysis and "Does W_o matter?" tabs, driven headless through AppTest; the rerun job."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.conftest import start_app
from tests.support import array, charts, unescape
from tfviz import Encoder, analysis, get_task, plots, save_checkpoint
from tfviz.core.metrics import compact
from tfviz.experiments import experiment
from tfviz.messages import say
from tfviz.serve import jobs
from tfviz.ui.i18n import translate

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ANALYSIS, EXPERIMENT = "Analysis", "Does W_o matter?"
SECTIONS = (
    "Norm-based attention",
    "Attention rollout",
    "Head importance",
    "Ablate before vs after W_o",
    "OV circuits",
    "How W_o mixes heads",
)


pytestmark = pytest.mark.usefixtures("fresh_app")
start = start_app


def show(at: AppTest, section: str) -> AppTest:
    at.segmented_control(key="analysis_section").set_value(section).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def chart_titled(at: AppTest, start_of_title: str) -> dict:
    found = [f for f in charts(at) if f["layout"]["title"]["text"].startswith(start_of_title)]
    assert len(found) == 1, [f["layout"]["title"]["text"] for f in charts(at)]
    return found[0]


def metrics_labelled(at: AppTest, start_of_label: str) -> list:
    return [m for m in at.metric if m.label.startswith(start_of_label)]


# ---- the Analysis tab ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", [None, "bundled:max_position", "bundled:sum"])
def test_every_analysis_section_draws_its_charts(model):
    at = start(ANALYSIS, model)
    cfg = dict(L=2, H=4)

    show(at, "Norm-based attention")
    # Raw and norm-based attention, each in columns of heads headed by name (issue 31).
    headings = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "Raw attention" in headings and "Norm-based attention" in headings
    names = [name for figure in charts(at) for name in plots.block_titles(figure)]
    assert names.count("L0 all heads") == 1 and names.count("L0 mean") == 1
    assert all(names.count(f"L0 H{h}") == 2 for h in range(cfg["H"]))  # raw and norm-based
    assert at.expander  # "What is this?" with the paper's explanation

    show(at, "Attention rollout")
    rollout = chart_titled(at, "Attention rollout")
    z = array(rollout["data"][0]["z"])
    rows = z[~np.isnan(z).all(axis=1)]  # the token rows of every block
    # Each block's rows sum to 1 (two blocks side by side per layer row).
    np.testing.assert_allclose(np.nansum(rows, axis=1), 2.0, atol=1e-4)

    show(at, "Head importance")
    score_map = chart_titled(at, "Loss change")
    assert array(score_map["data"][0]["z"]).size == cfg["L"] * cfg["H"]
    curve = [f for f in charts(at) if [d["type"] for d in f["data"]] == ["scatter", "scatter"]]
    assert len(curve) == 1 and len(array(curve[0]["data"][0]["y"])) == cfg["L"] * cfg["H"] + 1
    assert len(at.dataframe) == 1

    show(at, "Ablate before vs after W_o")
    bars = chart_titled(at, "How far attn_out of L0 moved")
    assert [d["type"] for d in bars["data"]] == ["bar", "bar"]

    show(at, "OV circuits")
    lines = chart_titled(at, "Singular values")
    assert len(lines["data"]) == cfg["L"] * cfg["H"]
    comp = chart_titled(at, "Composition")
    assert plots.block_titles(comp) == ["L0→L1 Q", "L0→L1 K", "L0→L1 V"]

    show(at, "How W_o mixes heads")
    shares = chart_titled(at, "W_o of L0")
    assert shares["data"][0]["x"] == [f"H{h}" for h in range(cfg["H"])]
    assert len(metrics_labelled(at, "Mixing number")) == cfg["L"]


def test_norm_based_attention_follows_the_w_o_switch_and_raw_attention_does_not():
    at = show(start(ANALYSIS), "Norm-based attention")
    raw, norm = cells(at, "weight"), cells(at, "norm")
    assert np.nanmax(norm) > 0
    at.radio(key="w_o_mode").set_value("zero").run()
    assert not at.exception
    # W_o is part of f(x): zeroed, nothing is written, though layer 0 still looks the same way.
    np.testing.assert_array_equal(cells(at, "weight"), raw)
    assert np.nanmax(cells(at, "norm")) == 0


def cells(at: AppTest, value: str) -> np.ndarray:
    """The cells of every column of heads whose hover calls a cell's value `value` ("weight":
    raw attention, "norm": norm-based), one column after another."""
    found = [
        array(f["data"][0]["z"]).ravel()
        for f in charts(at)
        if f["data"] and f"<br>{value} %{{z" in f["data"][0].get("hovertemplate", "")
    ]
    assert found, "no such chart"
    return np.concatenate(found)


def test_the_importance_slider_reads_the_curve_without_recomputing(monkeypatch):
    calls = []
    curve = analysis.keep_top_k_curve
    monkeypatch.setattr(
        analysis, "keep_top_k_curve", lambda *a, **k: calls.append(1) or curve(*a, **k)
    )
    at = show(start(ANALYSIS), "Head importance")
    every = metrics_labelled(at, "Token accuracy keeping 8 of 8 heads")
    assert len(every) == 1 and float(every[0].value.rstrip("%")) > 95
    at.slider(key="importance_k").set_value(1).run()
    assert not at.exception
    one = metrics_labelled(at, "Token accuracy keeping 1 of 8 heads")
    assert len(one) == 1 and float(one[0].value.rstrip("%")) < 50
    assert "points" in one[0].delta and one[0].delta.startswith("-")
    marked = [f for f in charts(at) if len(f["data"]) == 2 and f["data"][1]["mode"] == "markers"]
    assert marked[0]["data"][1]["x"] == [1]
    assert len(calls) == 1  # the slider only indexes the cached curve
    at.radio(key="importance_rank").set_value("gradient").run()
    assert not at.exception
    assert metrics_labelled(at, "Token accuracy keeping 1 of 8 heads")
    assert "Gradient score" in chart_titled(at, "Gradient")["layout"]["title"]["text"]
    assert any(unescape(c.value).startswith("Kept: L") for c in at.caption)
    assert len(calls) == 2  # a new ranking: its curve, once


def test_head_importance_with_w_o_zeroed_everywhere_scores_every_head_zero():
    # No head reaches the output then: every score is 0 (the gate gradient used to raise).
    at = show(start(ANALYSIS), "Head importance")
    at.radio(key="w_o_mode").set_value("zero").run()
    assert not at.exception
    at.radio(key="importance_rank").set_value("gradient").run()
    assert not at.exception
    assert not array(chart_titled(at, "Gradient")["data"][0]["z"]).any()
    table = at.dataframe[0].value
    assert (table["gradient score"] == 0).all() and (table["loss change"] == 0).all()


def test_ablating_before_and_after_w_o_shows_both_numbers_and_agrees_with_w_o_off():
    at = show(start(ANALYSIS), "Ablate before vs after W_o")
    at.selectbox(key="ablation_layer").set_value(1)
    at.selectbox(key="ablation_head").set_value(2).run()
    assert not at.exception
    before = metrics_labelled(at, "Token accuracy, L1H2 zeroed before W_o")
    after = metrics_labelled(at, "Token accuracy, same dims zeroed after W_o")
    assert len(before) == len(after) == 2  # your sequence, and 256 random examples
    assert before[1].value != after[1].value  # W_o mixes heads: the two removals differ
    assert any("common mistake" in unescape(i.value) for i in at.info)
    # With W_o off (identity) the head's slice is the same before and after: they agree.
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    before = metrics_labelled(at, "Token accuracy, L1H2 zeroed before W_o")
    after = metrics_labelled(at, "Token accuracy, same dims zeroed after W_o")
    assert [m.value for m in before] == [m.value for m in after]


def test_a_one_layer_model_after_a_two_layer_one(tmp_path):
    folder = tmp_path / "user_models"
    folder.mkdir()
    task = get_task("reverse")
    config = task.model_config(d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
    torch.manual_seed(0)
    save_checkpoint(folder / "one.safetensors", Encoder(config).eval(), "reverse")
    at = show(start(ANALYSIS), "How W_o mixes heads")
    at.selectbox(key="mixing_layer").set_value(1).run()  # a layer the next model lacks
    at.selectbox(key="model").set_value("yours:one").run()
    assert not at.exception
    assert at.selectbox(key="mixing_layer").value == 0
    assert chart_titled(at, "W_o of L0")["data"][0]["x"] == ["H0", "H1"]
    show(at, "OV circuits")
    assert any("one layer" in i.value for i in at.info)


def test_sections_that_need_a_sequence_say_so():
    at = start(ANALYSIS)
    at.text_input(key="sequence").set_value("").run()
    at.segmented_control(key="analysis_section").set_value("Attention rollout").run()
    assert not at.exception
    assert any("Type a valid sequence" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.segmented_control(key="analysis_section").set_value("OV circuits").run()
    assert not at.exception  # from the weights alone: still drawn
    assert chart_titled(at, "Singular values")


# ---- the "Does W_o matter?" tab ------------------------------------------------------------------


def experiment_table(at):
    """The experiment's table (the atlas's cell table above it has no "95% CI" column)."""
    return next(d.value for d in at.dataframe if "95% CI" in d.value.columns)


def test_the_shipped_experiment_shows_curves_a_table_and_the_verdict():
    at = start(EXPERIMENT)
    result = experiment.load_precomputed("reverse")
    curves = chart_titled(at, "Training loss: mean over seeds")
    assert [d.get("name") for d in curves["data"] if d.get("showlegend") is not False] == [
        "with W_o",
        "without W_o",
    ]
    assert len(curves["data"]) == 6  # a band (two edges) and a mean line per condition
    table = experiment_table(at)
    assert len(table) == 3 and "95% CI" in table.columns
    assert table["runs"].tolist() == ["5 + 5"] * 3
    verdicts = [unescape(m.value) for m in at.markdown if "What these runs show" in m.value]
    assert len(verdicts) == 1
    # One finding per quantity, worded from the catalogue as in every language (see the
    # Chinese test below for their exact wording).
    for row in experiment.compare(result):
        what = translate("en", f"experiment.quantity.{row.quantity}")
        assert f"- {what}: the 95% interval" in verdicts[0], what
    assert translate("en", "experiment.finding.caveat") in verdicts[0]


def test_the_experiment_follows_the_model_task():
    at = start(EXPERIMENT, "bundled:sum")
    text = " ".join(unescape(m.value) for m in at.markdown)
    assert "MAE on fresh data:" in text  # sum's metric, in a finding
    assert "MAE on fresh data" in experiment_table(at)["quantity"].tolist()


def test_a_tiny_rerun_completes_and_stays_in_the_session(tmp_path):
    shipped = Path(experiment.default_path("reverse"))
    before = shipped.read_bytes()
    at = start(EXPERIMENT)
    at.number_input(key="exp_seeds").set_value(1)
    at.number_input(key="exp_steps").set_value(10)
    at.button(key="exp_submit").click().run()
    assert not at.exception and not at.error
    end = time.monotonic() + 60
    while not at.success:
        assert time.monotonic() < end, "the rerun did not finish in 60 s"
        time.sleep(0.2)
        at.run()
        assert not at.exception and not at.error
    assert at.radio(key="exp_source").value == "rerun"
    captions = " ".join(unescape(c.value) for c in at.caption)
    assert "with W_o and 1 without, 10 steps" in captions
    text = " ".join(unescape(m.value) for m in at.markdown)
    assert "too few runs for an interval, so no conclusion" in text
    assert experiment_table(at)["runs"].tolist() == ["1 + 1"] * 3
    at.radio(key="exp_source").set_value("shipped").run()
    assert "5 seeds with W_o" in " ".join(unescape(c.value) for c in at.caption)
    assert shipped.read_bytes() == before  # the shipped result is never overwritten
    assert not list(tmp_path.rglob("*.json"))


class EndsMidRun:
    """A stand-in rerun: running at its first state(), done (with a result) from the second on.

    So it ends between the top of a page run, where finished reruns are collected, and the status
    column below.
    """

    def __init__(self, result: experiment.ExperimentResult) -> None:
        self.id = 10_001
        self.result = result
        self.states_read = 0

    def state(self) -> SimpleNamespace:
        self.states_read += 1
        done = self.states_read > 1
        return SimpleNamespace(
            id=self.id,
            spec=SimpleNamespace(task="reverse", seeds=5, steps=200),
            status=jobs.DONE if done else jobs.RUNNING,
            active=not done,
            result=self.result if done else None,
            fraction=1.0 if done else 0.5,
            step=100,
            loss=None,
            message=say("runs_finished", finished=10),
            seconds=1.0,
        )

    def cancel(self) -> None:
        pass


def test_a_rerun_ending_during_a_page_run_is_shown_where_the_message_says():
    at = start(EXPERIMENT)
    at.session_state["experiment_job"] = EndsMidRun(experiment.load_precomputed("reverse"))
    at.run()
    assert not at.exception and not at.error
    assert "Shown above as “your rerun”" in unescape(at.success[0].value)
    assert at.radio(key="exp_source").value == "rerun"  # and it is shown above


def test_a_rerun_can_be_cancelled():
    at = start(EXPERIMENT)
    at.number_input(key="exp_seeds").set_value(5)
    at.number_input(key="exp_steps").set_value(2000)
    at.button(key="exp_submit").click().run()
    assert not at.exception and not at.error
    assert at.get("progress")
    at.button(key="cancel_experiment").click().run()
    end = time.monotonic() + 30
    while not at.warning:
        assert time.monotonic() < end, "the rerun did not stop"
        time.sleep(0.1)
        at.run()
    assert "cancelled" in at.warning[0].value


def test_in_chinese_the_verdict_is_one_finding_per_quantity_read_off_its_interval():
    at = start_app(EXPERIMENT, "bundled:sort", lang="zh")
    result = experiment.load_precomputed("sort")
    rows = experiment.compare(result)
    text = " ".join(m.value for m in at.markdown)
    assert translate("zh", "experiment.findings") in text
    # sort's shipped runs: the learned W_o trains to a lower final loss than none (interval
    # excludes 0), and the accuracy shows no difference; each finding says exactly that.
    outcomes = {row.quantity: row.outcome for row in rows}
    assert outcomes["final_loss"] == "better" and outcomes["token_accuracy"] == "unclear"
    for row in rows:
        what = translate("zh", f"experiment.quantity.{row.quantity}")
        line = translate(
            "zh",
            f"experiment.finding.{row.outcome}",
            what=what,
            other=translate("zh", "experiment.versus.identity"),
            low=compact(row.interval.low),
            high=compact(row.interval.high),
            diff=compact(row.difference),
        )
        assert line in text, line
    assert translate("zh", "experiment.finding.caveat") in text
    # No English sentence is left: the findings are the whole verdict.
    assert "interval" not in text and "What these runs show" not in text
