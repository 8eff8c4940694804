"""The Lessons tab through AppTest: every step in both languages, edits, bad input, training."""

from __future__ import annotations

import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import page_figures, start_app
from tfviz import get_task, load_checkpoint
from tfviz.core.metrics import compact
from tfviz.core.trace import run_trace
from tfviz.experiments import atlas_stats
from tfviz.experiments.atlas_store import BUNDLED, read_rows
from tfviz.serve import jobs, lessons
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")
LESSONS = "Lessons"


def open_lessons(lang: str = "en", model: str | None = None) -> AppTest:
    return start_app(LESSONS, model, lang)


def nodes(node) -> list:
    children = getattr(node, "children", None)
    if not isinstance(children, dict):
        return []
    out = []
    for child in children.values():
        out += [child, *nodes(child)]
    return out


def page_text(at: AppTest) -> str:
    """Every string the page shows: element values, widget labels, options, table columns."""
    parts = []
    for node in nodes(at._tree):
        for name in ("value", "label", "body"):
            value = getattr(node, name, None)  # an element that fails here fails the test
            if isinstance(value, str):
                parts.append(value)
            elif hasattr(value, "columns"):  # a dataframe: its column names are shown
                parts += [str(c) for c in value.columns]
        options = getattr(node, "options", None)
        if isinstance(options, list):
            parts += [str(o) for o in options]
    return "\n".join(parts)


def go_to(at: AppTest, step: int) -> None:
    at.selectbox(key="lesson_step").set_value(step).run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_step_runs_in_both_languages_without_a_missing_key(lang):
    at = open_lessons(lang)
    for step in (1, 2, 3, 4):
        go_to(at, step)
        if step == 1:  # what step 1 draws on request too
            at.toggle(key="lesson_show_model").set_value(True).run()
            at.toggle(key="lesson_edit_w").set_value(True).run()
        text = page_text(at)
        assert "⟦" not in text, f"step {step}: a key is missing from the {lang} catalogue"
        assert translate(lang, f"lessons.step{step}.title") in text
        assert translate(lang, "lessons.show_answer") in [e.label for e in at.expander]
        assert not at.error, [e.value for e in at.error]
    # Step 4 answers from the bundled atlas, in the student's language.
    rows = read_rows(BUNDLED)
    intro = translate(
        lang, "lessons.s4.atlas_intro", runs=len(rows), cells=len(atlas_stats.analyse(rows))
    )
    assert intro.replace("`", "").replace("*", "")[:40] in text.replace("`", "").replace("*", "")
    if lang == "zh":
        assert "Concatenation is not integration" not in page_text(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_steps_1_and_2_show_the_article_s_notation_with_the_shapes_of_the_model_on_screen(lang):
    at = open_lessons(lang)  # the bundled reverse model: D = 64, 4 heads of 16
    # T: the positions the model reads for the typed sequence (its trace, not the text's length).
    model, meta = load_checkpoint("models/reverse.safetensors")
    T = run_trace(model, get_task(meta.task), at.session_state["sequence"]).concat[0].shape[0]
    text = page_text(at).replace("\\", "")
    assert "attn_out = concat · W_o" in text
    assert f"({T}, 4·16) = ({T}, 64)" in text and "(64, 64)" in text, text[:3000]
    assert "Σ_j concat[j] · W_o[j, d]" in text
    go_to(at, 2)
    text = page_text(at).replace("\\", "")
    assert f"({T}, 4, 16)" in text and f"(4, {T}, 16)" in text and "(16, 64)" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_3_shows_two_inputs_attention_side_by_side_and_how_far_apart_they_are(lang):
    at = open_lessons(lang)
    go_to(at, 3)
    assert at.text_input(key="lesson_digits_b").value == "01234567"
    titles = [f["layout"]["title"]["text"] for f in page_figures(at) if "title" in f["layout"]]
    assert "31415926" in titles and "01234567" in titles, titles
    model, meta = load_checkpoint("models/sum_seed.safetensors")
    pair = lessons.attention_pair(model, get_task(meta.task), "31415926", "01234567")
    for layer in range(len(pair.max_diff)):  # each layer's figure, measured on the model
        at.selectbox(key="lesson_attn_layer").set_value(layer).run()
        diff = compact(pair.max_diff[layer])
        said = translate(lang, "lessons.s3.attention_diff", layer=layer, diff=diff)
        assert said in page_text(at), said
    at.text_input(key="lesson_digits_b").set_value("0123").run()  # not as long as the first
    assert [e.value for e in at.error] == [translate(lang, "lessons.s3.bad_digits_b", n=8)]


def test_prev_and_next_move_one_step_and_stop_at_the_ends():
    at = open_lessons()
    assert at.session_state["lesson_step"] == 1
    assert at.button(key="lesson_prev").disabled
    at.button(key="lesson_next").click().run()
    assert at.session_state["lesson_step"] == 2
    assert "One big projection" in page_text(at)
    for _ in range(2):
        at.button(key="lesson_next").click().run()
    assert at.session_state["lesson_step"] == 4 and at.button(key="lesson_next").disabled
    at.button(key="lesson_prev").click().run()
    assert at.session_state["lesson_step"] == 3
    assert not at.exception


def test_the_example_shows_1_8_and_follows_an_edited_number():
    at = open_lessons()
    text = page_text(at)
    assert "= **1.8**" in text
    # The loaded model's real W_o, on request: every output dimension of the bundled reverse
    # model's layer 0 draws on all 4 heads.
    assert "**64 of 64**" not in text
    at.toggle(key="lesson_show_model").set_value(True).run()
    assert "**64 of 64**" in page_text(at) and len(at.get("plotly_chart")) == 2
    at.number_input(key="lesson_z1_1").set_value(3.0).run()
    assert not at.exception and not at.error
    assert "1 (head 0) × 0.8 + 3 (head 1) × 0.5 = **2.3**" in page_text(at)  # concat · W_o
    at.button(key="lesson_reset").click().run()
    assert "= **1.8**" in page_text(at)


def test_w_is_edited_on_request_and_kept_when_the_editor_goes_away():
    at = open_lessons()
    assert "= **1.8**" in page_text(at)
    assert not at.toggle(key="lesson_edit_w").value  # a plain table until asked for
    at.toggle(key="lesson_edit_w").set_value(True).run()
    assert not at.exception and "= **1.8**" in page_text(at)
    # What the editor stores after an edit: row 0 (concat[0], head 0's first number) now
    # gives output 0 twice as much.
    w = [list(row) for row in lessons.ARTICLE_W_O]
    w[0][0] *= 2
    at.session_state["lesson_w_values"] = w
    at.toggle(key="lesson_edit_w").set_value(False).run()
    assert not at.exception
    out = lessons.ARTICLE_Z0[0] * w[0][0] + lessons.ARTICLE_Z1[1] * lessons.ARTICLE_W_O[3][0]
    assert f"= **{out:.3g}**" in page_text(at) and "= **1.8**" not in page_text(at)
    w[2][1] = float("nan")  # an emptied cell
    at.session_state["lesson_w_values"] = w
    at.run()
    assert [e.value for e in at.error] == [
        translate("en", "lessons.err.not_finite", where=r"W\_o\[2, 1\]")
    ]
    at.button(key="lesson_reset").click().run()
    assert "= **1.8**" in page_text(at) and not at.error


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bad_number_gets_a_clear_message_in_the_student_s_language(lang):
    # (Streamlit itself turns a NaN or inf sent for a number input into 0; an emptied cell of the
    # W table arrives as NaN and gets the "not a number" message: tests/test_lessons.py.)
    at = open_lessons(lang)
    at.number_input(key="lesson_z0_1").set_value(2e7).run()
    assert not at.exception
    expected = translate(lang, "lessons.err.too_large", where=r"z0\[1\]", limit="1e+06")
    assert [e.value for e in at.error] == [expected]
    assert "= **" not in page_text(at)  # no example numbers drawn from the refused input
    at.number_input(key="lesson_z0_1").set_value(0.5).run()  # row 1 of W_o reads it: 0.2
    assert not at.error and "= **1.9**" in page_text(at)


def test_the_projection_step_prints_a_rounding_sized_difference():
    at = open_lessons()
    go_to(at, 2)
    values = [float(m.value) for m in at.main.metric]
    assert len(values) == 3 and all(0 <= v < 1e-5 for v in values)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_exactly_zero_difference_is_called_exact_not_rounding(lang):
    """The bundled reverse model's layer 0 gives bit-identical q, k, v both ways: the step must
    say so, not show "0.00e+00" and call it float32 rounding."""
    at = open_lessons(lang)
    go_to(at, 2)
    assert [m.value for m in at.main.metric] == ["0", "0", "0"]
    text = page_text(at)
    assert translate(lang, "lessons.s2.answer_exact") in text
    assert "0.00e+00" not in text
    for worst in ("0", "0.00e+00"):  # the answer that calls the difference rounding
        assert translate(lang, "lessons.s2.answer", worst=worst) not in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_rounding_sized_difference_is_still_explained_as_rounding(lang, monkeypatch):
    """On a CPU every bundled model agrees to the bit; a GPU or another BLAS may sum in another
    order. Such a check (differences of about 1e-7) is stood in for here."""
    real = lessons.projection_equivalence

    def rounded(*args, **kwargs):
        check = real(*args, **kwargs)
        return dataclasses.replace(check, max_diff={"q": 1.19e-7, "k": 0.0, "v": 2.38e-7})

    monkeypatch.setattr(lessons, "projection_equivalence", rounded)
    at = open_lessons(lang)
    go_to(at, 2)
    assert [m.value for m in at.main.metric] == ["1.19e-07", "0", "2.38e-07"]
    text = page_text(at)
    assert translate(lang, "lessons.s2.answer", worst="2.38e-07") in text
    assert translate(lang, "lessons.s2.answer_exact") not in text


def test_step_three_predicts_at_once_and_refuses_bad_digits():
    at = open_lessons()
    go_to(at, 3)
    assert "Digits 31415926: the model says **" in page_text(at)
    assert "the right sum is **31**" in page_text(at)
    at.text_input(key="lesson_digits").set_value("12x").run()
    assert [e.value for e in at.error] == [translate("en", "lessons.s3.bad_digits", n=16)]


def test_the_tiny_training_path_trains_through_the_job_system_and_predicts():
    at = open_lessons("zh")
    go_to(at, 3)
    at.number_input(key="lesson_steps").set_value(5.0)
    at.button(key="lesson_train").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    job = at.session_state["lesson_job"]
    assert isinstance(job, jobs.Job) and job.kind == "lesson" and job.state().total == 5
    assert job.wait(120)
    at.run()
    assert not at.exception
    assert job.state().status == jobs.DONE, job.state().message
    assert at.session_state["lesson_model_choice"] == "trained"
    trained = at.session_state["lesson_trained"]
    assert trained.history["steps_done"] == 5 and trained.model.config.d_model == 32
    text = page_text(at)
    assert "已训练 5 步" in text and "数字 31415926：模型的回答是 **" in text
    # A bad step count is refused with a message, not started.
    at.number_input(key="lesson_steps").set_value(2.5)
    at.button(key="lesson_train").click().run()
    assert [e.value for e in at.error] == [translate("zh", "lessons.s3.bad_steps", n=2000)]
    assert at.session_state["lesson_job"] is job


def test_step_four_switches_w_o_and_states_the_experiment_s_verdict():
    at = open_lessons(model="bundled:sum_seed")
    go_to(at, 4)
    text = page_text(at)
    assert "answer tokens changed" in text
    # The atlas's answer, counted from the bundled rows, with the mechanism's chart.
    rows = read_rows(BUNDLED)
    results = atlas_stats.analyse(rows)
    assert f"({len(rows)} runs in {len(results)} cells)" in text
    helped = atlas_stats.verdict_counts(results, "identity")["helps"]
    key = "lessons.s4.answer_some" if helped else "lessons.s4.answer_none"
    why = "lessons.s4.answer_why_helps" if helped else "lessons.s4.answer_why"
    assert translate("en", key) in text and translate("en", why)[:60] in text
    # The largest difference the answer rests on, with its interval and verdict, as measured.
    c = atlas_stats.largest_difference(results, "identity")
    low, high = f"{c.interval.low:+.0f}", f"{c.interval.high:+.0f}"
    assert f"is {c.difference:+.0f} steps" in text and f"interval {low} to {high} steps" in text
    assert translate("en", f"lessons.s4.largest.{c.verdict}") in text
    titles = [f["layout"]["title"]["text"].replace("<br>", " ") for f in page_figures(at)]
    assert translate("en", "lessons.s4.mechanism_title") in titles
    at.radio(key="lesson_w_o").set_value("zero").run()
    at.selectbox(key="lesson_w_o_layer").set_value(0).run()
    assert not at.exception and not at.error
