"""The Train view's parts beyond training, driven headless through AppTest: retraining W_o alone
as a job (result, curve, hostile step counts), the training timeline slider, and the form's causal
box (a decoder-style toy model)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import MODELS, page_figures, start_app, submit_training
from tests.support import plotly_charts, unescape
from tests.ui.test_app import array
from tfviz import get_task, plots, settings
from tfviz.core.trace import run_trace
from tfviz.serve import jobs, work
from tfviz.training.checkpoint import load_checkpoint, save_checkpoint
from tfviz.training.evaluate import evaluate
from tfviz.training.timeline import (
    Timeline,
    load_timeline,
    replay_step,
    save_timeline,
    timeline_path,
)
from tfviz.training.train import train
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")


def plotly_titled(at: AppTest, prefix: str) -> dict:
    found = [
        f
        for f in plotly_charts(at)
        if f["layout"].get("title", {}).get("text", "").startswith(prefix)
    ]
    assert len(found) == 1, [f["layout"].get("title") for f in plotly_charts(at)]
    return found[0]


def chart_table(proto) -> dict[str, list]:
    """The data of the retraining's chart as {series: values}, from the Arrow table the page
    gets (long form: one row per series and step)."""
    import pyarrow as pa

    (dataset,) = proto.datasets
    table = pa.ipc.open_stream(dataset.data.data).read_all().to_pydict()
    series: dict[str, list] = {}
    names, values = table["line"], table["value"]
    for name, value in zip(names, values, strict=True):
        series.setdefault(name, []).append(value)
    return series


def open_part(at: AppTest, part: str) -> AppTest:
    at.segmented_control(key="train_section").set_value(part).run()
    assert not at.exception, at.exception
    return at


def wait_for(at: AppTest, seconds: float = 90) -> None:
    """Rerun the page until the session's retraining has ended and its outcome shows."""
    end = time.monotonic() + seconds
    while not (at.success or at.warning or at.error):
        assert time.monotonic() < end, "the retraining did not finish in time"
        time.sleep(0.2)
        at.run()
        assert not at.exception, at.exception


# ---- retrain W_o alone ---------------------------------------------------------------------------


def test_retraining_w_o_alone_runs_as_a_job_and_shows_accuracy_coming_back():
    at = open_part(start_app("Train", "bundled:sort"), "retrain")
    at.selectbox(key="retrain_start").set_value("identity")
    at.number_input(key="retrain_steps").set_value(40)
    at.button(key="retrain_submit").click().run()
    assert not at.exception and not at.error
    job = at.session_state["retrain_job"]
    assert job.kind == "retrain_w_o" and job.spec == work.RetrainSpec("sort", "identity", 40)
    wait_for(at)
    assert "retrained alone from identity (W_o off) for 40 steps" in unescape(at.success[0].value)
    result = job.state().result
    # The numbers shown are the job's: learned, at the start (W_o off) and after retraining.
    shown = {m.label: m.value for m in at.metric}
    learned, start, after = (
        result.metrics_learned["token_accuracy"],
        result.metrics_start["token_accuracy"],
        result.metrics_after["token_accuracy"],
    )
    assert shown["learned W_o"] == f"{100 * learned:.1f}%"
    assert shown["start: identity (W_o off)"] == f"{100 * start:.1f}%"
    assert shown["after 40 steps"] == f"{100 * after:.1f}%"
    assert start < after <= 1.0 and start < learned  # W_o off costs accuracy; retraining helps
    # The curve: step 0, every 2 steps (40 // 20) and the last, on the same examples as the ends.
    assert result.curve_steps == list(range(0, 41, 2))
    sort_model, _ = load_checkpoint(MODELS / "sort.safetensors")
    assert evaluate(sort_model, "sort", n=work.RETRAIN_EVAL_N) == result.metrics_learned
    (line,) = at.get("vega_lite_chart")  # the curve and the learned W_o's level
    drawn = chart_table(line.proto)
    assert drawn["W_o retrained alone"] == [m["token_accuracy"] for m in result.curve]
    assert drawn["learned W_o"] == [learned] * len(result.curve)
    # Both axes' domains are given (Vega-Lite's first draw, before the data, would otherwise warn
    # of an infinite extent): the steps' whole range, and every value shown inside the y one.
    spec = json.loads(line.proto.spec)["encoding"]
    assert spec["x"]["scale"]["domain"] == [0, 40]
    low, high = spec["y"]["scale"]["domain"]
    assert low < min(drawn["W_o retrained alone"]) and high > max(drawn["learned W_o"])


@pytest.mark.parametrize(
    "steps, said",
    [
        (0, "got 0"),
        (-3, "got -3"),
        (2.5, "got 2.5"),
        (1e30, "got 1e+30"),
        (settings.RETRAIN_MAX_STEPS + 1, f"got {settings.RETRAIN_MAX_STEPS + 1}"),
    ],
)
def test_a_bad_step_count_is_refused_with_a_message_and_starts_nothing(steps, said):
    at = open_part(start_app("Train"), "retrain")
    at.number_input(key="retrain_steps").set_value(steps)
    at.button(key="retrain_submit").click().run()
    assert not at.exception
    (error,) = at.error
    text = unescape(error.value)
    assert "Retraining not started" in text
    assert f"Steps must be a whole number from 1 to {settings.RETRAIN_MAX_STEPS:,}" in text
    assert said in text
    assert "retrain_job" not in at.session_state


@pytest.mark.parametrize("steps", [math.nan, math.inf, -math.inf])
def test_a_non_number_is_put_back_to_a_number_before_anything_runs(steps):
    at = open_part(start_app("Train"), "retrain")
    at.number_input(key="retrain_steps").set_value(steps)
    at.button(key="retrain_submit").click().run()
    assert not at.exception and not at.error
    # Streamlit replaces a value that is not a number with the field's default: that is run.
    kept = at.number_input(key="retrain_steps").value
    assert math.isfinite(kept)
    job = at.session_state["retrain_job"]
    job.cancel()
    assert job.spec.steps == int(kept)


def test_the_retraining_part_speaks_chinese():
    at = start_app("Train", lang="zh")
    at = open_part(at, "retrain")
    assert at.button(key="retrain_submit").label == "重新训练 W_o"
    assert at.selectbox(key="retrain_start").format_func("identity") == "恒等映射（关闭 W_o）"


# ---- the training timeline -----------------------------------------------------------------------


@pytest.fixture
def timeline_model(fresh_app):
    """A sort model trained for 24 steps, saved as a user model with its timeline beside it."""
    task = get_task("sort")
    config = task.model_config(d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
    timeline = Timeline(every=6)
    model, history = train(task, config, steps=24, lr=1e-2, seed=3, device="cpu", timeline=timeline)
    fresh_app.mkdir(parents=True, exist_ok=True)
    path = fresh_app / "grown.safetensors"
    save_checkpoint(path, model, "sort", history, evaluate(model, task, n=50))
    save_timeline(timeline_path(path), timeline)
    return path


def test_the_timeline_slider_shows_each_step_as_replayed(timeline_model):
    at = start_app("Train", "yours:grown")
    at = open_part(at, "timeline")
    slider = at.select_slider(key="timeline_step")
    assert slider.options == ["step 0", "step 6", "step 12", "step 18", "step 24"]
    assert slider.value == 24  # the trained model first
    model, _ = load_checkpoint(timeline_model)
    timeline = load_timeline(timeline_path(timeline_model), model.config)
    text = at.text_input(key="sequence").value
    task = get_task("sort")
    for index, step in [(4, 24), (0, 0), (2, 12)]:
        if slider.value != step:
            slider.set_value(step).run()
            assert not at.exception and not at.error
            slider = at.select_slider(key="timeline_step")
        want = replay_step(timeline, index, model.config, task, text, n=64)
        grid = plotly_titled(at, f"Attention at step {step}")
        drawn = json.loads(plots.attention_grid(want.attn, want.labels).to_json())
        np.testing.assert_allclose(
            array(grid["data"][0]["z"]), array(drawn["data"][0]["z"]), atol=1e-6
        )
        scores = plotly_titled(at, f"Head importance at step {step}")
        np.testing.assert_allclose(array(scores["data"][0]["z"]), want.importance, rtol=1e-5)
        (mixing,) = [m for m in at.metric if m.label == "W_o mixing, layer 0"]
        assert mixing.value == f"{want.mixing[0]:.3f}"
    # The untrained model and the trained one attend differently.
    first = replay_step(timeline, 0, model.config, task, text)
    last = replay_step(timeline, 4, model.config, task, text)
    assert not np.allclose(first.attn, last.attn, atol=1e-3)


def test_a_bundled_model_says_it_ships_without_a_timeline():
    at = open_part(start_app("Train"), "timeline")
    infos = [unescape(i.value) for i in at.info]
    assert any("bundled model and ships without a timeline" in i for i in infos)
    assert not at.get("select_slider")


def test_a_damaged_timeline_is_reported_not_raised(timeline_model):
    timeline_path(timeline_model).write_bytes(b"not a timeline")
    at = open_part(start_app("Train", "yours:grown"), "timeline")
    assert not at.exception
    assert "The training timeline cannot be read" in unescape(at.error[0].value)


# ---- a causal toy model ----------------------------------------------------------------------


def test_the_causal_box_trains_a_decoder_whose_attention_reads_no_later_token(fresh_app):
    at = start_app("Train")
    at.selectbox(key="train_task").set_value("balanced").run()
    box = at.checkbox(key="train_causal")
    assert not box.disabled and not box.value  # offered, not ticked
    assert "balanced" in box.help and "max_position" in box.help and "reverse" not in box.help
    box.check()
    job = submit_training(at, "decoder", 5)
    assert job.spec.causal and job.spec.task == "balanced"
    assert job.wait(60) and job.state().status == jobs.DONE, job.state().message
    model, meta = load_checkpoint(fresh_app / "decoder.safetensors")
    assert meta.config.causal and meta.config.pool == "last"  # read at the last token
    end = time.monotonic() + 30
    while not at.success:
        assert time.monotonic() < end, "the result did not show"
        time.sleep(0.2)
        at.run()
    at.button(key="open_trained").click().run()
    assert not at.exception and at.selectbox(key="model").value == "yours:decoder"
    sidebar = " ".join(t.value for t in at.sidebar.text)
    assert translate("en", "sidebar.causal") in sidebar
    at.session_state["view"] = "Attention"
    at.run()
    assert not at.exception and not at.error
    (grid,) = [f for f in page_figures(at) if plots.block_titles(f)]
    assert plots.block_titles(grid) == ["L0 H0", "L0 H1", "L0 mean"]  # read row by row
    want = run_trace(model, get_task("balanced"), at.text_input(key="sequence").value).attn
    T, gap = want.shape[-1], grid["layout"]["meta"]["blocks"]["gap"]
    mosaic = array(grid["data"][0]["z"]).astype(float)  # the blocks one under the other
    for b, head in enumerate([want[0, 0], want[0, 1], want[0].mean(0)]):
        z = mosaic[b * (T + gap) : b * (T + gap) + T]  # rows: queries, columns: keys
        above = np.triu(np.ones(z.shape, dtype=bool), 1)
        # the masked cells are gaps in the chart, not weights of 0; the model gives them 0
        assert z.shape[0] >= 2 and np.isnan(z[above]).all() and (head[above] == 0).all(), z
        np.testing.assert_allclose(z[~above], head[~above], atol=1e-6)
        np.testing.assert_allclose(np.nansum(z, 1), 1.0, atol=1e-5)


def test_the_causal_box_is_off_for_a_task_answered_at_every_position():
    at = start_app("Train")
    at.selectbox(key="train_task").set_value("max_position").run()
    at.session_state["train_causal"] = True  # as a submitted form leaves it
    at.run()
    assert at.checkbox(key="train_causal").value
    at.selectbox(key="train_task").set_value("reverse").run()
    box = at.checkbox(key="train_causal")
    assert box.disabled and not box.value  # cleared, and the form trains an encoder
    zh = start_app("Train", lang="zh")
    zh.selectbox(key="train_task").set_value("sort").run()
    box = zh.checkbox(key="train_causal")
    assert box.disabled and box.label == translate("zh", "train.causal")
    assert "求和、最大位置、括号配对" in box.help
