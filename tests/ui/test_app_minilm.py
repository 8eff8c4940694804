"""The pretrained all-MiniLM-L6-v2 in the app, driven headless through AppTest.

Picked beside the toy models (never the opening one), it shows where it comes from, reads two
sentences, shows sentence A's word-pieces, and the similarity of A and B learned and switched;
every tab opens on it, and hostile text in either box gives a message or a cut run. Similarities
shown are checked against tfviz.hf.pretrained computed here (itself checked against transformers'
BertModel in tests/hf/test_pretrained.py). The model loads once per process (about a second).
"""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP, start_app
from tests.support import charts, unescape
from tests.ui.test_app import array  # plotly's typed arrays in figure JSON, as numpy
from tfviz import analysis, plots
from tfviz.core.interventions import NONE, switches
from tfviz.core.trace import run_trace
from tfviz.hf import pretrained
from tfviz.ui.i18n import translate
from tfviz.ui.switches import EVERY_LAYER
from tfviz.ui.views import attention

pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is not installed")

pytestmark = pytest.mark.usefixtures("fresh_app")

MINILM = f"pretrained:{pretrained.NAME}"
PARAPHRASE, UNRELATED = pretrained.PARAPHRASE_PAIR, pretrained.UNRELATED_PAIR


def start_minilm(view: str | None = None) -> AppTest:
    """A fresh session with MiniLM picked (and a tab open if given)."""
    return start_app(view, model=MINILM)


def expected_similarity(text_a: str, text_b: str, iv=NONE) -> pretrained.PairSimilarity:
    """What the page should show, computed here on another path than the app's (which runs one
    sentence at a time): the two texts as one padded batch."""
    model, tokenizer = pretrained.load_minilm()
    batch = tokenizer.batch([text_a, text_b])
    learned = pretrained.sentence_embedding(model, batch.ids, batch.pad_mask)  # (2, D)
    switched = pretrained.sentence_embedding(model, batch.ids, batch.pad_mask, iv)  # (2, D)
    return pretrained.PairSimilarity.of(learned, switched)


def metrics(at: AppTest, label: str) -> list[str]:
    return [m.value for m in at.metric if m.label == label]


def metric_number(at: AppTest, label: str) -> float:
    """The one metric with this label, as a number."""
    values = metrics(at, label)
    assert len(values) == 1, (label, [m.label for m in at.metric])
    return float(values[0])


def messages(at: AppTest, kind: str) -> list[str]:
    return [unescape(e.value) for e in getattr(at, kind)]


def pieces(at: AppTest) -> list[str]:
    """Sentence A's word-pieces as the page shows them."""
    return at.code[0].value.split()


def set_text(at: AppTest, box: str, text: str) -> AppTest:
    at.text_input(key=box).set_value(text).run()
    assert not at.exception, at.exception
    return at


# ---- the picker, the facts, the two boxes ---------------------------------------------------


def test_minilm_is_offered_but_the_app_opens_on_reverse():
    at = start_app()
    picker = at.selectbox(key="model")
    assert any(pretrained.NAME in option for option in picker.options), picker.options
    assert picker.value == "bundled:reverse"
    assert at.text_input(key="sequence").value != PARAPHRASE[0]
    assert not metrics(at, "Similarity of A and B")


def test_picking_minilm_shows_source_licence_boxes_pieces_and_similarity():
    at = start_minilm()
    assert not at.error and not at.warning
    facts = "\n".join(t.value for t in at.text)
    assert pretrained.SOURCE in facts and f"Licence: {pretrained.LICENCE}" in facts
    assert "12 heads, 6 layers" in facts
    assert at.text_input(key="sequence").value == PARAPHRASE[0]
    assert at.text_input(key="sentence_b").value == PARAPHRASE[1]
    model, tokenizer = pretrained.load_minilm()
    assert pieces(at) == list(tokenizer.encode(PARAPHRASE[0]).pieces)
    assert pieces(at)[0] == "[CLS]" and pieces(at)[-1] == "[SEP]"
    captions = " ".join(messages(at, "caption"))
    assert "[CLS] and [SEP] are not typed" in captions
    want = expected_similarity(*PARAPHRASE)
    assert metric_number(at, "Similarity of A and B") == pytest.approx(want.learned, abs=5e-4)
    assert not metrics(at, "Similarity, switched")  # nothing switched yet


def test_the_paraphrase_pair_is_more_alike_than_the_unrelated_pair():
    at = start_minilm()
    at.button(key="example_0").click().run()
    assert at.text_input(key="sentence_b").value == PARAPHRASE[1]
    paraphrase = metric_number(at, "Similarity of A and B")
    at.button(key="example_1").click().run()
    assert not at.exception
    assert at.text_input(key="sentence_b").value == UNRELATED[1]
    unrelated = metric_number(at, "Similarity of A and B")
    assert paraphrase > unrelated + 0.3, (paraphrase, unrelated)


def test_typing_sentence_b_changes_the_similarity_and_not_the_pieces():
    at = start_minilm()
    before, shown_pieces = metric_number(at, "Similarity of A and B"), pieces(at)
    set_text(at, "sentence_b", "Interest rates rose again this quarter.")
    after = metric_number(at, "Similarity of A and B")
    assert after != before and pieces(at) == shown_pieces
    want = expected_similarity(PARAPHRASE[0], "Interest rates rose again this quarter.")
    assert after == pytest.approx(want.learned, abs=5e-4)


# ---- the switches ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scope, layer", [(EVERY_LAYER, None), (2, 2)], ids=["all-layers", "one-layer"]
)
def test_w_o_off_changes_the_switched_similarity_and_not_the_learned_one(scope, layer):
    at = start_minilm()
    learned = metric_number(at, "Similarity of A and B")
    at.selectbox(key="w_o_scope").set_value(scope)
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    assert metric_number(at, "Similarity, learned W_o") == learned
    switched = metric_number(at, "Similarity, switched")
    want = expected_similarity(*PARAPHRASE, switches("identity", layer))
    assert switched == pytest.approx(want.switched, abs=5e-4)
    assert abs(want.switched - want.learned) > 1e-3  # the switch really moves it
    moved = [float(v) for v in metrics(at, "Embedding of A: cosine to learned")]
    assert moved == [pytest.approx(want.moved[0], abs=5e-4)] and moved[0] < 0.999
    where = "all layers" if layer is None else f"layer {layer}"
    assert any(f"W_o off (identity) in {where}" in c for c in messages(at, "caption"))
    # The table of word-pieces is sentence A's either way.
    assert pieces(at)[0] == "[CLS]"


def test_ablating_a_head_changes_the_switched_similarity():
    at = start_minilm()
    at.multiselect(key="ablate").set_value(["L0H3", "L1H5"]).run()
    assert not at.exception
    want = expected_similarity(*PARAPHRASE, switches("learned", None, [(0, 3), (1, 5)]))
    assert metric_number(at, "Similarity, switched") == pytest.approx(want.switched, abs=5e-4)
    assert metric_number(at, "Similarity, learned W_o") == pytest.approx(want.learned, abs=5e-4)
    assert want.moved[0] < 1 - 1e-5  # the embedding moved
    assert any("zeroed L0H3, L1H5" in c for c in messages(at, "caption"))


# ---- every tab ------------------------------------------------------------------------------


def grid_titles(at: AppTest) -> list[str]:
    """The block titles of the Attention tab's charts, in order (the heads' columns)."""
    return [title for chart in charts(at) for title in plots.block_titles(chart)]


def test_attention_shows_one_layer_of_twelve_heads_with_a_layer_picker():
    at = start_minilm("Attention")
    titles = grid_titles(at)
    assert [t for t in titles if t.startswith("L0 ")] == [f"L0 H{h}" for h in range(12)] + [
        "L0 mean"
    ]
    assert not any(t.startswith("L1 ") for t in titles)
    # One figure of the layer's blocks, which the page lays out three to a row (one under the
    # other on a phone), every one labelled.
    assert len(charts(at)) == 1
    _, tokenizer = pretrained.load_minilm()
    labels = list(pretrained.SentenceTask(tokenizer).labels(PARAPHRASE[0]))  # "a (1)", "a (5)"
    for column in charts(at):
        assert column["layout"]["xaxis"]["ticktext"] == labels
    at.selectbox(key="attn_grid_layer").set_value(4).run()
    assert not at.exception
    titles = grid_titles(at)
    assert "L4 H11" in titles and "L0 H0" not in titles
    labels = charts(at)[0]["layout"]["yaxis"]["ticktext"]
    assert labels[0] == "[CLS]" and labels[-1] == "[SEP]"
    assert len(labels) % len(pieces(at)) == 0


def test_a_long_input_shows_a_window_of_squares_the_whole_layer_and_a_ranked_list():
    """Issue 19: a long input stays readable. The squares show a window of the word-pieces
    (attention.WINDOW at first, moved with a slider), the layer's mean is one map of every
    word-piece, and the keys one token attends to most are listed, strongest first."""
    words = "the man reads a book near the river with a small dog and sings".split()
    text = " ".join(words * 6)  # 84 words, each one word-piece: 86 with [CLS] and [SEP]
    at = start_minilm("Attention")
    set_text(at, "sequence", text)
    T = len(pieces(at))
    assert T == 86 > attention.LONG_PIECES
    squares = [c for c in charts(at) if c["layout"]["xaxis"].get("ticktext")][:3]
    assert all(len(c["layout"]["xaxis"]["ticktext"]) <= attention.WINDOW for c in squares)
    assert len(charts(at)) == 1  # the whole map waits for its toggle (a keystroke's cost)
    at.toggle(key="attn_whole").set_value(True).run()
    (whole,) = [c for c in charts(at) if c["layout"]["title"]["text"].startswith("Layer 0, mean")]
    model, tokenizer = pretrained.load_minilm()
    task = pretrained.SentenceTask(tokenizer)
    tr = run_trace(model, task, text)
    mean = tr.attn[0].mean(0)
    np.testing.assert_allclose(array(whole["data"][0]["z"]).reshape(T, T), mean, atol=1e-5)
    at.selectbox(key="attn_rank_query").set_value(40).run()
    (table,) = at.dataframe
    keys = list(table.value.iloc[:, 1])  # positions, strongest first
    assert keys == [j for j, _ in analysis.ranked_keys(mean, 40, attention.RANKED)]
    at.selectbox(key="attn_rank_head").set_value(3).run()  # one head instead of the mean
    keys = list(at.dataframe[0].value.iloc[:, 1])
    assert keys == [j for j, _ in analysis.ranked_keys(tr.attn[0, 3], 40, attention.RANKED)]
    at.select_slider(key="attn_zoom").set_value((50, 70)).run()
    assert not at.exception
    squares = [c for c in charts(at) if c["layout"]["xaxis"].get("ticktext")][:3]
    assert squares[0]["layout"]["xaxis"]["ticktext"][0] == tr.labels[50]
    set_text(at, "sequence", "A short sentence.")  # the window and the query no longer fit
    assert not any(c["layout"]["title"]["text"].startswith("Layer 0, mean") for c in charts(at))


def test_before_after_w_o_on_minilm_adds_up_and_w_o_off_makes_them_equal():
    at = start_minilm("Before/after W_o")
    assert len(charts(at)) >= 4
    check = [m for m in at.metric if m.label.startswith("max |")][0]
    assert float(check.value) < 1e-4  # per-head terms + b_o == attn_out, on the real model
    cosine = [f for f in charts(at) if f["data"][0]["type"] == "bar"][0]
    assert array(cosine["data"][0]["y"]).min() < 0.99  # MiniLM's learned W_o turns vectors
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    figures = charts(at)
    cosine = [f for f in figures if f["data"][0]["type"] == "bar"][0]
    np.testing.assert_allclose(array(cosine["data"][0]["y"]), 1.0, atol=1e-5)
    concat, attn_out = (array(f["data"][0]["z"]) for f in figures[:2])
    np.testing.assert_array_equal(concat, attn_out)  # identity mode: attn_out is concat


def test_w_o_off_tab_compares_the_similarity_learned_and_switched():
    at = start_minilm("W_o off: compare")
    assert any("Nothing is switched" in i for i in messages(at, "info"))
    at.radio(key="w_o_mode").set_value("zero").run()
    assert not at.exception and not at.error
    # Above the tabs and in the tab: the same learned and switched similarity.
    learned, switched = (
        metrics(at, "Similarity, learned W_o"),
        metrics(at, "Similarity, switched"),
    )
    assert len(learned) == 2 and len(set(learned)) == 1
    assert len(switched) == 2 and len(set(switched)) == 1
    want = expected_similarity(*PARAPHRASE, switches("zero"))
    assert float(switched[0]) == pytest.approx(want.switched, abs=5e-4)
    titles = [f["layout"].get("title", {}).get("text", "") for f in charts(at)]
    assert "Residual stream after each layer" in titles
    assert not any("256 random examples" in m.label for m in at.metric)  # no toy accuracy


@pytest.mark.parametrize("tab", ["Train", "Does W_o matter?"])
def test_training_tabs_say_why_they_do_not_apply(tab):
    at = start_minilm(tab)
    assert not at.error
    infos = messages(at, "info")
    assert any(f"is not shown for {pretrained.NAME}" in i and "toy model" in i for i in infos)


def test_every_tab_opens_on_minilm_with_w_o_off():
    at = start_minilm()
    at.radio(key="w_o_mode").set_value("identity").run()
    labels = [tab.label for tab in at.tabs]
    assert {"Attention", "Before/after W_o", "W_o off: compare", "Analysis"} <= set(labels)
    for label in labels:
        at.session_state["view"] = label
        at.run()
        assert not at.exception, (label, at.exception)
        assert not at.error, (label, [e.value for e in at.error])


@pytest.mark.parametrize(
    "section, draws",
    [
        ("Norm-based attention", True),
        ("Attention rollout", True),
        ("Head importance", False),
        ("Ablate before vs after W_o", False),
        ("OV circuits", True),
        ("How W_o mixes heads", True),
    ],
)
def test_analysis_sections_draw_or_say_why_not(section, draws):
    at = start_minilm("Analysis")
    at.segmented_control(key="analysis_section").set_value(section).run()
    assert not at.exception and not at.error
    if draws:
        assert charts(at), f"{section} drew no chart"
    else:
        assert any(f"is not shown for {pretrained.NAME}" in i for i in messages(at, "info"))
    if section == "How W_o mixes heads":  # from the weights: one number per layer of MiniLM
        mixing = [m for m in at.metric if m.label.startswith("Mixing number L")]
        assert [m.label for m in mixing] == [f"Mixing number L{lay}" for lay in range(6)]
        assert all(0.0 <= float(m.value) <= 1.0 for m in mixing)


# ---- hostile input in either box ------------------------------------------------------------

# Within the sentence box's limit (5,000 characters), and far past MiniLM's 256 word-pieces.
LONG = ("The quick brown fox jumps over the lazy dog. " * 250)[:4_500]
CUT = pretrained.MAX_PIECES - 2  # the last word-piece read: MiniLM's own limit less [CLS], [SEP]


@pytest.mark.parametrize("box, name", [("sequence", "A"), ("sentence_b", "B")])
@pytest.mark.parametrize(
    "text", ["", "   ", "\x00\x07\x1b"], ids=["empty", "spaces", "control-only"]
)
def test_a_box_with_no_word_pieces_says_so(box, name, text):
    at = set_text(start_minilm(), box, text)
    errors = messages(at, "error")
    assert len(errors) == 1 and errors[0].startswith(f"Sentence {name}: ")
    assert "no word-pieces" in errors[0]
    assert not metrics(at, "Similarity of A and B")  # nothing to compare
    if box == "sequence":  # nothing to trace: no word-pieces and no chart, the tab says why
        assert not at.code and not charts(at)
        assert any("Type a valid sequence" in i for i in messages(at, "info"))
    else:  # sentence A is still traced
        assert pieces(at)[0] == "[CLS]" and charts(at)


@pytest.mark.parametrize("box, name", [("sequence", "A"), ("sentence_b", "B")])
def test_a_text_past_the_word_piece_limit_is_cut_with_a_warning_saying_where(box, name):
    at = set_text(start_minilm("Attention"), box, LONG)
    if box == "sequence":  # sentence A is long: its whole map is a toggle away
        at.toggle(key="attn_whole").set_value(True).run()
    assert not at.error
    warnings = messages(at, "warning")
    assert len(warnings) == 1
    cut = warnings[0]
    assert cut.startswith(f"Sentence {name}: ") and f"cut after word-piece {CUT}" in cut
    assert "of 4500" in cut or "of 4,500" in cut
    similarity = metric_number(at, "Similarity of A and B")
    text_a, text_b = (LONG, PARAPHRASE[1]) if box == "sequence" else (PARAPHRASE[0], LONG)
    assert similarity == pytest.approx(expected_similarity(text_a, text_b).learned, abs=5e-4)
    if box == "sequence":
        assert len(pieces(at)) == pretrained.MAX_PIECES
        # Every word-piece has its row and column in the layer's whole map (its labels are
        # thinned to stay readable); the squares show a window of them.
        (whole,) = [c for c in charts(at) if c["layout"]["title"]["text"].startswith("Layer 0,")]
        z = whole["data"][0]["z"]  # plotly's binary form: "rows, columns"
        assert z["shape"] == f"{pretrained.MAX_PIECES}, {pretrained.MAX_PIECES}"


@pytest.mark.parametrize("box, name", [("sequence", "A"), ("sentence_b", "B")])
@pytest.mark.parametrize(
    "text, note",
    [
        ("I love pizza 🍕🎉", "[UNK]"),
        ("hello\x07 wor\x00ld \x1b[31mred", None),
        ("我喜欢弹吉他。", "[UNK]"),  # many Chinese characters are not in its vocabulary
        ("before [SEP] after", "read as plain characters"),
    ],
    ids=["emoji", "control-chars", "chinese", "typed-sep"],
)
def test_odd_text_runs_with_a_note_where_needed(box, name, text, note):
    at = set_text(start_minilm(), box, text)
    assert not at.error and not at.warning
    infos = messages(at, "info")
    if note is None:
        assert not infos
    else:
        assert any(i.startswith(f"Sentence {name}: ") and note in i for i in infos), infos
    text_a, text_b = (text, PARAPHRASE[1]) if box == "sequence" else (PARAPHRASE[0], text)
    want = expected_similarity(text_a, text_b)
    assert metric_number(at, "Similarity of A and B") == pytest.approx(want.learned, abs=5e-4)
    shown_pieces = pieces(at)
    # Only the frame is special: a typed [SEP] is brackets and letters.
    assert shown_pieces.count("[SEP]") == 1 and shown_pieces[-1] == "[SEP]"
    assert shown_pieces.count("[CLS]") == 1 and shown_pieces[0] == "[CLS]"
    if box == "sequence" and text.startswith("我"):
        assert len(shown_pieces) > 3  # one piece per Chinese character


def test_minilm_speaks_chinese():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = "zh"  # a link carrying ?lang=zh
    at.run()
    at.selectbox(key="model").set_value(MINILM).run()
    assert not at.exception
    assert at.text_input(key="sequence").label == translate("zh", "minilm.sentence_a")
    assert metrics(at, translate("zh", "minilm.similarity"))
    set_text(at, "sequence", LONG)
    cut = [w for w in messages(at, "warning") if w.startswith("句子 A：")]
    assert len(cut) == 1 and str(CUT) in cut[0] and "4500" in cut[0]
    set_text(at, "sequence", "")
    assert [e for e in messages(at, "error") if e.startswith("句子 A：")]


def test_a_sentence_without_word_pieces_is_explained_in_chinese():
    at = start_app(model=MINILM, lang="zh")
    at.text_input(key="sentence_b").set_value("\u200b \u0301").run()  # invisible and an accent
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(translate("zh", "input.no_pieces") in e for e in errors), errors
