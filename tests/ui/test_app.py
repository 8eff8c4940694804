"""The Streamlit app, driven headless through AppTest: start, type, switch W_o, bad input, train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.conftest import start_app, submit_training
from tests.support import array, charts
from tfviz import get_task, plots
from tfviz.serve import jobs, work

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


pytestmark = pytest.mark.usefixtures("fresh_app")
start = start_app


def prediction_text(at: AppTest) -> str:
    return at.code[0].value


def test_starts_on_a_bundled_model_with_its_first_example():
    at = start()
    assert at.selectbox(key="model").value == "bundled:reverse"
    example = get_task("reverse").examples[0]
    assert at.text_input(key="sequence").value == example
    assert not at.error
    table = prediction_text(at)
    assert "right answer" in table and " ".join(reversed(example)) in table
    figures = charts(at)
    # The grid (heads and their means): one column of squares, which the canvas charts draw a
    # head to a cell, HEAD_COLUMNS to a row, row by row, readable on a phone (issues 31, 44);
    # a head is enlarged on request.
    assert len(figures) == 1
    assert plots.block_titles(figures[0]) == [
        f"L{lay} {h}" for lay in range(2) for h in ("H0", "H1", "H2", "H3", "mean")
    ]
    assert figures[0]["layout"]["meta"][plots.BLOCKS_META]["starts"] == [0, 5]  # a row a layer
    assert figures[0]["data"][0]["x"][0] == "key BOS"
    # The device the models run on here, from what torch finds (the rule the sidebar states:
    # CUDA where there is a GPU, then Apple's MPS, else the CPU).
    mps = getattr(torch.backends, "mps", None)
    if torch.cuda.is_available():
        device = "CUDA"
    elif mps is not None and mps.is_available():
        device = "MPS"
    else:
        device = "CPU"
    lines = [line for t in at.sidebar.text for line in t.value.splitlines()]
    shown = [line for line in lines if line.startswith("Device: ")]
    assert shown == [f"Device: {device}"], lines


# The first page in a fresh interpreter: which tfviz modules did it import?
FIRST_PAGE = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=60)
at.run()
assert not at.exception, at.exception
print(json.dumps(sorted(m for m in sys.modules if m.startswith("tfviz"))))
"""


def test_the_first_page_imports_only_the_view_it_shows(tmp_path):
    env = dict(os.environ, TFVIZ_USER_MODELS=str(tmp_path / "user_models"))
    cmd = [sys.executable, "-c", FIRST_PAGE, APP]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert {"tfviz.ui.sidebar", "tfviz.ui.views.attention"} <= loaded  # the open view: Attention
    # Views not open, and the library modules only they need, wait until they are opened.
    later = {
        "tfviz.ui.views.train",
        "tfviz.ui.views.analysis",
        "tfviz.ui.views.experiment",
        "tfviz.analysis",
    }
    assert not loaded & later, loaded & later


def test_typing_a_sequence_changes_the_prediction():
    at = start()
    before = prediction_text(at)
    at.text_input(key="sequence").set_value("jjiihh").run()
    assert not at.exception
    after = prediction_text(at)
    assert after != before
    assert "h h i i j j" in after
    assert charts(at)[0]["layout"]["yaxis"]["ticktext"][:7] == ["BOS"] + [
        f"{ch}·{i + 1}" for i, ch in enumerate("jjiihh")
    ]


@pytest.mark.parametrize(
    "change",
    [
        lambda at: at.radio(key="w_o_mode").set_value("identity"),
        lambda at: at.radio(key="w_o_mode").set_value("zero"),
        lambda at: at.multiselect(key="ablate").set_value(["L1H0", "L1H1", "L1H2", "L1H3"]),
    ],
    ids=["identity", "zero", "ablate"],
)
def test_switches_change_what_reverse_predicts(change):
    at = start()
    learned = prediction_text(at)
    change(at).run()
    assert not at.exception
    switched = prediction_text(at)
    assert switched != learned
    assert "learned W_o" in switched and "^" in switched


def test_w_o_off_makes_concat_and_attn_out_equal():
    at = start("Before/after W_o")
    cosine = [f for f in charts(at) if f["data"][0]["type"] == "bar"][0]
    assert array(cosine["data"][0]["y"]).min() < 0.99  # the learned W_o turns vectors
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    figures = charts(at)
    cosine = [f for f in figures if f["data"][0]["type"] == "bar"][0]
    np.testing.assert_allclose(array(cosine["data"][0]["y"]), 1.0, atol=1e-5)
    concat, attn_out = (array(f["data"][0]["z"]) for f in figures[:2])
    np.testing.assert_array_equal(concat, attn_out)
    check = [m for m in at.metric if m.label.startswith("max |")][0]
    assert float(check.value) < 1e-5


def test_compare_tab_shows_accuracy_with_and_without_the_switch():
    at = start("W_o off: compare")
    assert any("Nothing is switched" in i.value for i in at.info)
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    accuracy = [m for m in at.metric if "256 random examples" in m.label]
    assert len(accuracy) == 2
    learned, switched = (float(m.value.rstrip("%")) for m in accuracy)
    assert learned > 95 and switched < learned
    titles = [f["layout"]["title"]["text"] for f in charts(at)]
    headings = [m.value for m in at.markdown]
    assert "**learned W\\_o**" in headings and "**switched**" in headings  # the two grids'
    assert "Residual stream after each layer" in titles


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "input is empty"),
        ("abz", "not allowed"),
        ("a" * 17, "17 characters long"),
        ("<b>x</b>", "U+003C"),
    ],
    ids=["empty", "unknown-char", "too-long", "markup"],
)
def test_bad_input_shows_an_error_and_no_chart(text, expected):
    at = start()
    at.text_input(key="sequence").set_value(text).run()
    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value.replace("\\", "")  # markdown escapes
    assert expected in message
    assert "abcdefghij" in message and "1 to 16" in message
    assert not charts(at)  # plotly's or the canvas grid
    assert not at.code  # no prediction either


def test_changing_the_model_resets_the_sequence():
    at = start()
    at.text_input(key="sequence").set_value("jihg").run()
    at.selectbox(key="model").set_value("bundled:sort").run()
    assert not at.exception and not at.error
    assert at.text_input(key="sequence").value == get_task("sort").examples[0]
    assert "1 1 2 3 4 5 6 9" in prediction_text(at)


def test_example_and_random_buttons_fill_the_sequence():
    at = start()
    at.button(key="example_1").click().run()
    assert at.text_input(key="sequence").value == get_task("reverse").examples[1]
    at.button(key="random_example").click().run()
    text = at.text_input(key="sequence").value
    assert get_task("reverse").validate(text) == text
    assert not at.exception and not at.error


def test_one_session_switches_do_not_touch_another():
    first, second = start(), start()
    learned = prediction_text(second)
    first.radio(key="w_o_mode").set_value("zero").run()
    assert prediction_text(first) != learned
    second.run()
    assert prediction_text(second) == learned
    assert second.radio(key="w_o_mode").value == "learned"


def test_unreadable_user_model_is_skipped_with_a_warning(tmp_path):
    folder = tmp_path / "user_models"
    folder.mkdir()
    (folder / "broken.safetensors").write_bytes(b"not a checkpoint at all")
    at = start()
    assert any("broken.safetensors" in w.value.replace("\\", "") for w in at.warning)
    assert "yours:broken" not in at.selectbox(key="model").options


def test_a_chinese_page_says_why_a_checkpoint_is_skipped_in_chinese(tmp_path):
    """The checkpoint's refusal is a code; the page words it in its language (issue 30), even
    though the loaded (refused) checkpoint is cached for every session in any language."""
    from tfviz.training.checkpoint import CheckpointError, load_checkpoint
    from tfviz.ui.i18n import translate
    from tfviz.ui.text import md_escape

    folder = tmp_path / "user_models"
    folder.mkdir()
    (folder / "broken.safetensors").write_bytes(b"\x80\x04 a pickle, never unpickled")
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(folder / "broken.safetensors")
    assert refused.value.code == "pickle"
    english, chinese = start(), start_app(lang="zh")
    for at, lang in ((english, "en"), (chinese, "zh")):
        # The file's name and the reason's values inert, the catalogue's own markup kept: the
        # Chinese `pickle` is drawn as code, not as two literal backticks (issue 44).
        why = refused.value.text(lang, md_escape)
        said = translate(
            lang, "sequence.model_skipped", name=md_escape("broken.safetensors"), why=why
        )
        assert said in [w.value for w in at.warning], (lang, [w.value for w in at.warning])
        assert "\\`" not in said
    assert "`pickle`" in refused.value.text("zh") and "pickle" in str(refused.value)


def test_training_through_the_form_makes_a_selectable_model(tmp_path):
    at = start("Train")
    submit_training(at, "tiny20", 20)
    end = time.monotonic() + 60
    while not at.success:
        assert time.monotonic() < end, "training did not finish in 60 s"
        time.sleep(0.2)
        at.run()
        assert not at.exception and not at.error
    assert "tiny20" in at.success[0].value.replace("\\", "")
    assert (tmp_path / "user_models" / "tiny20.safetensors").is_file()
    assert "tiny20 (yours)" in at.selectbox(key="model").options
    at.button(key="open_trained").click().run()
    assert not at.exception
    assert at.selectbox(key="model").value == "yours:tiny20"
    at.session_state["view"] = "Attention"
    at.run()
    assert not at.exception and not at.error
    titles = [title for figure in charts(at) for title in plots.block_titles(figure)]
    assert titles == ["L0 H0", "L0 H1", "L0 mean"]  # the new model: 1 layer, 2 heads


class SavesWhenAsked:
    """A stand-in training job that is done: its model file appears at its first state().

    So it is saved after the sidebar has listed the models of a page run, and before the Train
    view reports it.
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.id = 10_001
        self.folder, self.name = folder, name
        self.spec = SimpleNamespace(name=name, task="sort", steps=20)  # as a real Job's

    def state(self) -> SimpleNamespace:
        path = self.folder / f"{self.name}.safetensors"
        if not path.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes((Path(APP).parent / "models" / "sort.safetensors").read_bytes())
        return SimpleNamespace(
            spec=self.spec,
            status=jobs.DONE,
            active=False,
            result=work.TrainResult(path=str(path), metrics={}),
            losses=[],
            seconds=1.0,
            message="saved",
        )


def test_a_job_ending_during_a_page_run_is_in_the_picker_when_reported(tmp_path):
    at = start("Train")
    at.session_state["train_job"] = SavesWhenAsked(tmp_path / "user_models", "late")
    at.run()
    assert not at.exception and not at.error
    assert "late (yours)" in at.success[0].value.replace("\\", "")
    assert "late (yours)" in at.selectbox(key="model").options  # as the message says


def test_training_refuses_a_bad_name_with_a_message():
    at = start("Train")
    at.text_input(key="train_name").set_value("../x")
    at.button(key="train_submit").click().run()
    assert not at.exception
    assert "may only hold letters" in at.error[0].value.replace("\\", "")


def test_a_user_model_that_disappears_falls_back_to_the_default(tmp_path):
    folder = tmp_path / "user_models"
    folder.mkdir()
    mine = folder / "mine.safetensors"
    mine.write_bytes((Path(APP).parent / "models" / "sort.safetensors").read_bytes())
    at = start()
    at.selectbox(key="model").set_value("yours:mine").run()
    assert not at.exception
    assert "1 1 2 3 4 5 6 9" in prediction_text(at)
    mine.unlink()
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="model").value == "bundled:reverse"
    assert at.text_input(key="sequence").value == get_task("reverse").examples[0]


def test_markup_in_an_error_is_escaped_for_markdown():
    at = start()
    at.text_input(key="sequence").set_value("<b>x</b>").run()
    assert "'\\<'" in at.error[0].value  # shown as typed, never as HTML or markdown


def test_attention_csv_and_web_page_downloads_are_offered():
    at = start()
    assert sorted(b.label for b in at.get("download_button")) == [
        "Download attention weights (CSV)",
        "Download this view as a web page",
    ]


def test_a_job_over_the_cap_waits_with_its_place_shown_and_can_be_cancelled(monkeypatch):
    monkeypatch.setenv("TFVIZ_MAX_JOBS", "1")
    first, second = start("Train"), start("Train")
    submit_training(first, "long_one", 20_000)
    submit_training(second, "waiting_one", 20)
    assert any("position 1 in the queue" in i.value for i in second.info)
    second.button(key="cancel_training").click().run()
    assert any("never started" in w.value for w in second.warning)
    first.button(key="cancel_training").click().run()
    end = time.monotonic() + 30
    while not first.warning:
        assert time.monotonic() < end, "the running job did not stop"
        time.sleep(0.1)
        first.run()
    assert "not saved" in first.warning[0].value


def test_a_bad_job_limit_setting_is_reported_not_raised(monkeypatch):
    monkeypatch.setenv("TFVIZ_MAX_JOBS", "lots")
    at = start("Train")
    assert "TFVIZ_MAX_JOBS must be an integer" in at.error[0].value.replace("\\", "")


def test_one_head_is_enlarged_on_choice():
    at = start()
    assert len(charts(at)) == 1  # only the grid until a head is asked for
    at.toggle(key="attn_enlarge").set_value(True).run()
    at.selectbox(key="attn_layer").set_value(1).run()
    at.selectbox(key="attn_head").set_value(2).run()
    assert not at.exception
    big = charts(at)[1]
    assert big["layout"]["title"]["text"] == "L1 H2"
    grid_weights = array(big["data"][0]["z"])
    assert grid_weights.shape[0] == len(at.text_input(key="sequence").value) + 1  # BOS + tokens
    np.testing.assert_allclose(grid_weights.sum(axis=1), 1.0, atol=1e-5)  # rows sum to 1


def test_a_refused_sequence_is_explained_in_the_page_s_language():
    at = start_app(lang="zh")
    at.text_input(key="sequence").set_value("abz").run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    # The reason in Chinese, with the place and what is allowed (the task's own alphabet).
    assert "第 3 个位置" in error and get_task("reverse").alphabet in error
    assert "not allowed" not in error
