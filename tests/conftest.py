"""Shared fixtures: small models built from a fixed seed, and the repository root."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from tfviz import ModelConfig
from tfviz.model import Encoder

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"


def make_model(seed: int = 0, **sizes) -> Encoder:
    """A randomly initialised encoder in eval mode (no dropout), deterministic for a seed."""
    cfg = dict(
        vocab_size=12, n_out=5, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=10, dropout=0.0
    )
    cfg.update(sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Encoder(ModelConfig(**cfg))
        # Non-zero biases everywhere, so tests notice a dropped or misplaced bias.
        for p in model.parameters():
            if p.dim() == 1:
                p.data.normal_(0, 0.1)
    return model.eval()


@pytest.fixture
def model() -> Encoder:
    return make_model()


@pytest.fixture
def ids() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 11, (3, 7), generator=g)


APP = str(ROOT / "app.py")


@pytest.fixture
def fresh_app(monkeypatch, tmp_path):
    """For AppTest: empty Streamlit caches (they outlive AppTest instances), a private user
    models folder, no upload-limit override, and torch's thread count put back afterwards (the
    app sets it for the whole process, and later tests must compute as they would alone)."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setenv("TFVIZ_USER_MODELS", str(tmp_path / "user_models"))
    monkeypatch.delenv("TFVIZ_MAX_UPLOAD_MB", raising=False)
    threads = torch.get_num_threads()
    yield tmp_path / "user_models"
    st.cache_data.clear()
    st.cache_resource.clear()
    torch.set_num_threads(threads)


def start_app(view: str | None = None, model: str | None = None, lang: str | None = None):
    """A fresh AppTest session, run once (on a tab, model and language if given), with no
    exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    if view:
        at.session_state["view"] = view
    if lang:
        at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    if model is not None:
        at.selectbox(key="model").set_value(model).run()
        assert not at.exception, at.exception
    return at


def wait_until(condition, timeout: float = 30.0) -> None:
    """Poll condition (bounded) until it holds; AssertionError if it never does."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def submit_training(at, name: str, steps: int):
    """Start a tiny training through the app's Train form; returns the session's job."""
    at.selectbox(key="train_d_model").set_value(16)
    at.selectbox(key="train_heads").set_value(2)
    at.selectbox(key="train_layers").set_value(1)
    at.selectbox(key="train_d_ff").set_value(32)
    at.number_input(key="train_steps").set_value(steps)
    at.text_input(key="train_name").set_value(name)
    at.button(key="train_submit").click().run()
    assert not at.exception and not at.error
    return at.session_state["train_job"]


def page_figures(at) -> list[dict]:
    """Every chart an AppTest page shows in its main area, as plotly JSON, in page order: the
    plotly charts and the figures of the canvas charts (tfviz.ui.widgets.canvas_charts)."""
    from tfviz.ui.widgets import CANVAS_NAME

    out: list[dict] = []

    def visit(node) -> None:
        kind = getattr(node, "type", None)
        if kind == "plotly_chart":
            out.append(json.loads(node.proto.spec))
        elif kind == "bidi_component" and node.proto.component_name == CANVAS_NAME:
            out.extend(json.loads(node.proto.json)["figures"])  # the data canvas_charts sent
        for child in getattr(node, "children", {}).values():
            visit(child)

    visit(at.main)
    return out
