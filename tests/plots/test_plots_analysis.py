"""tfviz.plots, analysis figures: they hold the arrays given, check shapes and escape text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.plots.test_plots import block
from tfviz import plots

LABELS = ["BOS", "a·1", "b·2", "c·3"]
MARKUP = ["<b>x</b>", "&amp;", "a"]


def rows_summing_to_one(shape, seed=0) -> np.ndarray:
    w = np.random.default_rng(seed).random(shape)
    return w / w.sum(-1, keepdims=True)


# ---- norm-based attention --------------------------------------------------------------------


def test_norm_attention_grid_has_every_head_and_the_layer_total():
    rng = np.random.default_rng(0)
    norms, summed = rng.random((3, 4, 4)) * 5, rng.random((4, 4)) * 7
    fig = plots.norm_attention_grid(norms, summed, LABELS, layer=1, title="L1")
    assert fig.data[0].type == "heatmap"
    assert fig.data[0].hovertemplate.startswith("%{y}<br>%{x}<br>norm")
    assert fig.data[0].y[0] == "layer L1<br>query BOS"
    for h in range(3):
        np.testing.assert_allclose(block(fig, "L1", f"H{h}"), norms[h], rtol=1e-6)
    np.testing.assert_allclose(block(fig, "L1", "all heads"), summed, rtol=1e-6)
    assert plots.block_titles(fig) == ["L1 H0", "L1 H1", "L1 H2", "L1 all heads"]
    # Norms are lengths with no fixed top: the scale runs 0..largest, shared by every block.
    axis = fig.layout.coloraxis
    assert axis.cmin == 0 and axis.cmax == pytest.approx(max(norms.max(), summed.max()))
    assert "norm %{z" in fig.data[0].hovertemplate
    assert json.loads(fig.to_json())["data"][0]["z"]["dtype"] == "f4"


def test_norm_attention_grid_all_zero_still_draws_and_refuses_bad_input():
    fig = plots.norm_attention_grid(np.zeros((2, 4, 4)), np.zeros((4, 4)), LABELS, layer=0)
    assert fig.layout.coloraxis.cmax == 1.0  # W_o zeroed: every norm is 0
    with pytest.raises(ValueError, match="per-head norm-based attention must be 3-d"):
        plots.norm_attention_grid(np.zeros((4, 4)), np.zeros((4, 4)), LABELS, layer=0)
    with pytest.raises(ValueError, match="has 5 columns but 4 tokens"):
        plots.norm_attention_grid(np.zeros((2, 4, 5)), np.zeros((4, 4)), LABELS, layer=0)
    with pytest.raises(ValueError, match="summed norm-based attention has 3 rows"):
        plots.norm_attention_grid(np.zeros((2, 4, 4)), np.zeros((3, 4)), LABELS, layer=0)
    with pytest.raises(ValueError, match="non-negative"):
        plots.norm_attention_grid(-np.ones((2, 4, 4)), np.zeros((4, 4)), LABELS, layer=0)


# ---- rollout -----------------------------------------------------------------------------------


def test_rollout_grid_puts_layers_on_rows_and_methods_on_columns():
    raw, norm = rows_summing_to_one((2, 4, 4), 1), rows_summing_to_one((2, 4, 4), 2)
    fig = plots.rollout_grid(raw, norm, LABELS)
    assert fig.data[0].hovertemplate.startswith("token %{y}<br>input %{x}")
    np.testing.assert_allclose(block(fig, "after L0", "from raw attention"), raw[0], 1e-6)
    np.testing.assert_allclose(block(fig, "after L1", "from norm-based"), norm[1], 1e-6)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    with pytest.raises(ValueError, match="differ in shape"):
        plots.rollout_grid(raw, norm[:1], LABELS)
    with pytest.raises(ValueError, match="raw rollout must be 3-d"):
        plots.rollout_grid(raw[0], norm, LABELS)
    with pytest.raises(ValueError, match="4 rows but 3 tokens"):
        plots.rollout_grid(raw, norm, LABELS[:3])


def test_rollout_grid_escapes_tokens_and_column_names():
    w = np.full((1, 3, 3), 1 / 3)
    fig = plots.rollout_grid(w, w, MARKUP, names=("<i>raw</i>", "norm"))
    assert list(fig.layout.xaxis.ticktext)[0] == "&lt;b&gt;x&lt;/b&gt;"
    assert plots.block_titles(fig)[0] == "after L0 &lt;i&gt;raw&lt;/i&gt;"
    assert "<b>" not in fig.to_json() and "<i>" not in fig.to_json()


# ---- head importance ---------------------------------------------------------------------------


def test_head_score_map_writes_each_head_and_centres_signed_scores():
    scores = np.array([[0.5, -0.25, 0.0], [1.5, 0.1, -2.0]])
    fig = plots.head_score_map(scores, title="loss change", value="<loss>")
    np.testing.assert_allclose(fig.data[0].z, scores, rtol=1e-6)
    assert list(fig.data[0].x) == ["H0", "H1", "H2"] and list(fig.data[0].y) == ["L0", "L1"]
    assert fig.data[0].texttemplate  # the numbers are written in the cells
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax == -2.0
    assert "&lt;loss&gt;" in fig.data[0].hovertemplate and "<loss>" not in fig.to_json()
    with pytest.raises(ValueError, match="head scores must be 2-d"):
        plots.head_score_map(np.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        plots.head_score_map(np.array([[np.nan]]))


def test_keep_top_k_plot_marks_the_chosen_k():
    curve = np.array([0.1, 0.5, 0.8, 0.9, 1.0])
    fig = plots.keep_top_k_plot(curve, k=2, metric="token accuracy")
    line, mark = fig.data
    assert list(line.x) == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(line.y, curve, rtol=1e-6)
    assert list(mark.x) == [2] and mark.y[0] == pytest.approx(0.8)
    assert fig.layout.yaxis.title.text == "token accuracy"
    with pytest.raises(ValueError, match="k must be in 0..4"):
        plots.keep_top_k_plot(curve, k=5)
    with pytest.raises(ValueError, match="at least one head"):
        plots.keep_top_k_plot(np.array([0.5]), k=0)
    with pytest.raises(ValueError, match="must be 1-d"):
        plots.keep_top_k_plot(np.zeros((2, 3)), k=0)


# ---- ablation before vs after W_o --------------------------------------------------------------


def test_ablation_change_bars_group_the_two_ways_per_token():
    before, after = np.array([0.0, 1.0, 2.0, 0.5]), np.array([1.0, 1.5, 0.2, 0.0])
    fig = plots.ablation_change_bars(before, after, LABELS)
    assert [t.type for t in fig.data] == ["bar", "bar"] and fig.layout.barmode == "group"
    np.testing.assert_allclose(fig.data[0].y, before, rtol=1e-6)
    np.testing.assert_allclose(fig.data[1].y, after, rtol=1e-6)
    assert "before" in fig.data[0].name and "after" in fig.data[1].name
    assert list(fig.data[0].x) == LABELS
    with pytest.raises(ValueError, match="differ in shape"):
        plots.ablation_change_bars(before, after[:3], LABELS)
    with pytest.raises(ValueError, match="4 tokens but 3 tokens were given"):
        plots.ablation_change_bars(before, after, LABELS[:3])
    markup = plots.ablation_change_bars(np.zeros(3), np.zeros(3), MARKUP)
    assert list(markup.data[0].x)[0] == "&lt;b&gt;x&lt;/b&gt;"


# ---- OV circuits and composition ---------------------------------------------------------------


def test_singular_value_lines_one_line_per_head():
    sv = np.sort(np.random.default_rng(3).random((2, 3, 4)), axis=-1)[..., ::-1]
    fig = plots.singular_value_lines(sv)
    assert [t.name for t in fig.data] == [f"L{a}H{b}" for a in range(2) for b in range(3)]
    assert list(fig.data[4].x) == [1, 2, 3, 4]
    np.testing.assert_allclose(fig.data[4].y, sv[1, 1], rtol=1e-6)
    with pytest.raises(ValueError, match="singular values must be 3-d"):
        plots.singular_value_lines(sv[0])
    with pytest.raises(ValueError, match="non-negative"):
        plots.singular_value_lines(-sv)


def test_composition_grid_rows_are_layer_pairs_and_columns_q_k_v():
    rng = np.random.default_rng(4)
    q, k, v = (rng.random((2, 3, 3)) * 0.5 for _ in range(3))
    fig = plots.composition_grid(q, k, v, baseline=0.125)
    assert fig.data[0].hovertemplate.startswith("writer %{y}<br>reader %{x}")
    np.testing.assert_allclose(block(fig, "L0→L1", "Q"), q[0], rtol=1e-6)
    np.testing.assert_allclose(block(fig, "L1→L2", "V"), v[1], rtol=1e-6)
    np.testing.assert_allclose(block(fig, "L1→L2", "K"), k[1], rtol=1e-6)
    assert fig.data[0].y[0] == "L0→L1 H0" and fig.data[0].x[0] == "Q H0"
    assert "0.125" in fig.layout.title.text
    assert fig.layout.coloraxis.cmin == 0
    with pytest.raises(ValueError, match="differ in shape"):
        plots.composition_grid(q, k[:1], v, 0.1)
    with pytest.raises(ValueError, match="at least two layers"):
        plots.composition_grid(q[:0], k[:0], v[:0], 0.1)
    with pytest.raises(ValueError, match=r"\(layer pairs, H, H\)"):
        plots.composition_grid(q[..., :2], k[..., :2], v[..., :2], 0.1)


def test_head_shares_map_rows_are_output_dims():
    shares = np.kron(np.eye(2), np.ones((3, 1)))  # (6, 2): block-diagonal, no mixing
    fig = plots.head_shares_map(shares, title="W_o")
    np.testing.assert_allclose(fig.data[0].z, shares, rtol=1e-6)
    assert list(fig.data[0].x) == ["H0", "H1"] and len(fig.data[0].y) == 6
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    with pytest.raises(ValueError, match="head shares must be 2-d"):
        plots.head_shares_map(np.zeros(3))
    with pytest.raises(ValueError, match="non-negative"):
        plots.head_shares_map(-shares)


# ---- the experiment ----------------------------------------------------------------------------


def test_experiment_curves_band_and_mean_per_condition():
    step = np.arange(1, 6)
    mean = np.array([[3.0, 2.0, 1.0, 0.5, 0.4], [3.0, 2.5, 1.5, 0.8, 0.6]])
    std = np.full_like(mean, 0.1)
    fig = plots.experiment_curves(step, mean, mean - std, mean + std, names=("with", "<b>no</b>"))
    assert len(fig.data) == 6  # per condition: band top, band bottom (filled), mean line
    upper, lower, line = fig.data[3:]
    np.testing.assert_allclose(line.y, mean[1], rtol=1e-6)
    np.testing.assert_allclose(upper.y, mean[1] + 0.1, rtol=1e-6)
    np.testing.assert_allclose(lower.y, mean[1] - 0.1, rtol=1e-6)
    assert lower.fill == "tonexty" and not upper.showlegend and line.name == "&lt;b&gt;no&lt;/b&gt;"
    assert fig.data[2].line.color != line.line.color
    assert fig.layout.yaxis.type == "log"
    assert "<b>" not in fig.to_json()


def test_experiment_curves_go_linear_when_the_band_reaches_zero_and_check_shapes():
    step, mean = np.arange(1, 4), np.ones((2, 3))
    fig = plots.experiment_curves(step, mean, mean - 2, mean + 2)
    assert fig.layout.yaxis.type == "linear"
    with pytest.raises(ValueError, match="differ in shape"):
        plots.experiment_curves(step, mean, mean[:1], mean)
    with pytest.raises(ValueError, match="3 points but 2 steps"):
        plots.experiment_curves(step[:2], mean, mean, mean)
    with pytest.raises(ValueError, match="2 curves need 2 conditions"):
        plots.experiment_curves(step, mean, mean, mean, names=("one",))


def test_lens_map_writes_whitespace_guesses_as_marks_and_escapes_the_rest():
    """A character model's likeliest next token is often a space or a line break: its cell shows
    the mark, not a blank; other tokens are escaped and cut to 8 characters."""
    tokens = np.array([[" ", "\n", "<b>", "abcdefghijk"], ["e", "  ", "\t", " the"]])
    probs = np.full(tokens.shape, 0.5, dtype=np.float32)
    fig = plots.lens_map(tokens, probs, ["embed", "L0"], ["a", "b", "c", "d"], "lens")
    (trace,) = fig.data
    assert [list(row) for row in trace.text] == [
        ["␣", "↵", "&lt;b&gt;", "abcdefgh"],
        ["e", "␣␣", "⇥", " the"],
    ]
