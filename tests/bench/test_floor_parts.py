"""bench/floor_app.py's pages for issue 46's four parts (bench/ui_latency.py --floor --parts):
each draws its plain charts for the typed text, and the logit lens's reads a decoder folder's
vocabulary (a toy model has none: the page says so, as the app does)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bench import decoder_folders
from tests.conftest import ROOT
from tests.support import array
from tfviz.core.tasks import get_task
from tfviz.core.trace import run_trace
from tfviz.training.checkpoint import load_checkpoint

FLOOR = str(ROOT / "bench" / "floor_app.py")
TOY = "max_position"
TINY_GPT2 = dict(layers=2, heads=2, hidden=32, ff=64, vocab=400, positions=64)
pytestmark = pytest.mark.usefixtures("fresh_app")


def floor_after_typing(monkeypatch, view: str, model: str, text: str) -> AppTest:
    """The view's page after the text is typed into its box."""
    monkeypatch.setenv("TFVIZ_FLOOR_VIEW", view)
    monkeypatch.setenv("TFVIZ_FLOOR_MODEL", model)
    at = AppTest.from_file(FLOOR, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.text_input(key="floor_text").set_value(text).run()
    assert not at.exception, at.exception
    return at


def specs(at: AppTest) -> dict[str, dict]:
    return {c.proto.id.split("-")[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def toy_text() -> tuple[str, object, object]:
    model, meta = load_checkpoint(ROOT / "models" / f"{TOY}.safetensors")
    task = get_task(meta.task)
    return task.examples[-1], model, task


@pytest.mark.parametrize(
    ("view", "charts"),
    [
        ("neuron", {"floor", "floor_qk", "floor_product", "floor_scores"}),
        ("shares", {"floor_concat", "floor_w_o", "floor_share_flow", "floor_share_tokens"}),
        ("freedom", {"floor_spectrum", "floor_angles_learned", "floor_angles_identity"}),
    ],
)
def test_each_parts_page_draws_plain_charts_of_the_typed_text(monkeypatch, view, charts):
    text, model, task = toy_text()
    at = floor_after_typing(monkeypatch, view, TOY, text)
    assert at.code[0].value.split()[1:] == [text]  # the input shown, where the bench looks
    drawn = specs(at)
    assert charts <= set(drawn), sorted(drawn)
    assert {t["type"] for s in drawn.values() for t in s["data"]} <= {"heatmap", "bar"}
    tr = run_trace(model, task, text)
    if view == "shares":  # the typed text's numbers, not the first example's
        np.testing.assert_allclose(array(drawn["floor_concat"]["data"][0]["z"]), tr.concat[0])
    if view == "neuron":
        softmax = array(drawn["floor_scores"]["data"][2]["y"])
        np.testing.assert_allclose(softmax, tr.attn[0, 0, -1], atol=1e-5)


def test_the_lens_page_refuses_a_toy_model_and_reads_a_decoders_vocabulary(monkeypatch, tmp_path):
    text, _, _ = toy_text()
    at = floor_after_typing(monkeypatch, "lens", TOY, text)
    assert at.info and not at.get("plotly_chart")
    folder = tmp_path / "gpt2"
    decoder_folders.build("gpt2", folder, TINY_GPT2)
    at = floor_after_typing(monkeypatch, "lens", f"folder:{folder}", "the cat sat on the mat")
    drawn = specs(at)
    assert set(drawn) == {"floor_lens", "floor_contributions"}
    assert array(drawn["floor_contributions"]["data"][0]["z"]).shape == (2, 2)  # (L, H)
