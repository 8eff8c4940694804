"""Chart text in the student's language (issue #10): the words tfviz.plots writes into its
figures itself (axis and colour-bar titles, default titles, legend names, block names, hover
labels) are swapped for the catalogue's by tfviz.ui.common.localize, which chart() calls.

The unit test builds a figure by hand; the coverage test builds every public figure of
tfviz.plots and finds no English word left in Chinese; the app test opens three tabs in Chinese.
"""

from __future__ import annotations

import inspect
import json
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from tests.conftest import start_app
from tfviz import plots
from tfviz.ui.common import localize
from tfviz.ui.i18n import translate

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
    """Every text of a figure (as JSON) that localize is responsible for."""
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
    return [text for text in texts if text]


# ---- localize on a figure built by hand -------------------------------------------------------


def small_figure() -> go.Figure:
    """One heatmap with every kind of text localize handles, in the words tfviz.plots uses."""
    return go.Figure(
        data=[
            dict(
                type="heatmap",
                z=[[0.1, 0.9], [0.5, 0.5]],
                x=["key", "b"],  # data: a token that happens to be a chart word stays a token
                y=["a", "b"],
                name="with W_o",
                coloraxis="coloraxis",
                hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
            )
        ],
        layout=dict(
            title=dict(text="Training loss"),
            xaxis=dict(title=dict(text="output dim (attn_out)")),
            yaxis=dict(title=dict(text="a caller's own title")),
            coloraxis=dict(colorbar=dict(title=dict(text="share"))),
            annotations=[
                dict(text="after L0 from raw attention", x=0, y=0, showarrow=False),
                dict(text="L1 mean", x=1, y=0, showarrow=False),
                dict(text="L1 H2", x=1, y=1, showarrow=False),
            ],
        ),
    )


def test_localize_puts_chinese_in_place_of_the_plots_words_and_keeps_values():
    fig = localize(small_figure(), "zh")
    layout, trace = fig.layout, fig.data[0]
    assert layout.title.text == translate("zh", "chart.title.training_loss") == "训练损失"
    assert layout.xaxis.title.text == "输出维度（attn_out）"
    assert layout.yaxis.title.text == "a caller's own title"  # not a text plots.py writes
    assert layout.coloraxis.colorbar.title.text == "份额"
    # A block's name is translated part by part, a layer number carried into the Chinese order.
    assert [a.text for a in layout.annotations] == ["L0 之后 由原始注意力", "L1 平均", "L1 H2"]
    assert trace.name == "有 W_o"
    assert trace.hovertemplate == "查询 %{y}<br>键 %{x}<br>权重 %{z:.3f}<extra></extra>"
    assert list(trace.x) == ["key", "b"]
    # What Streamlit sends is the changed figure.
    spec = json.loads(fig.to_json())
    assert spec["layout"]["annotations"][1]["text"] == "L1 平均"
    assert spec["data"][0]["hovertemplate"].startswith("查询 %{y}")


def test_localize_leaves_english_and_unknown_labels_unchanged():
    assert localize(small_figure(), "en").to_dict() == small_figure().to_dict()
    fig = small_figure()
    fig.data[0].hovertemplate = "queries %{y}<br>%{x}: %{z}<br>k = %{x}"
    localize(fig, "zh")
    assert fig.data[0].hovertemplate == "queries %{y}<br>%{x}: %{z}<br>k = %{x}"


def test_a_placeholder_stands_for_one_word_so_a_block_name_is_not_swallowed():
    fig = go.Figure(layout=dict(title=dict(text="Each head's term z_h W_o^h at token a&lt;b")))
    fig.add_annotation(text="L3 out learned W_o", showarrow=False)
    localize(fig, "zh")
    assert fig.layout.title.text == "词元 a&lt;b 处每个头的项 z_h W_o^h"
    assert fig.layout.annotations[0].text == "L3 输出 学到的 W_o"


# ---- every figure of tfviz.plots, in Chinese ----------------------------------------------------

RNG = np.random.default_rng(0)
TOKENS = ["a", "b", "c"]  # single letters: a token is data, not a word of the chart


def rand(*shape: int) -> np.ndarray:
    return RNG.random(shape).astype(np.float32)


# Each public figure function with small valid inputs; text a caller must give (legend names,
# choices) is given in Chinese, as the views do; every text with a default keeps its default.
FIGURES = {
    "attention_grid": lambda: plots.attention_grid(rand(2, 2, 3, 3), TOKENS, with_mean=True),
    "attention_map": lambda: plots.attention_map(rand(3, 3), TOKENS),
    "attention_column": lambda: plots.attention_column(rand(3, 3, 3), TOKENS, 0, [0, 1], True),
    "activation_map": lambda: plots.activation_map(rand(3, 4), TOKENS, n_heads=2),
    "w_o_matrix": lambda: plots.w_o_matrix(rand(4, 4), 2),
    "head_contributions": lambda: plots.head_contributions(rand(2, 4), "a"),
    "cosine_bars": lambda: plots.cosine_bars(rand(3), TOKENS),
    "residual_pair": lambda: plots.residual_pair(rand(2, 3, 4), rand(2, 3, 4), TOKENS),
    "drift_bars": lambda: plots.drift_bars(rand(2)),
    "loss_curve": lambda: plots.loss_curve(rand(5) + 0.1, every=10, total_steps=60),
    "norm_attention_grid": lambda: plots.norm_attention_grid(rand(2, 3, 3), rand(3, 3), TOKENS, 1),
    "norm_attention_column": lambda: plots.norm_attention_column(
        rand(2, 3, 3), rand(3, 3), TOKENS, 1, [0, 1], True, 1.0
    ),
    "rollout_grid": lambda: plots.rollout_grid(rand(2, 3, 3), rand(2, 3, 3), TOKENS),
    "head_score_map": lambda: plots.head_score_map(rand(2, 2)),
    "keep_top_k_plot": lambda: plots.keep_top_k_plot(rand(5), 2),
    "ablation_change_bars": lambda: plots.ablation_change_bars(rand(3), rand(3), TOKENS),
    "singular_value_lines": lambda: plots.singular_value_lines(np.sort(rand(2, 2, 3))[..., ::-1]),
    "composition_grid": lambda: plots.composition_grid(
        rand(1, 2, 2), rand(1, 2, 2), rand(1, 2, 2), 0.25
    ),
    "head_shares_map": lambda: plots.head_shares_map(rand(4, 2)),
    "dependency_map": lambda: plots.dependency_map(rand(4, 2)),
    "dependency_pair": lambda: plots.dependency_pair(
        rand(4, 2), rand(4, 2), ("没有 W_o", "有 W_o")
    ),
    "experiment_curves": lambda: plots.experiment_curves(
        np.arange(1, 4), rand(2, 3) + 1, rand(2, 3) + 0.5, rand(2, 3) + 2
    ),
    "mode_sweep_plot": lambda: plots.mode_sweep_plot(
        [1, 2, 4],
        rand(3),
        {"learned": 0.9, "zero": 0.1},
        {"learned": "学到的", "zero": "零", "rank": "秩 k"},
        chosen_k=2,
    ),
    "w_o_spectrum_plot": lambda: plots.w_o_spectrum_plot(rand(2, 4), chosen_k=2),
    "attention_diff_grid": lambda: plots.attention_diff_grid(rand(2, 3, 3) - 0.5, TOKENS, 0),
    "head_change_map": lambda: plots.head_change_map(rand(2, 3), TOKENS),
    "tally_bars": lambda: plots.tally_bars(["会变", "不变"], [3, 1]),
}


# Figures whose every word is given by the caller (legend names, axis titles, choices).
CALLER_WORDS_ONLY = {"mode_sweep_plot", "w_o_spectrum_plot", "tally_bars"}


def test_every_public_figure_function_is_covered():
    public = {
        name
        for name, fn in inspect.getmembers(plots, inspect.isfunction)
        if not name.startswith("_")
        and fn.__module__ == plots.__name__
        and inspect.signature(fn).return_annotation == "go.Figure"
    }
    assert public == set(FIGURES), f"add inputs for {sorted(public - set(FIGURES))}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_english_word_of_plots_is_left_in_chinese(name):
    english = {
        w for text in chart_texts(FIGURES[name]().to_plotly_json()) for w in english_words(text)
    }
    # In English the check finds words (it can fail), except where every word is the caller's.
    assert bool(english) != (name in CALLER_WORDS_ONLY), english
    chinese = localize(FIGURES[name](), "zh")
    left = {text: english_words(text) for text in chart_texts(chinese.to_plotly_json())}
    assert not {text: words for text, words in left.items() if words}, (
        "English plots.py writes with no catalogue key under chart.*"
    )


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
        specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
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
