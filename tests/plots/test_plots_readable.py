"""Charts a teacher can project (issue 31, "Charts"): figure-level checks of what the browser
test (tests/browser/test_browser_readable.py) sees drawn."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support import attn
from tfviz import plots

NAMES = {"learned": "L", "block_diagonal": "B", "identity": "I", "zero": "Z", "rank": "R"}


# ---- the W_o modes chart ------------------------------------------------------------------------


def test_the_mode_sweep_log_axis_labels_decades_and_the_top_rank_only():
    ranks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]
    fig = plots.mode_sweep_plot(ranks, np.linspace(0, 1, len(ranks)), {"learned": 1.0}, NAMES)
    axis = fig.layout.xaxis
    assert axis.type == "log" and axis.tickmode == "array"
    assert list(axis.tickvals) == [1, 10, 100, 384]
    assert list(axis.ticktext) == ["1", "10", "100", "384"]
    # Every label is a decade or the largest rank: no "2" or "5" between decades.
    for value in axis.tickvals[:-1]:
        assert math.log10(value) == int(math.log10(value))


def test_the_mode_sweep_top_rank_gets_no_label_of_its_own_next_to_a_decade():
    ranks = [1, 2, 4, 8, 16, 32, 64, 128]
    fig = plots.mode_sweep_plot(ranks, np.linspace(0, 1, len(ranks)), {"learned": 1.0}, NAMES)
    assert list(fig.layout.xaxis.tickvals) == [1, 10, 100]  # 128 would touch 100's label


def test_a_short_mode_sweep_keeps_its_linear_axis():
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], {"learned": 1.0}, NAMES)
    assert fig.layout.xaxis.type == "linear" and fig.layout.xaxis.tickvals is None


def test_reference_lines_on_the_same_value_are_drawn_as_bands_around_each_other():
    # A model that needs W_o: W_o off and W_o zeroed both fall to 0.
    whole = {"learned": 1.0, "block_diagonal": 0.5, "identity": 0.0, "zero": 0.0}
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES)
    width = {tr.name.split(":")[0]: tr.line.width for tr in fig.data if tr.name and ":" in tr.name}
    order = [tr.name.split(":")[0] for tr in fig.data if tr.name and ":" in tr.name]
    assert order.index("I") < order.index("Z")  # zero is drawn over identity...
    assert width["I"] > width["Z"]  # ...so identity is wider and shows around it
    assert width["L"] == width["B"] == width["Z"]  # lines alone on their values stay as they were
    dashes = {tr.name.split(":")[0]: tr.line.dash for tr in fig.data if tr.name and ":" in tr.name}
    assert dashes["I"] != dashes["Z"]


def test_reference_lines_apart_keep_one_width():
    whole = {"learned": 1.0, "block_diagonal": 0.5, "identity": 0.2, "zero": 0.0}
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES)
    widths = {tr.line.width for tr in fig.data if tr.name and ":" in tr.name}
    assert len(widths) == 1


# ---- hover: query, key, head and weight each on a line of their own ----------------------------

LABELS = ["BOS", "a·1", "b·2", "c·3"]


def hover_lines(fig, row: int, col: int) -> list[str]:
    """The hover of cell (row, col) of a figure's heatmap as plotly fills it, line by line."""
    trace = fig.data[0]
    text = trace.hovertemplate.replace("<extra></extra>", "")
    text = text.replace("%{y}", trace.y[row]).replace("%{x}", trace.x[col])
    return text.split("<br>")


def test_the_grid_hover_puts_query_key_head_and_weight_on_lines_of_their_own():
    fig = plots.attention_grid(attn(), LABELS)
    # Layer 1 (rows 6..9), head 2 (columns 10..13): query a·1 (row 7), key b·2 (column 12).
    assert hover_lines(fig, 7, 12) == [
        "layer L1",
        "query a·1",
        "key b·2",
        "head H2",
        "weight %{z:.3f}",
    ]


def test_a_column_hover_names_the_head_on_its_own_line():
    a = attn(L=1, H=12, T=4)[0]
    fig = plots.attention_column(a, LABELS, layer=3, heads=[10, 11])
    # Block 1 (head 11) starts at row 4 + 2 gap rows.
    assert hover_lines(fig, 6 + 1, 2) == ["head L3 H11", "query a·1", "key b·2", "weight %{z:.3f}"]


# ---- the weights' colour scale: 0..1, fitted, log ----------------------------------------------


def near_uniform(T=6, H=3, L=2) -> np.ndarray:
    """A random model's attention: every weight near 1/T."""
    rng = np.random.default_rng(1)
    w = 1.0 + 0.2 * rng.random((L, H, T, T))
    return w / w.sum(-1, keepdims=True)


def test_the_fixed_scale_is_the_default_and_runs_from_0_to_1():
    fig = plots.attention_grid(near_uniform(), [f"t{i}" for i in range(6)])
    axis = fig.layout.coloraxis
    assert (axis.cmin, axis.cmax) == (0.0, 1.0)
    assert axis.colorbar.title.text == "weight"


def test_the_fitted_scale_spans_the_weights_shown_and_says_so():
    a = near_uniform()
    labels = [f"t{i}" for i in range(6)]
    fig = plots.attention_grid(a, labels, with_mean=True, scale=plots.FITTED)
    axis = fig.layout.coloraxis
    assert axis.cmin == pytest.approx(a.min(), rel=1e-5)
    assert axis.cmax == pytest.approx(a.max(), rel=1e-5)
    assert axis.cmax - axis.cmin < 0.1  # what 0..1 squeezed into one shade
    assert axis.colorbar.title.text == plots.english("chart.scale.fitted")
    # A layer's columns share the layer's range: the same whichever heads a column shows.
    first = plots.attention_column(a[0], labels, 0, [0], scale=plots.FITTED)
    last = plots.attention_column(a[0], labels, 0, [2], with_mean=True, scale=plots.FITTED)
    assert first.layout.coloraxis.cmin == last.layout.coloraxis.cmin
    assert first.layout.coloraxis.cmax == last.layout.coloraxis.cmax
    assert first.layout.coloraxis.cmin == pytest.approx(a[0].min(), rel=1e-5)


def test_the_log_scale_colours_decades_and_hovers_the_weight_itself():
    a = np.full((1, 1, 3, 3), 1e-5, dtype=np.float32)
    a[..., 0] = 1 - 2e-5  # a decoder-like head: the first token takes nearly everything
    fig = plots.attention_grid(a, ["x", "y", "z"], scale=plots.LOG)
    heatmap, axis = fig.data[0], fig.layout.coloraxis
    z = np.asarray(heatmap.z, dtype=np.float64)
    assert z[0, 1] == pytest.approx(np.log10(plots.LOG_FLOOR))  # 1e-5 drawn as the floor
    assert z[0, 0] == pytest.approx(np.log10(1 - 2e-5), abs=1e-6)
    np.testing.assert_allclose(np.asarray(heatmap.customdata, dtype=np.float64), a[0, 0], rtol=1e-6)
    assert "%{customdata:.3f}" in heatmap.hovertemplate and "%{z" not in heatmap.hovertemplate
    assert (axis.cmin, axis.cmax) == (-3, 0)
    assert list(axis.colorbar.ticktext) == ["≤ 0.001", "0.01", "0.1", "1"]
    assert axis.colorbar.title.text == plots.english("chart.scale.log")


def test_an_enlarged_head_takes_the_scale_too_and_an_unknown_scale_is_refused():
    w = near_uniform()[0, 0]
    fig = plots.attention_map(w, [f"t{i}" for i in range(6)], scale=plots.FITTED)
    assert fig.layout.coloraxis.cmax == pytest.approx(w.max(), rel=1e-5)
    with pytest.raises(ValueError, match="weight scale"):
        plots.attention_map(w, [f"t{i}" for i in range(6)], scale="rainbow")


# ---- the residual stream's block titles stay over their blocks ---------------------------------


def test_ringed_residual_cells_do_not_move_the_cells_away_from_their_titles():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(2, 3, 64)).astype(np.float32)
    base[0, 0, 9] = 40.0  # an outlier: a ring on its cell (a scatter trace)
    fig = plots.residual_pair(base, base * 0.5, ["a", "b", "c"])
    assert len(fig.data) == 3  # cells, block titles, rings
    rows, cols = np.shape(fig.data[0].z)
    # The cells' axes span exactly the cells, as the titles' axes do: no autorange padding.
    assert list(fig.layout.xaxis.range) == list(fig.layout.xaxis2.range) == [-0.5, cols - 0.5]
    assert list(fig.layout.yaxis.range) == list(fig.layout.yaxis2.range) == [rows - 0.5, -0.5]
    assert fig.layout.yaxis.autorange is None


# ---- many word-pieces: labels thinned to what fits; byte-level pieces shown as characters -------


def test_a_row_of_twelve_heads_labels_every_kth_piece_so_labels_never_smear():
    T, H = 40, 12
    labels = [f"p{i}" for i in range(T)]
    rng = np.random.default_rng(0)
    fig = plots.attention_diff_grid(rng.normal(size=(H, T, T)) * 0.1, labels, layer=0)
    names = list(fig.data[0].x)
    px_per_cell = plots.MOSAIC_PX / len(names)
    ticks = [names.index(v) for v in fig.layout.xaxis.tickvals]
    gaps = np.diff(ticks) * px_per_cell
    assert len(ticks) > 1 and gaps.min() >= 14  # every k-th, at least 14 px apart
    assert len(ticks) < T  # thinned: all 40 had 1.8 px each
    assert list(fig.layout.xaxis.ticktext) == [labels[i] for i in ticks]


def byte_pieces(text: str, cuts: list[int]) -> list[str]:
    """text's UTF-8 cut into pieces at the given byte offsets, spelled in the byte alphabet as a
    byte-level BPE vocabulary spells them ("中" is "ä¸Ń")."""
    from tfviz.hf import tokenizer

    letter = {b: c for c, b in tokenizer.BYTE_OF.items()}
    data = text.encode("utf-8")
    ends = [0, *cuts, len(data)]
    return ["".join(letter[b] for b in data[a:b]) for a, b in zip(ends, ends[1:], strict=False)]


def test_byte_pieces_show_each_character_once_and_continuations_as_a_marker():
    from tfviz.hf import tokenizer

    # 中文好: three 3-byte characters, cut inside 中 and 好 as byte-level BPE cuts them.
    pieces = byte_pieces("中文好", [2, 3, 6, 8])
    assert len(pieces) == 5
    shown = tokenizer.shown_pieces(pieces, None, list(range(len(pieces))))
    mark = tokenizer.CONTINUED
    assert shown == ["中", mark, "文", "好", mark]
    # Read left to right, the labels spell the text once, with no byte pieces left in.
    assert "".join(shown).replace(mark, "") == "中文好"
    labels = tokenizer.unique_labels(tuple(shown))
    assert labels == ("中", f"{mark} (1)", "文", "好", f"{mark} (4)")
    # A chart takes them as they are (unique, escaped), ticks and hover alike.
    fig = plots.attention_column(np.full((1, 5, 5), 0.2), list(labels), 0, [0])
    assert list(fig.layout.yaxis.ticktext) == list(labels)


def test_a_decoded_byte_piece_keeps_its_exact_spelling_in_the_hover_not_on_the_axis():
    import pickle

    from tfviz.hf import tokenizer

    pieces = byte_pieces("中文好", [2, 3, 6, 8])
    shown = tokenizer.shown_pieces(pieces, None, list(range(len(pieces))))
    labels = tokenizer.unique_labels(tuple(shown), tuple(pieces))
    assert labels == ("中", "… (1)", "文", "好", "… (4)")  # as strings, as before
    assert [label.spelled for label in labels] == pieces  # each keeps its exact piece
    assert pickle.loads(pickle.dumps(labels[0])).spelled == pieces[0]  # the trace cache's copy
    fig = plots.attention_column(np.full((1, 5, 5), 0.2), list(labels), 0, [0])
    assert list(fig.layout.yaxis.ticktext) == list(labels)  # the axis: the characters
    assert fig.data[0].x[0] == f"key 中 [{pieces[0]}]"  # the hover: and the piece itself
    big = plots.attention_map(np.full((5, 5), 0.2), list(labels))
    assert list(big.layout.xaxis.ticktext) == list(labels)
    assert big.data[0].x[1] == f"… (1) [{pieces[1]}]"
    # Pieces spelled as shown (WordPiece, or a byte piece that is plain ASCII) add nothing.
    plain = tokenizer.unique_labels(("a", "b"), ("a", "b"))
    assert plots.attention_map(np.full((2, 2), 0.5), list(plain)).data[0].x[0] == "a"


# A real byte-level BPE tokenizer: tests/hf/test_hf_bpe_files.py's RoBERTa folder (built with
# transformers, which that module skips without).
from tests.hf import test_hf_bpe_files as bpe_files  # noqa: E402

roberta, opened = bpe_files.roberta, bpe_files.opened


def test_a_roberta_folder_labels_chinese_as_characters_and_hovers_its_pieces(opened):
    tokenizer = opened[0].tokenizer
    assert tokenizer.byte_level
    got = tokenizer.encode("中文 好 cats")
    labels, shown = got.labels[1:-1], got.pieces[1:-1]
    spelled = [tokenizer.piece(i) for i in got.ids[1:-1]]
    # Each character once, on its first piece; "…" on the pieces that continue it.
    assert "…" in shown
    assert "".join(shown).replace("…", "").replace("▁", " ") == "中文 好 cats"
    # A label shown otherwise than spelled keeps the exact piece; the others are as spelled.
    assert all(
        getattr(label, "spelled", piece) == exact
        for label, piece, exact in zip(labels, shown, spelled, strict=True)
    )
    T = len(got.labels)
    fig = plots.attention_column(np.full((1, T, T), 1 / T), list(got.labels), 0, [0])
    ticks = list(fig.layout.yaxis.ticktext)  # the axis: what they stand for (HTML-escaped)
    assert ticks[1:-1] == list(labels) and ticks[0] == "&lt;s&gt;"
    for name, piece, exact in zip(fig.data[0].x[1:-1], shown, spelled, strict=True):
        assert name.endswith(f" [{exact}]") == (piece != exact), name  # the hover: exact pieces


def test_thinned_labels_keep_whole_tokens_and_drop_continuation_marks():
    from tfviz.plots.mosaic import labelled

    plain = [f"t{i}" for i in range(10)]
    assert labelled(plain, 1) == list(range(10))
    assert labelled(plain, 3) == [0, 3, 6, 9]  # as by position when no piece continues
    # "我爱" in byte-level BPE: three pieces a character, the last two shown as marks.
    pieces = ["<s>", "我", "… (2)", "… (3)", "爱", "… (5)", "… (6)", "</s>"]
    assert labelled(pieces, 1) == list(range(8))
    assert labelled(pieces, 2) == [0, 4, 7]  # 我 gives way to <s>, and no mark is shown
    assert labelled(pieces[1:], 2) == [0, 3, 6]  # 我, 爱, </s>
