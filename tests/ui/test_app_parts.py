"""The "Take W_o apart" view through AppTest: every section on a toy model and on MiniLM, the
sidebar's new W_o modes, the other W_o views in those modes, and hostile input to every new
control. Each test opens app.py on the view's tab (and a section), as a student's link would."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import start_with_state, wait_until
from tests.support import array, charts, en, plain
from tests.ui.test_app_lessons import page_text
from tfviz import get_task
from tfviz.core import dissect
from tfviz.hf import pretrained
from tfviz.ui.compute import accuracy_cache
from tfviz.ui.i18n import translate
from tfviz.ui.models import list_models

pytestmark = pytest.mark.usefixtures("fresh_app")
MINILM = f"pretrained:{pretrained.NAME}"


def open_parts(section: str = "modes", model: str = "bundled:reverse", **state) -> AppTest:
    """The "Take W_o apart" tab on a model and one of its sections."""
    return start_with_state(view=en("app.view.parts"), model=model, parts_section=section, **state)


def errors(at: AppTest) -> list[str]:
    return [plain(e.value) for e in at.error]


def texts_read(elements) -> list[str]:
    """The text of markdown-like elements (markdown, info, warning, success), as read."""
    return [plain(e.value) for e in elements]


def metric_values(at: AppTest) -> dict[str, float]:
    return {m.label: float(m.value) for m in at.main.metric}  # the sidebar has metrics too


def view_code(at: AppTest) -> str:
    """The view's own monospace block: the last in the main area (the prediction is first)."""
    return at.main.code[-1].value


def counts(tally: dict) -> list[int]:
    return [int(n) for n in array(tally["data"][0]["y"])]


# ---- 1. W_o modes ----------------------------------------------------------------------------


def test_modes_chart_has_every_mode_and_the_spectrum_beside_it():
    at = open_parts("modes")
    assert not errors(at)
    sweep, spectrum = charts(at)
    names = [trace.get("name", "") for trace in sweep["data"]]
    for mode in ("learned", "block-diagonal", "off (identity)", "zero", "rank-k W_o"):
        assert any(mode in name for name in names), (mode, names)
    learned = next(tr for tr in sweep["data"] if tr.get("name", "").startswith("learned"))
    zero = next(tr for tr in sweep["data"] if tr.get("name", "").startswith("zero"))
    assert learned["y"][0] > 0.9 > zero["y"][0]  # the bundled reverse model needs its W_o
    assert [tr["name"] for tr in spectrum["data"]] == ["L0", "L1"]
    # One layer only: the spectrum shows that layer, and the title says so.
    at.selectbox(key="parts_scope").set_value(1).run()
    sweep, spectrum = charts(at)
    assert "L1" in sweep["layout"]["title"]["text"]
    assert [tr["name"] for tr in spectrum["data"]] == ["L1"]


def test_the_other_scopes_are_measured_ahead_and_then_shown_from_the_cache():
    at = open_parts("modes")  # every layer: L0 and L1 are then measured in the background
    # The cache is the server's, shared with this test's process: reached by the model's digest.
    (entry,) = [e for e in list_models("cpu")[0] if e.key == "bundled:reverse"]
    shared = accuracy_cache(entry.digest, "reverse", None)
    ranks = dissect.rank_grid(64, extra=[16])  # reverse: D = 64, the k box starts at d_k = 16
    ahead = dissect.sweep_switches(64, 0, ranks) + dissect.sweep_switches(64, 1, ranks)
    wait_until(lambda: all(shared.known(iv) for iv in ahead), timeout=60)
    # What the page shows for L1 is what was measured ahead.
    at.selectbox(key="parts_scope").set_value(1).run()
    sweep, _ = charts(at)
    learned = next(tr for tr in sweep["data"] if tr.get("name", "").startswith("learned"))
    metric = get_task("reverse").metric
    assert learned["y"][0] == pytest.approx(shared(dissect.mode_switches("learned", 1))[metric])


def test_the_chosen_k_is_swept_and_marked():
    at = open_parts("modes")
    at.text_input(key="parts_k").set_value("11").run()
    assert not at.exception and not errors(at)
    sweep = charts(at)[0]
    assert [shape["x0"] for shape in sweep["layout"]["shapes"]] == [11]
    assert any(en("parts.modes.at_k", k=11, value="")[:-1] in m for m in texts_read(at.markdown))


@pytest.mark.parametrize("typed", ["0", "65", "-1", "2.5", "nan", "inf", "-inf", "abc", " ", "1e9"])
def test_a_bad_k_gets_a_clear_message_and_the_chart_stays(typed):
    at = open_parts("modes")
    at.text_input(key="parts_k").set_value(typed).run()
    assert not at.exception, at.exception
    assert any("k must be a whole number from 1 to 64" in e for e in errors(at)), errors(at)
    sweep = charts(at)[0]
    assert sweep["layout"].get("shapes", []) == []  # no k marked


# ---- 2. head permutation ---------------------------------------------------------------------


def test_permuting_w_o_alike_leaves_the_output_identical():
    at = open_parts("permutation", parts_order="2,0,3,1")
    assert not errors(at)
    values = metric_values(at)
    assert values[en("parts.perm.shuffled", layer=0)] > 1e-3
    assert values[en("parts.perm.matched", layer=0)] < 1e-6
    assert values[en("parts.perm.shuffled_out")] > 1e-3
    assert values[en("parts.perm.matched_out")] < 1e-5
    assert any("identical" in m for m in texts_read(at.markdown))
    table = view_code(at)
    assert en("parts.row.shuffled") in table and en("parts.row.matched") in table


def test_the_shuffle_button_writes_a_valid_order():
    at = open_parts("permutation")
    at.button(key="parts_shuffle").click().run()
    order = at.text_input(key="parts_order").value
    assert sorted(int(h) for h in order.split(",")) == [0, 1, 2, 3] and order != "0,1,2,3"
    assert not errors(at)


@pytest.mark.parametrize("typed", ["", "1,2", "0,0,1,2", "a,b,c,d", "0,1,2,9", "1;0;2;3", "½"])
def test_a_bad_order_gets_a_clear_message(typed):
    at = open_parts("permutation", parts_order=typed)
    assert not at.exception, at.exception
    assert errors(at) == [en("parts.perm.bad_order", last=3, example="3,2,1,0")]
    assert not at.main.metric


# ---- 3. pattern override -----------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["uniform", "identity", "previous", "anti_diagonal", "copy"])
def test_every_pattern_override_shows_prediction_and_the_heads_term(pattern):
    at = open_parts("pattern", parts_pattern=pattern, parts_pat_head=1)
    assert not errors(at)
    own, given, before, after = charts(at)
    assert "L0 H1" in own["layout"]["title"]["text"]
    assert en("parts.row.overridden") in view_code(at)
    if pattern != "copy":  # copy defaults to head 0, another head: also a change
        assert own["data"][0]["z"] != given["data"][0]["z"]
    assert before["data"][0]["z"] != after["data"][0]["z"]


def test_copying_a_head_onto_itself_says_nothing_changes():
    at = open_parts("pattern", parts_pattern="copy", parts_pat_head=2, parts_pat_source=2)
    assert texts_read(at.info) == [en("parts.pattern.same_head")]
    own, given, before, after = charts(at)
    assert own["data"][0]["z"] == given["data"][0]["z"]


# ---- 4. two inputs -----------------------------------------------------------------------------


def test_two_inputs_differing_in_one_token_are_compared_per_head():
    at = open_parts("diff")
    assert not errors(at)
    a = at.text_input(key="sequence").value
    b = at.text_input(key="parts_seq_b").value
    assert len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1
    attn, concat, out, terms = charts(at)
    assert "B minus A" in attn["layout"]["title"]["text"]
    assert len(terms["data"][0]["y"]) == 4  # one row per head
    assert any(en("parts.diff.where", n=1, tokens="")[:-1] in m for m in texts_read(at.markdown))


def type_b(at: AppTest, text: str) -> None:
    """Type sequence B (the box is looked up in the latest run's page, not an earlier one's)."""
    at.text_input(key="parts_seq_b").set_value(text).run()
    assert not at.exception, at.exception


def test_pairs_that_cannot_be_compared_get_a_clear_message():
    at = open_parts("diff")
    a = at.text_input(key="sequence").value
    type_b(at, a)  # the same sequence twice
    assert errors(at) == [en("parts.diff.same")]
    type_b(at, "abc")  # another length
    labels = get_task("reverse").labels
    assert errors(at) == [en("parts.diff.lengths", a=len(labels(a)), b=len(labels("abc")))]
    type_b(at, "abcdefgh!")  # not the task's alphabet: the task's own reason
    (error,) = errors(at)
    assert error.startswith(en("parts.diff.bad_b", why="")) and len(error) > 30
    type_b(at, "   ")
    assert texts_read(at.info) == [en("parts.diff.type_b")]
    assert not at.exception and not charts(at)


# ---- 5. predict, then reveal --------------------------------------------------------------------


def test_the_answer_stays_hidden_until_a_guess_is_committed_and_the_class_is_counted():
    at = open_parts("predict")
    assert not charts(at) and not at.success
    at.button(key="parts_commit").click().run()
    assert texts_read(at.warning) == [en("parts.predict.pick_first")]
    guess_key = "parts_guess_bundled:reverse|block_diagonal"
    at.radio(key=guess_key).set_value("no").run()
    at.button(key="parts_commit").click().run()
    assert not at.exception, at.exception
    # The bundled reverse model falls far with a block-diagonal W_o: "no" is wrong.
    assert texts_read(at.warning) == [en("parts.predict.wrong", guess="no", answer="yes")]
    (tally,) = charts(at)
    assert counts(tally) == [0, 1]  # yes, no
    assert "1 guesses" in tally["layout"]["title"]["text"]
    # Another student (another session of the same server) sees the class's count and guesses.
    other = open_parts("predict")
    other.radio(key=guess_key).set_value("yes").run()
    other.button(key="parts_commit").click().run()
    assert texts_read(other.success) == [en("parts.predict.right", guess="yes")]
    assert counts(charts(other)[0]) == [1, 1]
    assert "2 guesses" in charts(other)[0]["layout"]["title"]["text"]


def test_the_teachers_reset_asks_first_and_then_empties_the_tally():
    at = open_parts("predict")
    guess_key = "parts_guess_bundled:reverse|block_diagonal"
    at.radio(key=guess_key).set_value("yes").run()
    at.button(key="parts_commit").click().run()
    assert "1 guesses" in charts(at)[0]["layout"]["title"]["text"]
    assert "anyone" in at.button(key="parts_reset").help
    at.button(key="parts_reset").click().run()
    assert texts_read(at.warning) == [en("parts.predict.reset_confirm")]
    at.button(key="parts_reset_no").click().run()  # cancel: nothing forgotten
    assert "1 guesses" in charts(at)[0]["layout"]["title"]["text"]
    at.button(key="parts_reset").click().run()
    at.button(key="parts_reset_yes").click().run()
    assert not at.exception, at.exception
    assert texts_read(at.success) == [en("parts.predict.reset_done")]
    assert not charts(at)  # this session may guess again; the answer is hidden again
    at.radio(key=guess_key).set_value("yes").run()
    at.button(key="parts_commit").click().run()
    assert "1 guesses" in charts(at)[0]["layout"]["title"]["text"]


def test_the_rank_question_follows_k_and_waits_for_a_valid_one():
    at = open_parts("predict", parts_question="rank", parts_k="3")
    assert en(
        "parts.predict.q_toy", mode="rank 3 (truncated SVD)", what="token accuracy", drop="10"
    ) in [m.strip("*") for m in texts_read(at.markdown)]
    at.text_input(key="parts_k").set_value("nan").run()
    assert texts_read(at.info) == [en("parts.predict.need_k")]


# ---- MiniLM ------------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["modes", "permutation", "pattern", "predict"])
def test_every_section_runs_on_minilm(section):
    at = open_parts(section, MINILM, parts_order="11,10,9,8,7,6,5,4,3,2,1,0")
    assert not errors(at), errors(at)
    if section == "modes":
        sweep, spectrum = charts(at)
        assert en("parts.modes.similarity") in sweep["layout"]["title"]["text"]
        assert len(spectrum["data"]) == 6 and len(spectrum["data"][0]["x"]["bdata"]) > 0
    if section == "permutation":
        values = metric_values(at)
        assert values[en("parts.perm.matched_out")] < 1e-4
        assert values[en("parts.perm.shuffled_out")] > 1e-3
    if section == "pattern":
        assert len(charts(at)) == 4
        assert en("parts.pattern.sim_overridden") in metric_values(at)
    if section == "predict":
        at.radio(key=f"parts_guess_{MINILM}|block_diagonal").set_value("yes").run()
        at.button(key="parts_commit").click().run()
        assert not at.exception, at.exception
        assert any("paraphrase pair" in m for m in texts_read(at.markdown))
        assert at.success or at.warning


def test_two_sentences_on_minilm_need_the_same_number_of_word_pieces():
    at = open_parts("diff", MINILM)
    assert texts_read(at.info) == [en("parts.diff.type_b")]
    type_b(at, "A woman is playing a guitar.")
    assert not errors(at), errors(at)
    assert len(charts(at)) == 4
    type_b(at, "A man plays.")
    assert any("positions" in e for e in errors(at)), errors(at)
    type_b(at, "A man is playing a guitar.")
    assert errors(at) == [en("parts.diff.same")]


def test_minilm_refuses_a_k_above_its_384_directions():
    at = open_parts("modes", MINILM, parts_k="385")
    assert any("from 1 to 384" in e for e in errors(at))
    assert len(charts(at)) == 2


# ---- the sidebar's W_o modes -------------------------------------------------------------------


def switch_page():
    import streamlit as st

    from tfviz.ui.models import list_models, load_model
    from tfviz.ui.switches import controls

    entry = {e.key: e for e in list_models("cpu")[0]}["bundled:reverse"]
    model, meta, _ = load_model(entry.path, entry.digest, "cpu")
    iv = controls(meta.config).interventions
    st.code(repr(iv.w_o), language=None)


def test_the_sidebar_offers_block_diagonal_and_rank_k_with_its_k():
    at = AppTest.from_function(switch_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    radio = at.radio(key="w_o_mode")
    assert radio.options == [
        "learned",
        "off (identity)",
        "zero",
        "block-diagonal (no mixing across heads)",
        "rank k (truncated SVD)",
    ]
    assert not at.number_input  # k only for rank-k
    radio.set_value("block_diagonal").run()
    assert view_code(at) == "'block_diagonal'"
    at.radio(key="w_o_mode").set_value("rank").run()
    assert view_code(at) == "'rank:16'"  # d_k by default
    at.number_input(key="w_o_rank").set_value(5).run()
    assert view_code(at) == "'rank:5'"
    at.selectbox(key="w_o_scope").set_value(1).run()
    assert view_code(at) == "((1, 'rank:5'),)"


@pytest.mark.parametrize("k", [384, 0, -3, float("nan"), float("inf"), "12"])
def test_a_stale_or_hostile_k_is_forgotten(k):
    at = AppTest.from_function(switch_page, default_timeout=60)
    at.session_state["w_o_mode"] = "rank"
    at.session_state["w_o_rank"] = k  # e.g. MiniLM's width, then a 64-wide model
    at.run()
    assert not at.exception, at.exception
    assert view_code(at) == "'rank:16'"


# ---- the other W_o views under the new modes ---------------------------------------------------


@pytest.mark.parametrize("mode, k", [("block_diagonal", None), ("rank", 3)])
def test_the_w_o_views_work_in_the_new_modes(mode, k):
    state = {"w_o_mode": mode} | ({"w_o_rank": k} if k else {})
    label = "block-diagonal (no mixing across heads)" if k is None else "rank 3 (truncated SVD)"
    # Before/after W_o: the map shown is the one applied, and the per-head terms still add up.
    at = start_with_state(view=en("app.view.w_o"), **state)
    assert texts_read(at.info) == [en("w_o.switched", mode=label)]
    w_o = next(
        f for f in charts(at) if f["layout"]["title"]["text"] == en("w_o.matrix_title", layer=0)
    )
    W = array(w_o["data"][0]["z"]).reshape(64, 64)
    if k is None:  # head h's output slice reads head h's input slice only
        mask = np.kron(np.eye(4), np.ones((16, 16)))
        assert np.abs(W * (1 - mask)).max() == 0 and np.abs(W * mask).max() > 0
    else:
        assert np.linalg.matrix_rank(W.astype(np.float64), tol=1e-4) == 3
    (check,) = [float(m.value) for m in at.metric if m.label == en("w_o.check_label")]
    assert check < 1e-4
    # W_o off: compare sets the switched model beside the learned one, naming the mode.
    at = start_with_state(view=en("app.view.w_o_off"), **state)
    assert not errors(at)
    assert any(label in c for c in texts_read(at.caption))
    assert len(charts(at)) >= 3  # later attention (learned, switched), residual stream, drift
    # Attention: drawn whatever the mode (a switch acts after the attention it is in).
    at = start_with_state(view=en("app.view.attention"), **state)
    assert not errors(at) and len(charts(at)) == 1  # the grid's column of heads


@pytest.mark.parametrize("model", ["bundled:reverse", MINILM])
def test_every_section_in_chinese_has_no_missing_key(model):
    for section in ("modes", "permutation", "pattern", "diff", "predict"):
        at = open_parts(section, model, lang="zh", parts_seq_b="A woman is playing a guitar.")
        text = page_text(at)
        assert "⟦" not in text, f"{section}: a key is missing from the zh catalogue"
        assert translate("zh", f"parts.section.{section}") in text
        assert "Take W_o apart" not in text and "under each W_o mode" not in text
