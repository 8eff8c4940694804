"""tfviz.lessons: the numbers behind each lesson step, checked against hand-worked
values."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from tests.conftest import MODELS, make_model
from tfviz import get_task, load_checkpoint, plots
from tfviz import lessons as L
from tfviz.analysis import induction
from tfviz.core.trace import run_trace
from tfviz.serve import jobs
from tfviz.training.recipes import RECIPES
from tfviz.training.train import train

# The matrix exactly as seed 000 prints it, read as its formula reads it: output[i] =
# sum_j concat[j] · W[j, i], attn_out = concat · W_o (column i gives output feature i).
ARTICLE_PRINTED_W = [
    [0.8, 0.1, 0.0, 0.5],
    [0.2, 0.9, 0.5, 0.0],
    [0.0, 0.1, 1.0, 0.2],
    [0.5, 0.0, 0.2, 0.8],
]


# ---- step 1: the 2-head example -------------------------------------------------------------


def test_the_article_example_gives_1_8_for_output_feature_0_drawing_on_both_heads():
    ex = L.two_head_example()  # head outputs [1, 0] and [0, 2], the lessons' W_o
    np.testing.assert_array_equal(ex.concat, [1.0, 0.0, 0.0, 2.0])
    assert ex.output[0] == pytest.approx(1.8)
    # By hand: head 0 gives 1.0 * 0.8 and head 1 gives 2.0 * 0.5 to feature 0.
    np.testing.assert_allclose(ex.contributions[:, 0], [0.8, 1.0])
    # Every column by hand, concat · W_o: concat[0] * W_o[0, d] + concat[3] * W_o[3, d].
    np.testing.assert_allclose(ex.output, [1.8, 0.1 + 0.6, 0.4 + 0.4, 0.5 + 1.6])
    np.testing.assert_allclose(ex.contributions.sum(axis=0), ex.output)  # the terms add up
    np.testing.assert_array_equal(ex.heads_drawn_on, [2, 2, 2, 2])


def test_the_article_s_own_w_gives_1_8_but_leaves_some_outputs_to_one_head():
    """Why the lesson's W_o differs from the printed one in two entries (stated in the lesson),
    and that by its formula the article's feature 1 is 0.1 (its worked 0.2 reads rows)."""
    ex = L.two_head_example(L.ARTICLE_Z0, L.ARTICLE_Z1, ARTICLE_PRINTED_W)
    assert ex.output[0] == pytest.approx(1.8) and ex.output[1] == pytest.approx(0.1)
    np.testing.assert_array_equal(ex.heads_drawn_on, [2, 1, 1, 2])
    changed = np.argwhere(np.array(ARTICLE_PRINTED_W) != np.array(L.ARTICLE_W_O)).tolist()
    assert changed == [[0, 2], [3, 1]]
    # Row by row (nn.Linear's layout read as the article's arithmetic does) gives 0.2 instead.
    assert (np.array(ARTICLE_PRINTED_W) @ ex.concat)[1] == pytest.approx(0.2)


def test_without_w_o_each_output_dimension_depends_on_its_own_head_only():
    ex = L.two_head_example()
    np.testing.assert_array_equal(ex.output_identity, ex.concat)
    # |contribution| with the identity: head 0 owns dims 0-1, head 1 dims 2-3 (a block map).
    np.testing.assert_array_equal(ex.dependency_identity, [[1, 0], [0, 0], [0, 0], [0, 2]])
    np.testing.assert_array_equal(ex.heads_drawn_on_identity, [1, 0, 0, 1])
    np.testing.assert_array_equal(ex.reach_identity, [[1, 0], [1, 0], [0, 1], [0, 1]])
    assert (ex.reach > 0).all()  # the lessons' W reaches every output from every head
    # Any head outputs at all: still one head per output dimension, the owner.
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 2))  # 3 heads, d_k = 2
    many = L.head_example(z, np.eye(6))
    owner = np.arange(6) // 2
    for d in range(6):
        others = np.delete(many.dependency_identity[d], owner[d])
        assert (others == 0).all() and many.dependency_identity[d, owner[d]] > 0


@pytest.mark.parametrize(
    "z0, z1, W, code, field, index",
    [
        ([1.0, float("nan")], [0.0, 2.0], L.ARTICLE_W_O, "not_finite", "z0", (1,)),
        ([1.0, 0.0], [0.0, 2.0, 3.0], L.ARTICLE_W_O, "shape", "z1", ()),
        ([1.0, 0.0], [0.0, 2.0], np.eye(3), "shape", "W_o", ()),
        (
            [1.0, 0.0],
            [0.0, 2.0],
            [[0, 0, 0, 0]] * 3 + [[0, 0, float("inf"), 0]],
            "not_finite",
            "W_o",
            (3, 2),
        ),
        ([1e7, 0.0], [0.0, 2.0], L.ARTICLE_W_O, "too_large", "z0", (0,)),
        (["one", 0.0], [0.0, 2.0], L.ARTICLE_W_O, "not_finite", "z0", ()),
        ([], [], np.zeros((0, 0)), "shape", "z0", ()),
    ],
)
def test_bad_example_inputs_are_refused_saying_where(z0, z1, W, code, field, index):
    with pytest.raises(L.LessonInputError) as info:
        L.two_head_example(z0, z1, W)
    assert (info.value.code, info.value.field, info.value.index) == (code, field, index)
    assert isinstance(info.value, ValueError) and str(info.value)


def test_weight_dependency_is_the_norm_of_each_head_s_block_of_a_row():
    W = np.zeros((4, 4))
    W[0, :2] = [3.0, 4.0]  # output 0 reads head 0 with weights of norm 5
    W[1, 2:] = [6.0, 8.0]  # output 1 reads head 1 with norm 10
    W[2] = [1.0, 0.0, 0.0, 2.0]
    np.testing.assert_allclose(
        L.weight_dependency(W, 2), [[5, 0], [0, 10], [1, 2], [0, 0]], atol=1e-12
    )
    np.testing.assert_array_equal(L.heads_drawn_on(L.weight_dependency(W, 2)), [1, 1, 2, 0])
    np.testing.assert_array_equal(
        L.weight_dependency(np.eye(4), 2), [[1, 0], [1, 0], [0, 1], [0, 1]]
    )


def test_model_dependency_reads_the_layer_s_learned_w_o():
    model = make_model()  # D=16, 4 heads, 2 layers
    W = model.layers[1].attn.W_o.weight.detach().numpy().astype(np.float64)
    dep = L.model_dependency(model, 1)
    assert dep.shape == (16, 4)
    np.testing.assert_allclose(dep[5, 2], np.linalg.norm(W[5, 8:12]), rtol=1e-6)
    for bad in (2, -1, 1.0, True):
        with pytest.raises(ValueError, match="layer"):
            L.model_dependency(model, bad)


def test_heads_drawn_on_counts_heads_above_a_share_of_the_row_s_largest():
    dep = np.array([[1.0, 0.04, 0.06], [0.0, 0.0, 0.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(L.heads_drawn_on(dep), [2, 0, 2])


# ---- step 2: one big projection = H per-head projections ---------------------------------


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_one_big_projection_equals_the_per_head_ones_on_a_live_model(norm, ids):
    model = make_model(norm=norm)
    check = L.projection_equivalence(model, 1, ids)
    assert check.shape == (3, 4, 7, 4)  # (B, H, T, d_k)
    assert set(check.max_diff) == {"q", "k", "v"}
    for diff in check.max_diff.values():
        assert 0.0 <= diff < 1e-5  # float rounding only (about 1e-7)
    # Head 0's query at the first token, by hand: rows 0..d_k-1 of W_q applied to the input.
    block = model.layers[1]
    x = model(ids).trace.layers[1].resid_pre[0, 0]
    if norm == "pre":
        x = block.norm1(x)
    W, b = block.attn.W_q.weight[:4], block.attn.W_q.bias[:4]
    by_hand = (W @ x + b).detach().double().numpy()
    np.testing.assert_allclose(check.big_first, by_hand, atol=1e-5)
    np.testing.assert_allclose(check.separate_first, by_hand, atol=1e-5)


def test_projection_equivalence_on_the_bundled_seed_model_is_about_1e_7():
    model, _ = load_checkpoint(MODELS / "sum_seed.safetensors")
    ids, pad = get_task("sum").encode_batch(["31415926"])
    check = L.projection_equivalence(model, 0, ids, pad)
    assert check.shape == (1, 4, 8, 8)
    assert max(check.max_diff.values()) < 1e-5
    with pytest.raises(ValueError, match="2-d"):
        L.projection_equivalence(model, 0, ids[0])


def test_a_projection_check_is_exact_only_when_every_difference_is_zero():
    model, _ = load_checkpoint(MODELS / "sum_seed.safetensors")
    ids, pad = get_task("sum").encode_batch(["31415926"])
    check = L.projection_equivalence(model, 0, ids, pad)
    assert check.exact == all(d == 0.0 for d in check.max_diff.values())
    rounded = dataclasses.replace(check, max_diff={"q": 0.0, "k": 1.2e-7, "v": 0.0})
    assert not rounded.exact
    assert dataclasses.replace(check, max_diff={"q": 0.0, "k": 0.0, "v": 0.0}).exact


# ---- step 3: the recipe as a job -------------------------------------------------------------


def test_recipe_work_trains_the_recipe_exactly_through_the_job_manager():
    manager = jobs.JobManager(max_jobs=1, max_queue=0)
    job = manager.submit(L.RecipeWork(L.RecipeSpec(steps=3), device="cpu"))
    assert job.wait(120)
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    assert snap.total == 3 and snap.done == 3 and len(snap.losses) == 3
    result = snap.result
    cfg = result.model.config
    sizes = RECIPES["sum_seed"]["sizes"]
    assert (cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff) == (32, 4, 2, 64)
    assert (cfg.embed, cfg.dropout, cfg.max_len) == (sizes["embed"], 0.1, 16)
    assert result.history["schedule"] == "constant" and result.history["lr"] == 1e-3
    assert (result.history["min_len"], result.history["max_len"]) == (8, 8)
    assert result.metrics["min_len"] == result.metrics["max_len"] == 8 and result.metrics["mae"] > 0
    # The same recipe trained directly gives the same weights: nothing was left out on the way.
    task = get_task("sum")
    recipe = RECIPES["sum_seed"]
    keys = ("batch_size", "lr", "seed", "min_len", "max_len", "schedule")
    direct, _ = train(
        task,
        task.model_config(**recipe["sizes"]),
        steps=3,
        device="cpu",
        **{k: recipe[k] for k in keys},
    )
    for (name, a), (_, b) in zip(
        result.model.state_dict().items(), direct.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_recipe_spec_refuses_bad_settings_before_anything_runs():
    manager = jobs.JobManager(max_jobs=1, max_queue=0)
    for spec, match in (
        (L.RecipeSpec(steps=0), "(?i)steps must be a whole number"),
        (L.RecipeSpec(steps=2.5), "(?i)steps must be a whole number"),
        (L.RecipeSpec(steps=True), "(?i)steps must be a whole number"),
        (L.RecipeSpec(recipe="nope"), "unknown recipe"),
    ):
        with pytest.raises(ValueError, match=match):
            manager.submit(L.RecipeWork(spec))
    assert manager.counts() == (0, 0)
    assert L.RecipeWork(L.RecipeSpec()).total == 500  # the recipe's own steps by default


def test_recipe_work_stops_when_asked():
    work = L.RecipeWork(L.RecipeSpec(steps=50), device="cpu")
    work.validate(set())
    with pytest.raises(jobs.Stopped, match="after 1 steps"):
        work.run(lambda **_: None, lambda: True)
    assert work.result is None


def test_predict_gives_the_model_s_sum_and_the_right_one():
    model, _ = load_checkpoint(MODELS / "sum_seed.safetensors")
    task = get_task("sum")
    predicted, right = L.predict(model, task, "31415926")
    assert right == "31" and predicted.isdigit()
    assert abs(int(predicted) - 31) <= 3  # the bundled model's MAE at length 8 is about 1.4
    with pytest.raises(ValueError, match="not allowed"):
        L.predict(model, task, "12a")


# ---- step 4: W_o switched off ------------------------------------------------------------------


def test_w_o_switch_changes_the_answer_of_the_bundled_reverse_model():
    model, _ = load_checkpoint(MODELS / "reverse.safetensors")
    task = get_task("reverse")
    off = L.w_o_switch(model, task, "abcdefgh", "identity")
    assert off.learned == off.answer == "hgfedcba"
    assert off.switched != off.learned
    assert off.tokens_changed == sum(a != b for a, b in zip(off.learned, off.switched, strict=True))
    assert off.max_change > 0.1
    same = L.w_o_switch(model, task, "abcdefgh", "learned")  # the control: nothing switched
    assert same.switched == same.learned and same.tokens_changed == 0 and same.max_change == 0.0
    one = L.w_o_switch(model, task, "abcdefgh", "zero", layer=1)
    assert one.answer == "hgfedcba"
    with pytest.raises(ValueError, match="layer"):
        L.w_o_switch(model, task, "abcdefgh", "identity", layer=5)


# ---- the dependency map figure -----------------------------------------------------------------


def test_dependency_map_draws_the_matrix_with_given_labels_and_refuses_bad_values():
    dep = L.two_head_example().dependency  # (4, 2)
    fig = plots.dependency_map(dep, title="<b>t</b>", head_label="头", output_label="out")
    spec = json.loads(fig.to_json())
    trace = spec["data"][0]
    assert trace["x"] == ["H0", "H1"] and trace["y"] == ["0", "1", "2", "3"]
    assert trace["texttemplate"]  # 8 cells: the numbers are written in
    z = trace["z"]
    if isinstance(z, dict):  # plotly's typed-array encoding
        import base64

        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(4, 2)
    np.testing.assert_allclose(np.asarray(z, dtype=np.float64), dep, rtol=1e-6)
    assert [a["text"] for a in spec["layout"]["annotations"]] == ["&lt;b&gt;t&lt;/b&gt;"]
    assert spec["layout"]["xaxis"]["title"]["text"] == "头"
    assert spec["layout"]["coloraxis"]["cmax"] == pytest.approx(1.6)
    big = plots.dependency_map(np.ones((64, 4)))
    assert "texttemplate" not in json.loads(big.to_json())["data"][0]
    for bad in (-dep, dep * np.nan, np.ones(3)):
        with pytest.raises(ValueError):
            plots.dependency_map(bad)


def test_dependency_pair_puts_both_maps_in_one_figure_on_one_scale():
    ex = L.two_head_example()
    fig = plots.dependency_pair(
        ex.dependency_identity, ex.dependency, titles=("<i>without</i>", "with"), head_label="头"
    )
    spec = json.loads(fig.to_json())
    left, right = spec["data"]
    assert (left.get("xaxis", "x"), right["xaxis"], right["yaxis"]) == ("x", "x2", "y2")
    assert spec["layout"]["xaxis"]["domain"][1] < spec["layout"]["xaxis2"]["domain"][0]
    top = max(ex.dependency_identity.max(), ex.dependency.max())
    assert spec["layout"]["coloraxis"]["cmax"] == pytest.approx(top, rel=1e-6)
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert titles == ["&lt;i&gt;without&lt;/i&gt;", "with"]
    assert spec["layout"]["xaxis2"]["title"]["text"] == "头"
    with pytest.raises(ValueError, match="differ in shape"):
        plots.dependency_pair(np.ones((4, 2)), np.ones((2, 4)))


def test_panel_titles_are_wrapped_to_a_phone_panel_and_sit_above_the_head_axis_title():
    """The lesson's two titles once ran into each other and into the "head" axis title: each is
    now cut into lines of a panel's width on a phone, placed above the head names and axis
    title, with the top margin grown to hold its lines (tests/browser/test_browser_layout.py
    measures
    the drawn result)."""
    ex = L.two_head_example()
    long = ("Without W_o: |contribution| of each head", "无 W_o：每个头的 |贡献|，以及更多说明")
    fig = plots.dependency_pair(ex.dependency_identity, ex.dependency, titles=long)
    layout = json.loads(fig.to_json())["layout"]
    lines = [a["text"].split("<br>") for a in layout["annotations"]]
    assert lines[0] == ["Without W_o:", "|contribution| of", "each head"]
    units = [sum(2 if ord(c) > 0x2E80 else 1 for c in line) for line in lines[1]]
    assert len(lines[1]) > 1 and max(units) <= plots.DEP_TITLE_UNITS, lines[1]
    axis_band = plots.DEP_TICKS_PX + plots.DEP_AXIS_TITLE_PX
    for annotation in layout["annotations"]:
        assert annotation["yanchor"] == "bottom" and annotation["yshift"] > axis_band
    title_band = layout["margin"]["t"] - axis_band
    assert title_band >= plots.DEP_TITLE_LINE_PX * max(len(x) for x in lines)
    assert layout["xaxis"]["domain"][1] <= 0.45 and layout["xaxis2"]["domain"][0] >= 0.55
    assert layout["coloraxis"]["colorbar"]["orientation"] == "h"  # no width taken from the maps


def test_attention_is_computed_from_the_input_so_two_inputs_attend_differently():
    """Seed 002's point, on the bundled sum_seed model: [9]*8 against [0..7]."""
    model, meta = load_checkpoint(MODELS / "sum_seed.safetensors")
    task = get_task(meta.task)
    pair = L.attention_pair(model, task, "99999999", "01234567")
    L_, H = model.config.n_layers, model.config.n_heads
    assert [a.shape[:2] for a in pair.attn] == [(L_, H), (L_, H)]
    for a in pair.attn:  # attention weights: each query's row sums to 1
        np.testing.assert_allclose(a.sum(axis=-1), 1.0, atol=1e-5)
    assert pair.max_diff.shape == (L_,) and (pair.max_diff > 1e-3).all()
    by_hand = np.abs(pair.attn[0][1] - pair.attn[1][1]).max()
    assert pair.max_diff[1] == pytest.approx(by_hand)
    same = L.attention_pair(model, task, "31415926", "31415926")
    np.testing.assert_array_equal(same.max_diff, 0.0)  # the same input: the same routing
    with pytest.raises(ValueError, match="same length"):
        L.attention_pair(model, task, "123", "1234")


# ---- steps 5-8: the bundled character language model (a decoder) ------------------------------

LESSON_LM = MODELS / "language" / "shakespeare-2l-attn"  # the lessons' decoder (its folder)


@pytest.fixture(scope="module")
def lm():
    """(model, task) of the bundled decoder the lessons read. Its weights may be replaced by a
    better-trained model of the same shape: nothing here depends on them."""
    from tfviz import hf

    loaded = hf.open_folder(str(LESSON_LM), device="cpu")
    return loaded.model, hf.NextTokenTask(loaded.tokenizer)


@pytest.fixture(scope="module")
def probe_ids(lm):
    """tfviz's probe in the model's letters (as tfviz.ui.induction.probe_token_ids draws it)."""
    model, task = lm
    alphabet = task.tokenizer.alphabet
    letters = sorted(alphabet[c] for c in induction.LETTERS if c in alphabet)
    return induction.probe(letters, model.config.max_len)


def causal_attention(T: int) -> np.ndarray:
    """Even attention of a causal head: query t gives 1 / (t + 1) to each key 0..t."""
    return np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]


def test_causal_rows_sum_to_one_over_the_allowed_keys_and_nothing_falls_after_a_query(lm):
    model, task = lm
    trace = run_trace(model, task, "To be, or not to be, that is the question")
    rows = L.causal_rows(trace.attn)
    a = np.asarray(trace.attn, dtype=np.float64)  # (L, H, T, T)
    T = a.shape[-1]
    by_hand = max(abs(a[lay, h, t, : t + 1].sum() - 1) for lay, h, t in np.ndindex(a.shape[:3]))
    assert rows.row_error == pytest.approx(by_hand, abs=1e-12) and rows.row_error < 1e-5
    assert rows.above == 0.0  # masked: not a small learned weight, none at all
    assert (rows.masked, rows.allowed) == (T * (T - 1) // 2, T * (T + 1) // 2)
    # The drawn map: the masked cells are blank (NaN), the others the weights themselves.
    shown = trace.shown(trace.attn[0, 0])
    assert np.isnan(shown[np.triu_indices(T, 1)]).all()
    assert not np.isnan(shown[np.tril_indices(T)]).any()
    # An encoder's full rows: weight after the query, and rows that are not whole over k <= t.
    full = np.full((2, 3, 5, 5), 0.2)
    encoder = L.causal_rows(full)
    assert encoder.above == pytest.approx(0.2) and encoder.row_error == pytest.approx(0.8)
    assert L.causal_rows(causal_attention(6)).row_error < 1e-12
    for bad in (np.ones((2, 3)), np.full((3, 3), np.nan)):
        with pytest.raises(ValueError):
            L.causal_rows(bad)


def test_even_score_is_the_score_of_a_head_that_spreads_its_weight_evenly():
    T, n = 12, 6
    even = causal_attention(T)[None, None]  # (1, 1, T, T)
    prev = induction.previous_token_score(even)[0, 0]
    ind = induction.induction_score(even, period=n)[0, 0]
    assert induction.even_score(T, 1) == pytest.approx(prev, rel=1e-6)
    assert induction.even_score(T, n) == pytest.approx(ind, rel=1e-6)
    assert induction.even_score(T, 1) == pytest.approx(np.mean([1 / (t + 1) for t in range(1, T)]))
    with pytest.raises(ValueError):
        induction.even_score(T, T)


def test_a_head_is_called_formed_only_from_its_score():
    assert induction.head_verdict(induction.HEAD_FORMED, 0.01) == "formed"
    assert induction.head_verdict(0.29, 0.01) == "weak"  # well above even attention, far from all
    assert induction.head_verdict(0.02, 0.01) == "none"  # twice even attention: nothing formed
    assert induction.head_verdict(0.0002, 0.0054) == "none"
    assert L.head_kept(0.6, 0.31) and not L.head_kept(0.6, 0.29)


def test_the_previous_token_head_is_the_argmax_of_the_score_on_the_probe(lm, probe_ids):
    model, _ = lm
    scores = induction.measure_induction(model, probe_ids)
    layer, head, score = L.previous_token_head(scores)
    # Independently: every head's attention on the probe, scored by previous_token_score.
    with torch.no_grad():
        out = model(probe_ids, None, trace=True)
    attn = torch.stack([lt.attn for lt in out.trace.layers], dim=1)  # (N, L, H, T, T)
    prev = induction.previous_token_score(attn)  # (L, H)
    assert (layer, head) == np.unravel_index(int(np.argmax(prev)), prev.shape)
    assert score == pytest.approx(float(prev.max()), abs=1e-5)
    # On a hand-made score table, the first of a tie, layer-major.
    tie = dataclasses.replace(scores, previous_token=np.array([[0.1, 0.7], [0.7, 0.2]]))
    assert L.previous_token_head(tie) == (0, 1, pytest.approx(0.7))


def test_previous_token_line_measures_one_head_on_a_typed_line(lm):
    T = 6
    exact = np.eye(T, k=-1)
    exact[0, 0] = 1.0  # the first character can read only itself
    line = L.previous_token_line(exact)
    assert (line.score, line.hits, line.queries) == (1.0, T - 1, T - 1)
    assert line.even == pytest.approx(induction.even_score(T, 1))
    assert L.previous_token_line(np.eye(T)).hits == 0  # each character on itself
    model, task = lm
    trace = run_trace(model, task, "To be, or not to be")
    drawn = trace.shown(trace.attn[0, 2])  # NaN above the diagonal: read as masked
    line = L.previous_token_line(drawn)
    a = np.asarray(trace.attn[0, 2], dtype=np.float64)
    T = a.shape[0]
    assert line.score == pytest.approx(np.mean([a[t, t - 1] for t in range(1, T)]), abs=1e-6)
    assert line.hits == sum(int(np.argmax(a[t, : t + 1]) == t - 1) for t in range(1, T))
    with pytest.raises(ValueError):
        L.previous_token_line(np.ones((1, 1)))


def test_a_sentence_typed_twice_is_scored_on_each_copy_from_the_model_s_logits(lm):
    model, task = lm
    rep = L.repeated_sentence(model, task, "The king is dead.")
    assert rep.text == "The king is dead. The king is dead. " and rep.period == 18
    # Independently: the logits of the text, the loss and the likeliest character at each
    # position t for character t + 1; the first copy's characters 1..n-1, the repeat's n+1..2n-1.
    ids = torch.tensor([[task.tokenizer.alphabet[c] for c in rep.text]])
    with torch.no_grad():
        logits = model(ids, None, trace=False).logits[0].double()  # (T, V)
    target = ids[0, 1:]
    loss = torch.nn.functional.cross_entropy(logits[:-1], target, reduction="none").numpy()
    right = (logits[:-1].argmax(-1) == target).numpy()
    n = rep.period
    assert rep.scores.loss_first == pytest.approx(loss[: n - 1].mean(), abs=1e-4)
    assert rep.scores.loss_repeat == pytest.approx(loss[n:].mean(), abs=1e-4)
    assert rep.acc_first == pytest.approx(right[: n - 1].mean())
    assert rep.acc_repeat == pytest.approx(right[n:].mean())
    assert rep.scores.in_context_drop == pytest.approx(
        loss[: n - 1].mean() - loss[n:].mean(), abs=2e-4
    )
    # Its attention is the traced text's, and the scores are measure_induction's on it.
    assert rep.trace.attn.shape[-1] == len(rep.trace.labels) == 2 * n
    np.testing.assert_allclose(
        rep.scores.induction, induction.induction_score(rep.trace.attn, n), atol=1e-5
    )


def test_a_sentence_the_model_cannot_read_is_refused_by_name(lm):
    from tfviz.core.tasks import InputError

    model, task = lm
    with pytest.raises(InputError) as info:
        L.repeated_sentence(model, task, "生存还是毁灭")
    assert info.value.code == "outside_alphabet" and "U+751F" in info.value.values["chars"]
    with pytest.raises(ValueError, match="at least"):
        L.repeated_sentence(model, task, "a")
    too_long = "a" * model.config.max_len
    with pytest.raises(ValueError, match="reads"):
        L.repeated_sentence(model, task, too_long)


def test_random_letters_are_drawn_as_the_probe_draws_them(lm):
    _, task = lm
    tok = task.tokenizer
    ids = sorted(tok.alphabet[c] for c in induction.LETTERS if c in tok.alphabet)
    letters = L.random_letters(tok, ids)
    assert len(letters) == L.RANDOM_LETTERS and set(letters) <= set(induction.LETTERS)
    row = induction.repeated_random_tokens(
        1, L.RANDOM_LETTERS, ids, np.random.default_rng(induction.PROBE_SEED)
    )[0, : L.RANDOM_LETTERS]
    assert [tok.alphabet[c] for c in letters] == row.tolist()
    assert L.random_letters(tok, ids) == letters  # the same every time
