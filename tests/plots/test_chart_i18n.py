"""Chart text in the student's language (issues #10 and #18): the words tfviz.plots writes into
its figures itself (axis and colour-bar titles, default titles, legend names, block names, hover
labels) come from its `words` argument, a function of a catalogue key under chart.*; the app
passes tfviz.ui.widgets.plot_words(), the catalogue in the student's language.

The unit tests check the English default, that each English chart text is written once (in
en.json, not again in tfviz/plots/) and that a figure's words are exactly the ones asked for; the
coverage test builds every public figure of tfviz.plots in Chinese and finds no English word
left, and every chart.* key used; the app test opens three tabs in Chinese.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import page_figures, start_app
from tfviz import plots
from tfviz.ui.i18n import catalogue, translate
from tfviz.ui.widgets import plot_words

HAN = re.compile(r"[\u4e00-\u9fff]")
# Names written the same in every language: matrices, sites, heads (L0, H1, L0H1), the method,
# a formula's function (cosine(concat, attn_out)) and special tokens (a title may name a token).
TECHNICAL = re.compile(
    r"W_o\^h|W_[oqkv]|attn_out|concat|z_h|d_k|softmax|rollout|[LH]\d+|cosine(?=\()"
    r"|BOS|\[CLS\]|\[SEP\]"
)


def english_words(text: str) -> list[str]:
    """The English words of a chart text once values (%{y:.3f}), HTML tags and entities and
    technical names are taken out; single letters (k, Q, x) are symbols, not words."""
    text = re.sub(r"%\{[^}]*\}|<[^>]*>|&\w+;", " ", text)
    return re.findall(r"[A-Za-z]{2,}", TECHNICAL.sub(" ", text))


def chart_texts(spec: dict) -> list[str]:
    """Every text of a figure (as JSON) that tfviz.plots may word itself."""
    layout = spec["layout"]
    texts = [layout.get("title", {}).get("text", "")]
    for name, part in layout.items():
        if name.startswith(("xaxis", "yaxis")):
            texts.append(part.get("title", {}).get("text", ""))
        elif name.startswith("coloraxis"):
            texts.append(part.get("colorbar", {}).get("title", {}).get("text", ""))
    texts += [a.get("text", "") for a in layout.get("annotations", ())]
    for trace in spec["data"]:
        texts += [trace.get("name", ""), trace.get("hovertemplate", "")]
        if trace.get("mode") == "text":  # the block titles (plots.block_titles)
            texts += list(trace["text"])
    return [text for text in texts if text]


# ---- the words function -----------------------------------------------------------------------

ZH = functools.partial(translate, "zh")


def test_the_english_default_is_the_english_catalogue_s_text():
    assert plots.english("chart.word.query") == catalogue("en")["chart.word.query"] == "query"
    assert plots.english("chart.block.layer_out", layer=3) == "L3 out"
    assert plot_words("zh")("chart.block.layer_out", layer=3) == "L3 输出"
    with pytest.raises(KeyError):  # plots asking for a key the catalogue lacks is a bug
        plots.english("chart.no_such_word")
    with pytest.raises(KeyError):  # ... and so is a placeholder left unfilled
        plots.english("chart.block.layer_out")


def test_each_english_chart_text_is_written_once_in_the_catalogue_not_again_in_plots():
    """tfviz.plots asks for its words by key; a literal copy of a catalogue text in any of its
    modules would be a second place to change (and the Chinese page would not follow it)."""
    modules = sorted(Path(plots.__file__).parent.glob("*.py"))
    literals = {
        node.value
        for module in modules
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    english = {key: text for key, text in catalogue("en").items() if key.startswith("chart.")}
    # One-word texts are left out: tfviz.plots names a hover label by its key's last part
    # (_hover(words, "query") asks for chart.word.query); the coverage test below checks that
    # a figure drawn in Chinese has none of them.
    copied = {key: text for key, text in english.items() if " " in text and text in literals}
    assert not copied, f"tfviz.plots repeats catalogue texts: {copied}"
    hover_words = {w for text in literals if " %{" in text for w in english_words(text)}
    assert not hover_words, f"hover labels written in tfviz.plots: {hover_words}"


def test_a_figure_s_own_words_are_the_ones_its_words_function_gives():
    asked: list[str] = []

    def marked(key: str, **values) -> str:
        asked.append(key)
        return f"«{key.split('.')[-1]}{''.join(map(str, values.values()))}»"

    fig = plots.residual_pair(rand(2, 3, 4), rand(2, 3, 4), TOKENS, words=marked)
    assert fig.layout.title.text == "«residual_stream»"
    assert fig.data[0].hovertemplate.startswith("«token» %{y}<br>«dim» %{x}<br>«value» %{z")
    assert plots.block_titles(fig)[:2] == ["«layer_out0» «learned_w_o»", "«layer_out0» «switched»"]
    assert fig.data[0].y[0] == "«layer_out0» a"  # the hover's cell names are worded too
    assert all(key.startswith(plots.CHART_KEYS) for key in asked)
    # Text a caller gives is shown as given: no words asked for it.
    asked.clear()
    named = plots.residual_pair(rand(2, 3, 4), rand(2, 3, 4), TOKENS, ("学到的", "切换"), words=ZH)
    assert plots.block_titles(named)[:2] == ["L0 输出 学到的", "L0 输出 切换"]
    titled = plots.attention_map(rand(3, 3), TOKENS, title="a caller's title", words=marked)
    assert titled.layout.title.text == "a caller's title"
    assert titled.data[0].hovertemplate.startswith("«query» %{y}<br>«key» %{x}<br>«weight»")


# ---- every figure of tfviz.plots, in Chinese ----------------------------------------------------

RNG = np.random.default_rng(0)
TOKENS = ["a", "b", "c"]  # single letters: a token is data, not a word of the chart


def rand(*shape: int) -> np.ndarray:
    return RNG.random(shape).astype(np.float32)


# Each public figure function with small valid inputs, drawn in the words given; text a caller
# must give (legend names, choices) is given in Chinese, as the views do; every text with a
# default keeps its default. Outliers in the signed maps make them ring the clipped cells (whose
# hover line is a word too).
SPIKED = np.where(np.arange(256) == 9, 10.0, np.linspace(-1.0, 1.0, 256)).astype(np.float32)
FIGURES = {
    "attention_grid": lambda w: plots.attention_grid(
        rand(2, 2, 3, 3), TOKENS, with_mean=True, words=w
    ),
    "attention_map": lambda w: plots.attention_map(rand(3, 3), TOKENS, words=w, scale=plots.FITTED),
    "attention_grid_column": lambda w: plots.attention_grid_column(
        rand(2, 3, 3, 3), TOKENS, [0, 1], [0, 1], True, words=w, scale=plots.LOG
    ),
    "attention_column": lambda w: plots.attention_column(
        rand(3, 3, 3), TOKENS, 0, [0, 1], True, words=w
    ),
    "activation_map": lambda w: plots.activation_map(
        np.stack([SPIKED] * 3), TOKENS, n_heads=2, words=w
    ),
    "w_o_matrix": lambda w: plots.w_o_matrix(rand(4, 4), 2, words=w),
    "head_contributions": lambda w: plots.head_contributions(rand(2, 4), "a", words=w),
    "cosine_bars": lambda w: plots.cosine_bars(rand(3), TOKENS, words=w),
    "residual_pair": lambda w: plots.residual_pair(
        np.stack([np.stack([SPIKED] * 3)] * 2), rand(2, 3, 256), TOKENS, words=w
    ),
    "drift_bars": lambda w: plots.drift_bars(rand(2), words=w),
    "loss_curve": lambda w: plots.loss_curve(rand(5) + 0.1, every=10, total_steps=60, words=w),
    "norm_attention_grid": lambda w: plots.norm_attention_grid(
        rand(2, 3, 3), rand(3, 3), TOKENS, 1, words=w
    ),
    "norm_attention_column": lambda w: plots.norm_attention_column(
        rand(2, 3, 3), rand(3, 3), TOKENS, 1, [0, 1], True, 1.0, words=w
    ),
    "rollout_grid": lambda w: plots.rollout_grid(rand(2, 3, 3), rand(2, 3, 3), TOKENS, words=w),
    "head_score_map": lambda w: plots.head_score_map(rand(2, 2), words=w),
    "keep_top_k_plot": lambda w: plots.keep_top_k_plot(rand(5), 2, words=w),
    "ablation_change_bars": lambda w: plots.ablation_change_bars(rand(3), rand(3), TOKENS, words=w),
    "singular_value_lines": lambda w: plots.singular_value_lines(
        np.sort(rand(2, 2, 3))[..., ::-1], words=w
    ),
    "composition_grid": lambda w: plots.composition_grid(
        rand(1, 2, 2), rand(1, 2, 2), rand(1, 2, 2), 0.25, words=w
    ),
    "head_shares_map": lambda w: plots.head_shares_map(rand(4, 2), words=w),
    "dependency_map": lambda w: plots.dependency_map(rand(4, 2), words=w),
    "dependency_pair": lambda w: plots.dependency_pair(
        rand(4, 2), rand(4, 2), ("没有 W_o", "有 W_o"), words=w
    ),
    "experiment_curves": lambda w: plots.experiment_curves(
        np.arange(1, 4), rand(2, 3) + 1, rand(2, 3) + 0.5, rand(2, 3) + 2, words=w
    ),
    "mode_sweep_plot": lambda w: plots.mode_sweep_plot(
        [1, 2, 4],
        rand(3),
        {"learned": 0.9, "zero": 0.1},
        {"learned": "学到的", "zero": "零", "rank": "秩 k"},
        chosen_k=2,
    ),
    "w_o_spectrum_plot": lambda w: plots.w_o_spectrum_plot(rand(2, 4), chosen_k=2),
    "attention_diff_grid": lambda w: plots.attention_diff_grid(
        rand(2, 3, 3) - 0.5, TOKENS, 0, words=w
    ),
    "head_change_map": lambda w: plots.head_change_map(rand(2, 3), TOKENS, words=w),
    "tally_bars": lambda w: plots.tally_bars(["会变", "不变"], [3, 1]),
    "query_key_map": lambda w: plots.query_key_map(rand(4), rand(3, 4) - 0.5, TOKENS, 1, words=w),
    "product_map": lambda w: plots.product_map(
        rand(3, 4) - 0.5, TOKENS, np.array([False, False, True]), words=w
    ),
    "score_bars": lambda w: plots.score_bars(
        rand(3), np.array([0.1, 0.2, -np.inf]), rand(3), TOKENS, np.array([0, 0, 1], bool), words=w
    ),
    "head_share_flow": lambda w: plots.head_share_flow(rand(2, 3), rand(2, 3), words=w),
    "head_share_tokens": lambda w: plots.head_share_tokens(rand(2, 3), TOKENS, words=w),
    "induction_losses": lambda w: plots.induction_losses(
        {"学到的 W_o": rand(7), "恒等映射": rand(7)}, 4, words=w
    ),
    "weight_pair": lambda w: plots.weight_pair(
        rand(2, 3), rand(2, 3), ("学到的", "换基之后"), words=w
    ),
    "angle_map": lambda w: plots.angle_map(rand(3, 3) * 90, words=w),
    "lens_map": lambda w: plots.lens_map(
        np.array([TOKENS, TOKENS]), rand(2, 3), ["L0", "L1"], TOKENS, words=w
    ),
}


# Figures whose every word is given by the caller (legend names, axis titles, choices).
CALLER_WORDS_ONLY = {"mode_sweep_plot", "w_o_spectrum_plot", "tally_bars"}


def test_every_public_figure_function_is_covered():
    public = {
        name
        for name, fn in inspect.getmembers(plots, inspect.isfunction)
        if not name.startswith("_")
        and fn.__module__.startswith(plots.__name__ + ".")  # defined in one of its modules
        and inspect.signature(fn).return_annotation == "go.Figure"
    }
    assert public == set(FIGURES), f"add inputs for {sorted(public - set(FIGURES))}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_english_word_of_plots_is_left_in_chinese(name):
    english = {
        w
        for text in chart_texts(FIGURES[name](plots.english).to_plotly_json())
        for w in english_words(text)
    }
    # In English the check finds words (it can fail), except where every word is the caller's.
    assert bool(english) != (name in CALLER_WORDS_ONLY), english
    chinese = FIGURES[name](plot_words("zh"))
    left = {text: english_words(text) for text in chart_texts(chinese.to_plotly_json())}
    assert not {text: words for text, words in left.items() if words}, (
        "English in a figure drawn with Chinese words: tfviz.plots wrote it without asking `words`"
    )


def test_every_chart_key_of_the_catalogue_is_a_word_some_figure_asks_for():
    asked: set[str] = set()

    def recording(key: str, **values) -> str:
        asked.add(key)
        return translate("zh", key, **values)

    for build in FIGURES.values():
        build(recording)
    keys = {key for key in catalogue("en") if key.startswith(plots.CHART_KEYS)}
    assert asked <= keys, f"asked for keys the catalogue lacks: {sorted(asked - keys)}"
    assert keys <= asked, f"catalogue chart keys no figure uses: {sorted(keys - asked)}"


ROOT = Path(__file__).resolve().parents[2]


def test_every_view_passes_the_student_s_words_to_every_figure():
    """A figure drawn without words= is in English on a Chinese page (nothing translates it
    afterwards any more): every call of a tfviz.plots function that takes words passes them."""
    missing: dict[str, list[int]] = {}
    for path in sorted([ROOT / "app.py", *(ROOT / "tfviz" / "ui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "plots"
            ):
                continue
            function = getattr(plots, node.func.attr, None)
            takes_words = callable(function) and "words" in inspect.signature(function).parameters
            if takes_words and not any(k.arg == "words" for k in node.keywords):
                missing.setdefault(str(path.relative_to(ROOT)), []).append(node.lineno)
    assert missing == {}, f"figures drawn without words= (file: lines): {missing}"


def test_the_english_check_finds_english():
    assert english_words("query %{y}<br>权重 %{z:.3f}<extra></extra>") == ["query"]
    assert english_words("L0H1 W_o^h ‖Δ attn_out‖ σ_%{x} = %{y}") == []


# ---- the app in Chinese ------------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_app")
def test_the_attention_and_w_o_tabs_draw_their_charts_in_chinese():
    seen = 0
    for tab in ("app.view.attention", "app.view.w_o", "app.view.w_o_off"):
        at = start_app(translate("zh", tab), lang="zh")
        if tab == "app.view.w_o_off":  # the tab compares only once something is switched
            at.radio(key="w_o_mode").set_value("identity").run()
            assert not at.exception, at.exception
        specs = page_figures(at)  # plotly's and the canvas charts' (the Attention grid)
        assert specs, f"{tab}: no chart drawn"
        for spec in specs:
            layout = spec["layout"]
            titled = [layout.get("title", {}).get("text", "")] + [
                part.get("title", {}).get("text", "")
                for name, part in layout.items()
                if name.startswith(("xaxis", "yaxis"))
            ]
            for text in filter(None, titled):
                assert HAN.search(text) or not english_words(text), f"{tab}: {text!r}"
            left = [text for text in chart_texts(spec) if english_words(text)]
            assert not left, f"{tab}: English left in a chart: {left}"
        seen += len(specs)
    assert seen >= 6  # grid; concat, attn_out, cosine, W_o, terms; and the comparison's charts
