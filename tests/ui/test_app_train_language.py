"""The Train view's language part, driven headless through AppTest: the form starts a language
model's training as a job whose progress (the bar with the time left, a Stop button) shows in
English and Chinese; a finished model says its validation loss and induction score, joins every
session's picker and opens; a refused name says why."""

from __future__ import annotations

import time

import pytest

from tests.conftest import start_app
from tests.support import unescape
from tfviz import hf
from tfviz.serve import jobs, work
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")


def open_language(lang: str = "en", model: str | None = None):
    at = start_app("Train", model, lang=lang)
    at.segmented_control(key="train_section").set_value("language").run()
    assert not at.exception, at.exception
    return at


def submit_language(at, name: str, steps: int):
    """Start a tiny language model through the form; returns the session's job."""
    at.selectbox(key="lm_layers").set_value(1)
    at.selectbox(key="lm_heads").set_value(2)
    at.selectbox(key="lm_d_model").set_value(32)
    at.selectbox(key="lm_context").set_value(64)
    at.number_input(key="lm_steps").set_value(steps)
    at.text_input(key="lm_name").set_value(name)
    at.button(key="lm_submit").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at.session_state["lm_job"]


def shown_until(at, condition, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the page never showed it"
        time.sleep(0.2)
        at.run()
        assert not at.exception, at.exception


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_form_starts_a_job_whose_progress_shows_and_stops(fresh_app, lang):
    at = open_language(lang)
    assert translate(lang, "train.lm.intro")[:20] in unescape(" ".join(c.value for c in at.caption))
    form_steps = at.number_input(key="lm_steps").value
    assert form_steps == work.LM_STEPS and at.checkbox(key="lm_ffn").value is False
    assert at.radio(key="lm_positions").value == "rotary"
    job = submit_language(at, "long_lm", 20_000)  # far longer than the test waits
    try:
        assert job.kind == "language"
        assert job.spec == work.LanguageSpec(
            name="long_lm", n_layers=1, n_heads=2, d_model=32, context=64, steps=20_000
        )
        shown_until(at, lambda: job.state().seconds_left is not None and at.get("progress"))
        at.run()
        (bar,) = [unescape(p.proto.text) for p in at.get("progress")]
        progress = translate(lang, "train.progress", name="long_lm", step=0, steps="20000", loss="")
        assert progress.split("0")[0] in bar, bar  # "Training long_lm: step " / its Chinese
        left = translate(lang, "jobs.left.about", left="")
        measuring = translate(lang, "jobs.left.measuring")
        assert left.strip(" ·")[:4] in bar or measuring in bar, bar
        if lang == "zh":
            assert "left" not in bar and "Training" not in bar
        at.button(key="cancel_lm").click().run()
        assert job.wait(30)
        shown_until(at, lambda: at.warning)
        assert job.state().status == jobs.CANCELLED
        assert "long_lm" in unescape(at.warning[0].value)
    finally:
        job.cancel()
        job.wait(30)
    assert not (fresh_app / "long_lm").exists()


def test_a_finished_model_shows_its_scores_and_opens_from_every_picker(fresh_app):
    at = open_language()
    visitor = start_app("Train")
    job = submit_language(at, "small_lm", 20)
    assert job.wait(120) and job.state().status == jobs.DONE, job.state().message
    shown_until(at, lambda: at.success)
    result: work.LanguageResult = job.state().result
    said = unescape(at.success[0].value)
    assert "Trained small_lm" in said and f"validation loss {result.valid_loss:.3f}" in said
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Validation loss (nats per character)"] == f"{result.valid_loss:.3f}"
    head = f"L{result.induction_layer}H{result.induction_head}"
    assert metrics[f"Induction score, {head}"] == f"{result.induction:.2f}"
    assert hf.open_folder(fresh_app / "small_lm").model.config.causal
    # Listed for everyone, in every session's picker.
    assert "small_lm (class language model)" in at.selectbox(key="model").options
    visitor.run()
    assert "small_lm (class language model)" in visitor.selectbox(key="model").options
    at.button(key="open_lm").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="model").value == "yours-lm:small_lm"
    # The model is a decoder: the Train tab still offers the language part, nothing breaks.
    assert not at.error, [e.value for e in at.error]
    at.session_state["view"] = "Attention"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    zh = start_app(lang="zh")
    source = translate("zh", "folder.option_lm_class")
    option = translate("zh", "sidebar.model_option", name="small_lm", source=source)
    assert option in zh.selectbox(key="model").options


def test_a_refused_name_says_why_and_starts_nothing(fresh_app):
    at = open_language("zh")
    at.text_input(key="lm_name").set_value("../up")
    at.button(key="lm_submit").click().run()
    assert not at.exception
    (error,) = at.error
    assert translate("zh", "train.not_started", problems="")[:6] in error.value
    assert "lm_job" not in at.session_state
    assert not fresh_app.exists() or list(fresh_app.iterdir()) == []


def test_a_language_model_s_name_cannot_be_a_bundled_one():
    at = open_language()
    at.text_input(key="lm_name").set_value("shakespeare-2l-attn")
    at.button(key="lm_submit").click().run()
    assert not at.exception
    (error,) = at.error
    assert "reserved" in error.value


def test_the_chinese_language_part_has_no_english_left_before_and_after_a_training():
    from tests.project.test_zh_review import english_left

    at = open_language("zh")
    found = english_left(at, "form")
    job = submit_language(at, "zh_lm", 15)
    assert job.wait(120) and job.state().status == jobs.DONE, job.state().message
    shown_until(at, lambda: at.success)
    found += english_left(at, "result")
    assert not found, "\n".join(found)
    said = unescape(at.success[0].value)
    assert "验证损失" in said and "归纳头" in said and "Trained" not in said
