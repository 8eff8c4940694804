"""The Train tab's true sentences (issue 31): every W_o a model can be trained with is offered
and trains as named; the time left is measured from the run itself, never promised; a trained
model is "yours" only in the session that trained it."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from tests.conftest import start_app, submit_training
from tfviz import load_checkpoint
from tfviz.core import modes
from tfviz.serve import jobs
from tfviz.ui.i18n import translate
from tfviz.ui.jobs import time_left

pytestmark = pytest.mark.usefixtures("fresh_app")


def test_the_form_offers_every_training_mode_in_both_languages():
    for lang in ("en", "zh"):
        at = start_app("Train", lang=lang)
        radio = at.radio(key="train_w_o")
        assert list(radio.options) == [
            translate(lang, f"train.w_o.{mode}") for mode in modes.TRAINING
        ]


def test_a_block_diagonal_model_trains_through_the_form_and_keeps_only_its_heads_blocks(
    fresh_app,
):
    at = start_app("Train")
    at.radio(key="train_w_o").set_value(modes.BLOCK_DIAGONAL)
    job = submit_training(at, "blocks", 5)
    assert job.wait(60) and job.state().status == jobs.DONE, job.state().message
    model, meta = load_checkpoint(fresh_app / "blocks.safetensors")
    assert meta.record["w_o"] == modes.BLOCK_DIAGONAL
    H, d_k = model.config.n_heads, model.config.d_model // model.config.n_heads
    for layer in model.layers:
        W = layer.attn.W_o.weight.detach()
        for i in range(H):
            for j in range(H):
                block = W[i * d_k : (i + 1) * d_k, j * d_k : (j + 1) * d_k]
                if i == j:
                    assert block.abs().sum() > 0  # each head's own map was trained
                else:
                    assert torch.count_nonzero(block) == 0  # nothing mixes across heads


def test_the_progress_bar_says_the_time_left_once_it_is_measured():
    at = start_app("Train")
    job = submit_training(at, "long", 20_000)  # far longer than the test waits
    try:
        end = time.monotonic() + 60
        while job.state().seconds_left is None:
            assert time.monotonic() < end, "no time left was measured"
            time.sleep(0.2)
        at.run()
        assert not at.exception
        bars = [p.proto.text for p in at.get("progress")]
        assert bars and "left" in bars[0], bars
        assert "measuring" not in bars[0]
    finally:
        job.cancel()
        assert job.wait(30)


@pytest.mark.parametrize(
    "seconds_left, en, zh",
    [
        (None, "measuring the speed", "正在测量速度"),
        (7.4, "about 7 s left", "大约还剩 7 秒"),
        (112.0, "about 1 min 50 s left", "大约还剩 1 分 50 秒"),
        (0.2, "about 0 s left", "大约还剩 0 秒"),
    ],
)
def test_the_time_left_is_worded_in_each_language(seconds_left, en, zh):
    snap = jobs.JobState(
        id=1, kind="train", spec=None, status=jobs.RUNNING, message=None, done=0, total=1, step=0
    )
    snap = dataclasses.replace(snap, seconds_left=seconds_left)
    assert en in time_left(snap, lang="en")
    said = time_left(snap, lang="zh")
    assert zh in said and "left" not in said


def test_a_trained_model_is_yours_only_in_the_session_that_trained_it():
    trainer, visitor = start_app("Train"), start_app("Train")
    job = submit_training(trainer, "mine", 5)
    assert job.wait(60) and job.state().status == jobs.DONE, job.state().message
    trainer.run()
    visitor.run()
    assert "mine (yours)" in trainer.selectbox(key="model").options
    options = visitor.selectbox(key="model").options
    assert "mine (class model)" in options and not any("yours" in o for o in options), options
    zh = start_app(lang="zh")
    options = zh.selectbox(key="model").options
    source = translate("zh", "sidebar.source.class")
    assert translate("zh", "sidebar.model_option", name="mine", source=source) in options
    assert not any(translate("zh", "sidebar.source.yours") in o for o in options), options
