"""bench/floor_app.py, the bare pages the latency benches measure the app against: each view
runs, draws the charts its bench waits for, and follows its one control."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.support import array
from tfviz.core.tasks import get_task
from tfviz.core.trace import run_trace
from tfviz.training.checkpoint import load_checkpoint

FLOOR = str(ROOT / "bench" / "floor_app.py")
pytestmark = pytest.mark.usefixtures("fresh_app")


def floor(monkeypatch, view: str) -> AppTest:
    monkeypatch.setenv("TFVIZ_FLOOR_VIEW", view)
    monkeypatch.setenv("TFVIZ_FLOOR_MODEL", "max_position")
    at = AppTest.from_file(FLOOR, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_before_after_draws_the_five_charts_and_follows_the_mode(monkeypatch):
    at = floor(monkeypatch, "before_after")
    assert titles(at) == ["concat", "attn_out", "cosine", "W_o of layer 0", "terms"]
    learned = array(json.loads(at.get("plotly_chart")[3].proto.spec)["data"][0]["z"])
    assert abs(learned).max() > 0.1
    at.sidebar.radio(key="floor_mode").set_value("zero").run()
    zero = array(json.loads(at.get("plotly_chart")[3].proto.spec)["data"][0]["z"])
    assert zero.shape == learned.shape == (64, 64) and not zero.any()  # W_o zero, as applied


def test_parts_draws_the_sweep_and_the_spectrum_per_scope(monkeypatch):
    at = floor(monkeypatch, "parts")
    assert titles(at) == ["modes, all layers", "Singular values of W_o"]
    at.selectbox(key="floor_scope").set_value("L1").run()
    assert titles(at)[0] == "modes, L1"


def test_timeline_draws_both_charts_at_each_step(monkeypatch):
    at = floor(monkeypatch, "timeline")
    assert titles(at) == ["attention, step 480", "importance, step 480"]
    at.select_slider(key="floor_step").set_value(40).run()
    assert titles(at) == ["attention, step 40", "importance, step 40"]


def test_attention_draws_one_plain_heatmap_of_the_views_cells_for_the_typed_sequence(monkeypatch):
    at = floor(monkeypatch, "attention")
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert [t["type"] for t in spec["data"]] == ["heatmap"]  # one trace, plotly's defaults
    model, meta = load_checkpoint(ROOT / "models" / "max_position.safetensors")
    task = get_task(meta.task)
    text = task.examples[-1]
    assert text != task.examples[0]  # the box starts at the first: this is an edit
    at.text_input(key="floor_text").set_value(text).run()
    assert at.code[0].value.split()[1:] == [text]  # the input shown, where the bench looks
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    tr = run_trace(model, task, text)
    H, T = tr.n_heads, len(tr.labels)
    z = array(spec["data"][0]["z"]).reshape(tr.n_layers, H + 1, T, T)  # what the view draws:
    np.testing.assert_allclose(z[:, :H], tr.attn, atol=1e-6)  # every head of every layer
    np.testing.assert_allclose(z[:, H], tr.attn.mean(1), atol=1e-6)  # and each layer's mean
