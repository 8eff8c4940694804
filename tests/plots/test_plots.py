"""tfviz.plots: figures hold the right data, validate shapes, and show tokens literally."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support import attn
from tfviz import plots
from tfviz.plots import standalone

LABELS = ["BOS", "a·1", "b·2", "c·3"]


def block(fig, row: str, col: str) -> np.ndarray:
    """The block of a mosaic figure whose cell names start with row and col (e.g. L1, H2)."""
    trace = fig.data[0]
    ys = [i for i, name in enumerate(trace.y) if in_block(name, row)]
    xs = [i for i, name in enumerate(trace.x) if in_block(name, col)]
    return np.asarray(trace.z, dtype=np.float64)[np.ix_(ys, xs)]


def in_block(name: str, block: str) -> bool:
    """A mosaic's cell name is in block: "L1 a·1", or one of its hover lines is "<word> L1"
    ("layer L1<br>query a·1", "key b·2<br>head H2")."""
    lines = name.split("<br>")
    return name.startswith(f"{block} ") or any(
        len(lines) > 1 and line.split(" ", 1)[-1] == block for line in lines
    )


def rings_of(fig):
    """The trace ringing the cells beyond the colour range, or None."""
    rings = [t for t in fig.data if t.type == "scatter" and t.mode == "markers"]
    assert len(rings) <= 1
    return rings[0] if rings else None


def test_attention_grid_is_one_mosaic_of_every_layer_and_head():
    a = attn()
    fig = plots.attention_grid(a, LABELS)
    assert [t.type for t in fig.data] == ["heatmap", "scatter"]  # the cells, the block titles
    for lay in range(2):
        for h in range(3):
            np.testing.assert_allclose(block(fig, f"L{lay}", f"H{h}"), a[lay, h], rtol=1e-6)
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert z.shape == (2 * 4 + 2, 3 * 4 + 2)  # two empty rows between layers, one between heads
    assert np.isnan(z[4:6]).all() and np.isnan(z[:, 4]).all()
    titles = plots.block_titles(fig)
    assert titles == ["L0 H0", "L0 H1", "L0 H2", "L1 H0", "L1 H1", "L1 H2"]
    # The titles are one text trace (not an annotation each: bench/figure_cost.py), without
    # hover or legend, on hidden axes laid over the heatmap's with its range in cells; the
    # heatmap's own axes keep their autorange.
    text = fig.data[1]
    assert text.mode == "text" and text.hoverinfo == "skip" and text.showlegend is False
    assert (text.xaxis, text.yaxis) == ("x2", "y2") and not fig.layout.annotations
    assert (fig.layout.xaxis2.overlaying, fig.layout.yaxis2.overlaying) == ("x", "y")
    assert fig.layout.xaxis2.visible is False and fig.layout.yaxis2.visible is False
    assert tuple(fig.layout.xaxis2.range) == (-0.5, z.shape[1] - 0.5)
    assert tuple(fig.layout.yaxis2.range) == (z.shape[0] - 0.5, -0.5)
    assert fig.layout.xaxis.range is None and fig.layout.yaxis.autorange == "reversed"
    # L1 H2's title: centred over its 4 columns (10..13), its foot on the top edge of row 6.
    assert (text.x[5], text.y[5]) == (11.5, 5.5)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    # Hover gives layer, query, key, head and weight each on a line of its own (issue 31: it
    # read "key H1 BOS"); ticks show the token.
    assert fig.data[0].y[1] == "layer L0<br>query a·1" and fig.data[0].x[5] == "key BOS<br>head H1"
    assert fig.data[0].hovertemplate.startswith("%{y}<br>%{x}<br>weight %{z")
    assert list(fig.layout.xaxis.ticktext) == LABELS  # under the first block column only
    assert list(fig.layout.yaxis.ticktext) == LABELS * 2
    assert "weight %{z" in fig.data[0].hovertemplate and fig.data[0].hoverongaps is False


def test_attention_column_stacks_some_heads_of_a_layer_each_titled_and_labelled():
    a = attn(L=1, H=12, T=12)[0]  # (H, T, T): a MiniLM-sized layer
    labels = [f"w{i}" for i in range(12)]
    fig = plots.attention_column(a, labels, layer=3, heads=[10, 11], with_mean=True)
    assert plots.block_titles(fig) == ["L3 H10", "L3 H11", "L3 mean"]
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    np.testing.assert_allclose(z[14:26], a[11], rtol=1e-6)
    assert fig.data[0].y[14] == "head L3 H11<br>query w0"  # the hover's lines
    assert fig.data[0].x[0] == "key w0"
    assert z.shape == (3 * 12 + 2 * 2, 12)  # one block per row, two empty rows between
    np.testing.assert_allclose(z[28:40], a.mean(axis=0), rtol=1e-6)  # the mean of all 12
    # Every column of 12 word-pieces is labelled, upright, and at least MIN_LABEL_PX apart.
    assert list(fig.layout.xaxis.ticktext) == labels and fig.layout.xaxis.tickangle == -90
    assert plots.COLUMN_PX / 12 >= plots.MIN_LABEL_PX
    assert fig.layout.coloraxis.showscale is True
    other = plots.attention_column(a, labels, 0, [0], show_scale=False)
    assert other.layout.coloraxis.showscale is False  # its place kept: the blocks line up
    assert other.layout.margin.t == fig.layout.margin.t


def test_attention_column_labels_every_kth_word_piece_when_they_would_touch():
    T = 40
    a = attn(L=1, H=2, T=T)[0]
    labels = [f"w{i}" for i in range(T)]
    fig = plots.attention_column(a, labels, layer=0, heads=[0, 1])
    shown = list(fig.layout.xaxis.ticktext)
    every = labels.index(shown[1])
    assert every > 1 and shown == labels[::every]
    assert plots.COLUMN_PX / T * every >= plots.MIN_LABEL_PX  # labelled ones do not touch
    # Rows too: at most MAX_ROW_LABELS per square (each label costs the browser a redraw).
    rows = list(fig.layout.yaxis.ticktext)
    step = labels.index(rows[1])
    assert rows == labels[::step] * 2 and len(labels[::step]) <= plots.MAX_ROW_LABELS
    twelve = plots.attention_column(a[:, :12, :12], labels[:12], layer=0, heads=[0])
    assert list(twelve.layout.yaxis.ticktext) == labels[:12]  # 12 word-pieces: every row


@pytest.mark.parametrize(
    "heads, mean, message",
    [([12], False, "heads 0..11"), ([], False, "at least one head")],
)
def test_attention_column_refuses_heads_the_layer_lacks(heads, mean, message):
    with pytest.raises(ValueError, match=message):
        plots.attention_column(attn(L=1, H=12)[0], LABELS, 0, heads, with_mean=mean)
    with pytest.raises(ValueError, match="3 rows but 4 tokens"):
        plots.attention_column(attn(L=1, H=2, T=3)[0], LABELS, 0, [0])


def test_attention_is_sent_as_float32():
    spec = json.loads(plots.attention_grid(attn(), LABELS).to_json())
    assert spec["data"][0]["z"]["dtype"] == "f4"


def test_attention_grid_titles_a_slice_of_layers():
    fig = plots.attention_grid(attn(L=1), LABELS, layer_ids=[3])
    assert plots.block_titles(fig)[0] == "L3 H0"
    assert fig.data[0].y[0] == "layer L3<br>query BOS"
    with pytest.raises(ValueError, match="1 layers but 2 layer ids"):
        plots.attention_grid(attn(L=1), LABELS, layer_ids=[0, 1])


@pytest.mark.parametrize(
    "shape, message",
    [
        ((2, 3, 4, 5), "attention has 5 keys but 4 tokens were given"),
        ((2, 3, 5, 4), "attention has 5 queries but 4 tokens were given"),
        ((3, 4, 4), "attention must be 4-d"),
    ],
)
def test_attention_grid_refuses_mismatched_shapes(shape, message):
    with pytest.raises(ValueError, match=message):
        plots.attention_grid(np.zeros(shape), LABELS)


def test_attention_map_and_the_head_mean():
    a = attn()
    one = plots.attention_map(a[1, 0], LABELS, title="L1 H0")
    np.testing.assert_allclose(one.data[0].z, a[1, 0], rtol=1e-6)
    assert list(one.data[0].x) == LABELS
    grid = plots.attention_grid(a, LABELS, with_mean=True)
    np.testing.assert_allclose(block(grid, "L1", "mean"), a[1].mean(0), rtol=1e-6)
    np.testing.assert_allclose(block(grid, "L0", "H2"), a[0, 2], rtol=1e-6)
    assert plots.block_titles(grid)[:4] == [
        "L0 H0",
        "L0 H1",
        "L0 H2",
        "L0 mean",
    ]
    with pytest.raises(ValueError, match="attention has 4 keys but 3 tokens"):
        plots.attention_map(a[0, 0], LABELS[:3])


def test_markup_tokens_are_shown_literally():
    labels = ["<b>x</b>", "&amp;", "a"]
    fig = plots.attention_grid(np.full((1, 1, 3, 3), 1 / 3), labels)
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[0] == "&lt;b&gt;x&lt;/b&gt;"
    assert ticks[1] == "&amp;amp;"
    assert fig.data[0].x[0] == "key &lt;b&gt;x&lt;/b&gt;<br>head H0"
    assert "<b>" not in fig.to_json()
    one = plots.attention_map(np.eye(3), labels)
    assert list(one.data[0].y)[0] == "&lt;b&gt;x&lt;/b&gt;"
    bars = plots.cosine_bars(np.zeros(3), labels)
    assert list(bars.data[0].x)[0] == "&lt;b&gt;x&lt;/b&gt;"
    contrib = plots.head_contributions(np.zeros((2, 4)), "<i>t</i>")
    assert "<i>" not in contrib.layout.title.text


def test_labels_that_would_merge_are_refused():
    with pytest.raises(ValueError, match="unique"):
        plots.attention_map(np.eye(2), ["a", "a"])


def test_activation_map_marks_head_blocks():
    values = np.arange(4 * 8, dtype=np.float32).reshape(4, 8) - 10
    fig = plots.activation_map(values, LABELS, n_heads=4)
    np.testing.assert_array_equal(fig.data[0].z, values)
    assert [s.x0 for s in fig.layout.shapes] == [1.5, 3.5, 5.5]
    assert plots.block_titles(fig) == ["H0", "H1", "H2", "H3"]
    titles = fig.data[-1]  # over each head's block of columns, at the top of the plot
    assert list(titles.x) == [0.5, 2.5, 4.5, 6.5] and set(titles.y) == {1.0}
    assert tuple(fig.layout.yaxis2.range) == (0.0, 1.0) and not fig.layout.annotations
    # Colours centred on 0: the same colour means the same sign everywhere.
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax == -21
    plain = plots.activation_map(values, LABELS)
    assert not plain.layout.shapes
    with pytest.raises(ValueError, match="cannot be split into 3"):
        plots.activation_map(values, LABELS, n_heads=3)
    with pytest.raises(ValueError, match="activation has 4 rows but 3 tokens"):
        plots.activation_map(values, LABELS[:3])


def test_w_o_matrix():
    W = np.random.default_rng(0).normal(size=(8, 8))
    fig = plots.w_o_matrix(W, n_heads=2)
    # Drawn as lesson 1's table reads it (attn_out = concat · W_o): rows = concat dims in the
    # heads' blocks, columns = output dims; W is nn.Linear's (out, in).
    np.testing.assert_allclose(fig.data[0].z, W.T, rtol=1e-6)
    assert [(s.y0, s.y1, s.xref) for s in fig.layout.shapes] == [(3.5, 3.5, "paper")]
    assert list(fig.layout.yaxis.ticktext) == ["H0", "H1"]
    assert list(fig.layout.yaxis.tickvals) == [1.5, 5.5]
    assert fig.layout.yaxis.title.text == "input dim (concat: head blocks)"
    assert fig.layout.xaxis.title.text == "output dim (attn_out)"
    with pytest.raises(ValueError, match="square"):
        plots.w_o_matrix(np.zeros((8, 4)), n_heads=2)


def test_all_zero_values_still_get_a_colour_range():
    fig = plots.activation_map(np.zeros((4, 4)), LABELS)
    assert fig.layout.coloraxis.cmax == 1.0


def test_head_contributions_rows_are_heads():
    c = np.random.default_rng(1).normal(size=(3, 6))
    fig = plots.head_contributions(c, "a·1")
    assert list(fig.data[0].y) == ["H0", "H1", "H2"]
    np.testing.assert_allclose(fig.data[0].z, c, rtol=1e-6)


def test_cosine_bars_validate_length():
    fig = plots.cosine_bars(np.array([1.0, 0.5, -0.5, 0.0]), LABELS)
    assert tuple(fig.layout.yaxis.range) == (-1.05, 1.05)
    with pytest.raises(ValueError, match="cosine has 3 values but 4 tokens"):
        plots.cosine_bars(np.zeros(3), LABELS)


def test_residual_pair_puts_learned_left_and_switched_right():
    rng = np.random.default_rng(2)
    base, switched = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 4, 6))
    fig = plots.residual_pair(base, switched, LABELS)
    assert fig.data[0].hovertemplate.startswith("token %{y}<br>dim %{x}")
    np.testing.assert_allclose(block(fig, "L0 out", "learned W_o"), base[0], rtol=1e-6)
    np.testing.assert_allclose(block(fig, "L1 out", "switched"), switched[1], rtol=1e-6)
    assert plots.block_titles(fig)[1] == "L0 out switched"
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax
    with pytest.raises(ValueError, match="differ in shape"):
        plots.residual_pair(base, switched[:1], LABELS)
    with pytest.raises(ValueError, match="4 tokens but 3 tokens were given"):
        plots.residual_pair(base, switched, LABELS[:3])


def outlier_streams(seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(L=2, T=4, D=256) residual streams like MiniLM's: N(0, 1), dimension 9 at about 10."""
    rng = np.random.default_rng(seed)
    base, switched = rng.normal(size=(2, 2, 4, 256)).astype(np.float32)
    base[:, :, 9] = 10.0 + rng.random((2, 4))
    switched[:, :, 9] = -(9.0 + rng.random((2, 4)))
    return base, switched


def test_a_few_outlier_dimensions_do_not_set_the_residual_colour_range():
    """MiniLM's residual stream was almost white: dimension 99 at ~10 set the range to +-10.
    Colours now stop at the 99th percentile; the cells beyond are ringed and say so on hover."""
    base, switched = outlier_streams()
    both = np.abs(np.stack([base, switched]))
    fig = plots.residual_pair(base, switched, LABELS)
    robust = np.percentile(both, plots.ROBUST_PERCENTILE)
    assert fig.layout.coloraxis.cmax == pytest.approx(robust, rel=1e-5)
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax
    assert fig.layout.coloraxis.cmax < both.max() / 3  # most cells are no longer near white
    ends = fig.layout.coloraxis.colorbar.ticktext
    assert ends[0].startswith("≤ -") and ends[-1].startswith("≥ ")
    rings = rings_of(fig)
    assert rings is not None
    beyond = int((both > robust).sum())
    assert len(rings.x) == len(rings.customdata) == beyond
    assert {name.split(" ")[0] for name in rings.x} == {"learned", "switched"}  # block names
    outlier = {(x, y) for x, y in zip(rings.x, rings.y, strict=True) if x.endswith(" 9")}
    assert len(outlier) == 2 * 2 * 4  # every cell of the outlier dimension is ringed
    assert np.abs(np.asarray(rings.customdata)).min() > robust  # the true values, on hover
    assert rings.hovertemplate.split("<br>")[-2:] == [
        plots.english(plots.CLIPPED_KEY),
        "value %{customdata:.3f}<extra></extra>",
    ]


def test_a_toy_model_s_residual_colour_range_is_unchanged(model, ids):
    """The toy models have no outliers (largest |value| under 2x the 99th percentile): their
    scale still spans every value, nothing is ringed."""
    from tests.conftest import MODELS
    from tfviz import get_task, load_checkpoint
    from tfviz.core.trace import run_trace

    toy, meta = load_checkpoint(MODELS / "reverse.safetensors")
    task = get_task(meta.task)
    base = run_trace(toy, task, "abcdefgh")
    switched = run_trace(toy, task, "abcdefgh", w_o="identity")
    fig = plots.residual_pair(base.resid_out, switched.resid_out, base.labels)
    top = np.abs(np.stack([base.resid_out, switched.resid_out])).max()
    assert fig.layout.coloraxis.cmax == pytest.approx(top, rel=1e-6)
    assert rings_of(fig) is None and fig.layout.coloraxis.colorbar.ticktext is None
    assert plots.colour_limit(np.zeros((2, 3))) == (1.0, False)


def test_an_activation_map_with_outlier_dimensions_gets_the_robust_range_too():
    """The same fault in the Before/after W_o view: MiniLM's layer-0 attn_out reaches 4.3 where
    99% of it is under 0.6. A toy model's activations keep their full range."""
    values = outlier_streams()[0][0]  # (T=4, D=256), dimension 9 at about 10
    fig = plots.activation_map(values, LABELS, n_heads=4)
    assert fig.layout.coloraxis.cmax == pytest.approx(np.percentile(np.abs(values), 99), rel=1e-5)
    rings = rings_of(fig)
    assert 9 in set(rings.x) and len(rings.x) == int(
        (np.abs(values) > fig.layout.coloraxis.cmax).sum()
    )
    assert plots.english(plots.CLIPPED_KEY) in rings.hovertemplate
    calm = np.random.default_rng(4).normal(size=(4, 256))
    plain = plots.activation_map(calm, LABELS)
    assert len(plain.data) == 1 and plain.layout.coloraxis.cmax == pytest.approx(np.abs(calm).max())
    # W_o itself and the heads' terms: MiniLM's layer 0 has outliers in both.
    W = np.random.default_rng(5).normal(size=(64, 64)) * 0.1
    W[3, 7] = 5.0
    for fig in (plots.w_o_matrix(W, 4), plots.head_contributions(W[:4], "a")):
        cmax = fig.layout.coloraxis.cmax
        assert cmax < 1.0 and fig.layout.coloraxis.colorbar.ticktext[-1].startswith("≥")
        assert 5.0 in np.asarray(rings_of(fig).customdata)


@pytest.mark.parametrize(
    "name", ["balanced", "histogram", "max_position", "reverse", "sort", "sum", "sum_seed"]
)
def test_no_bundled_toy_model_gets_a_clipped_colour_range(name):
    """Toy models must not get worse: on short and long inputs, learned and W_o off, none of
    their residual streams, concats or attention outputs is clipped."""
    from tests.conftest import MODELS
    from tfviz import get_task, load_checkpoint
    from tfviz.core.trace import run_trace

    model, meta = load_checkpoint(MODELS / f"{name}.safetensors")
    task = get_task(meta.task)
    alphabet = task.alphabet or "()"
    for text in ((alphabet * 4)[:3], (alphabet * 4)[:8], (alphabet[::-1] * 4)[: task.max_len]):
        base = run_trace(model, task, text)
        off = run_trace(model, task, text, w_o="identity")
        assert not plots.colour_limit(np.stack([base.resid_out, off.resid_out]))[1]
        for trace in (base, off):
            for layer in range(trace.n_layers):
                for values in (trace.concat[layer], trace.attn_out[layer]):
                    assert not plots.colour_limit(values)[1], (name, text, layer)
        ids, pad = task.encode_batch([text])
        for layer, lt in enumerate(model(ids, pad, trace=True).trace.layers):
            W_o = model.layers[layer].attn.W_o.weight.detach().numpy()
            assert not plots.colour_limit(W_o)[1], (name, layer)
            terms = lt.head_contributions()[0].detach().numpy()  # (H, T, D)
            for t in range(terms.shape[1]):
                assert not plots.colour_limit(terms[:, t])[1], (name, text, layer, t)


def test_the_clipped_cells_hover_line_is_translated():
    from tfviz.ui.widgets import plot_words

    fig = plots.residual_pair(*outlier_streams(), LABELS, words=plot_words("zh"))
    assert "<br>超出颜色范围<br>" in rings_of(fig).hovertemplate


def test_drift_bars_and_loss_curve():
    drift = plots.drift_bars(np.array([0.1, 1.5]))
    assert list(drift.data[0].x) == ["L0", "L1"]
    assert drift.layout.yaxis.range[1] >= 1.5
    loss = plots.loss_curve([2.0, 1.0, 0.5], every=10, total_steps=100)
    assert list(loss.data[0].x) == [10, 20, 30]
    assert loss.layout.yaxis.type == "log"
    assert plots.loss_curve([0.0, 1.0]).layout.yaxis.type == "linear"


def test_a_long_inputs_map_stays_one_screen_tall_with_thinned_labels():
    rng = np.random.default_rng(0)
    for T, every in ((8, 1), (256, 4)):
        weights = rng.random((T, T))
        weights /= weights.sum(-1, keepdims=True)
        labels = [f"t{i}" for i in range(T)]
        fig = plots.attention_map(weights, labels)
        assert fig.layout.height == max(360, min(24 * T, plots.MAP_MAX_PX) + 140)
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            assert list(axis.tickvals) == labels[::every]  # every label up to ~14 px a row
        assert len(fig.data[0].x) == T  # every cell is drawn (and hovers) all the same
        # The canvas charts thin by zoom from every label (tfviz/plots/standalone.js), in the
        # categories' order; the figure stays one they draw (the app would fall back to plotly).
        assert fig.layout.dragmode == "zoom" and list(fig.layout.meta["labels"]) == labels
        assert standalone.unsupported(fig) == []
