"""The standalone web page (tfviz.plots.standalone) and its download button (tfviz.ui.standalone).

The page must open with no server and no network: its drawing code inlined exactly once however
many charts (standalone.js for the figures it draws, which are all the exported views', else
plotly.js), nothing to fetch (no src or href to http), and a user's text inert. The browser
half, with the network blocked, is tests/browser/test_browser_standalone.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import plotly.graph_objects as go
import plotly.offline
import pytest

from tests.conftest import start_app
from tfviz import get_task, lessons, load_checkpoint, plots
from tfviz.core.trace import cosine_per_token, run_trace
from tfviz.hf import pretrained
from tfviz.plots import standalone
from tfviz.ui import heads
from tfviz.ui.i18n import translate
from tfviz.ui.standalone import build_page
from tfviz.ui.views import attention, w_o_off
from tfviz.ui.widgets import plot_words

LABEL = "standalone.button"
HOSTILE = "<img src=x onerror=alert(1)>"
# An attribute that makes the browser fetch something, or a link away from the page.
FETCHING = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def trace():
    model, meta = load_checkpoint("models/reverse.safetensors")
    return run_trace(model, get_task(meta.task), "abcdef")


def sample_figures(trace) -> list:
    grid = plots.attention_grid(trace.attn, trace.labels, [0, 1], title="grid", with_mean=True)
    head = plots.attention_map(trace.attn[0, 1], trace.labels, title="L0 H1")
    concat = plots.activation_map(trace.concat[0], trace.labels, n_heads=trace.n_heads)
    return [("the grid", grid), ("one head", head), ("concat", concat)]


def body(html_text: str) -> str:
    """The page without its inlined drawing code (plotly.js holds URL strings it never
    fetches), which must be there exactly once."""
    for js in (plotly.offline.get_plotlyjs(), standalone.chart_js()):
        if js in html_text:
            assert html_text.count(js) == 1
            return html_text.replace(js, "")
    raise AssertionError("the page holds neither plotly.js nor standalone.js")


def plotted(html_text: str) -> list[dict]:
    """The data of every Plotly.newPlot call in the page, in order."""
    calls = re.findall(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*\{', body(html_text))
    return [{"id": div, "data": json.loads(data)} for div, data in calls]


def standalone_charts(html_text: str) -> list[dict]:
    """The id and figure of every standalone.js chart in the page, in order."""
    calls = re.findall(r'tfvizChart\("([^"]+)",(.*?)\)</script>', body(html_text))
    return [{"id": div, "figure": json.loads(figure)} for div, figure in calls]


def exported(trace) -> list[tuple[str, go.Figure]]:
    """Every kind of chart a view's web page holds: Attention's grid, a layer's columns (as
    MiniLM shows it) and an enlarged head; Before/after W_o's six; lesson step 1's maps."""
    out = attention.exported_figures(trace, None, (0, 1), caption="grid")
    out += attention.exported_figures(trace, 1, None, caption="L1")
    ex = lessons.two_head_example()
    out += [
        ("concat", plots.activation_map(trace.concat[0], trace.labels, n_heads=trace.n_heads)),
        ("attn_out", plots.activation_map(trace.attn_out[0], trace.labels)),
        (
            "cos",
            plots.cosine_bars(cosine_per_token(trace.concat[0], trace.attn_out[0]), trace.labels),
        ),
        ("pair", plots.dependency_pair(ex.dependency_identity, ex.dependency, titles=("a", "b"))),
    ]
    out += w_o_off_figures(trace)
    return out


def w_o_off_figures(trace, layers=(1,)) -> list[tuple[str, go.Figure]]:
    """The W_o off view's page: layer 0's W_o switched off, against the learned model."""
    model, meta = load_checkpoint("models/reverse.safetensors")
    switched = run_trace(model, get_task(meta.task), "abcdef", w_o=[(0, "identity")])
    names = ("learned W_o", "switched")
    return w_o_off.exported_figures(
        trace, switched, list(layers), names, captions=("later", "drift"), words=plot_words("en")
    )


def test_plotly_js_is_inlined_once_for_several_figures(trace):
    page = standalone.page("T", sample_figures(trace), {"Model": "reverse"}, use_plotly=True)
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert page.count("<script") == 1 + len(sample_figures(trace))  # plotly.js, then one per figure


def test_the_exported_views_are_drawn_by_standalone_js_inlined_once(trace):
    page = standalone.page("T", sample_figures(trace), {"Model": "reverse"})
    assert plotly.offline.get_plotlyjs() not in page
    assert page.count(standalone.chart_js()) == 1
    assert page.count("<script") == 1 + len(sample_figures(trace))
    assert len(page) < 200_000  # against ~4.8 MB with plotly.js


def test_a_figure_standalone_js_does_not_draw_sends_the_page_to_plotly_js(trace):
    pie = go.Figure(go.Pie(values=[1, 2]))
    page = standalone.page("T", sample_figures(trace)[:1] + [("pie", pie)], {})
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert len(plotted(page)) == 2 and not standalone_charts(page)


@pytest.mark.parametrize("use_plotly", [False, True])
def test_nothing_in_the_page_is_fetched_from_elsewhere(trace, use_plotly):
    page = body(
        standalone.page("T", sample_figures(trace), {"Model": "reverse"}, use_plotly=use_plotly)
    )
    assert not FETCHING.findall(page)
    assert "mathjax" not in page.lower()
    assert "http" not in page  # not even a link: a class offline cannot follow one


def test_every_figure_and_its_caption_is_in_the_page(trace):
    shown = sample_figures(trace)
    page = standalone.page("T", shown, {}, use_plotly=True)
    calls = plotted(page)
    assert [c["id"] for c in calls] == [f"tfviz-chart-{i}" for i in range(len(shown))]
    assert [len(c["data"]) for c in calls] == [len(f.data) for _, f in shown]
    for caption, _ in shown:
        assert f"<figcaption>{caption}</figcaption>" in page
    assert '"responsive": true' in page and '"displaylogo": false' in page


def test_facts_are_shown_and_a_user_s_text_is_inert(trace):
    facts = {"Model": f"upload {HOSTILE}", "Sequence": HOSTILE, "W_o": "identity"}
    page = body(
        standalone.page(f"title {HOSTILE}", [(HOSTILE, sample_figures(trace)[0][1])], facts)
    )
    assert "<img" not in page
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    assert page.count(escaped) == 5  # <title>, <h1>, model, sequence, caption
    assert "<dt>W_o</dt><dd>identity</dd>" in page


def test_the_attention_view_s_figures_are_put_in_the_page_s_language(trace):
    exported = attention.exported_figures(trace, None, (1, 2), "Raster", plot_words("zh"))
    assert [caption for caption, _ in exported] == ["Raster", "L1 H2"]
    page = build_page("T", lambda: exported, {}, "zh")
    # The view binds the words to the page's language while its script runs; the figures are
    # drawn on click, and the page says "query" in Chinese.
    assert "query %{y}" not in page
    assert translate("zh", "chart.word.query") + " %{y}" in page
    assert len(standalone_charts(page)) == 2


def test_a_many_headed_layer_is_exported_as_the_grid_the_view_shows(trace):
    exported = attention.exported_figures(trace, 1, None, caption="L1")
    assert len(exported) == 1  # one column of heads, a cell per head on the page, row by row
    titles = plots.block_titles(exported[0][1])
    assert titles == [f"L1 H{h}" for h in range(trace.n_heads)] + ["L1 mean"]
    page = build_page("T", exported, {}, "en")
    grid = 'tfvizChart.grid("tfviz-chart-0",[{'
    assert grid in page and f"}}],{heads.HEAD_COLUMNS})</script>" in page
    assert '<div class="tfviz-charts" id="tfviz-chart-0">' in page


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("view", ["app.view.attention", "app.view.w_o", "app.view.lessons"])
def test_the_views_offer_the_page_in_the_student_s_language(view, lang):
    at = start_app(translate(lang, view), lang=lang)
    buttons = [b for b in at.get("download_button") if b.proto.label == translate(lang, LABEL)]
    assert len(buttons) == 1
    assert buttons[0].proto.help == translate(lang, "standalone.help")


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_w_o_off_view_offers_its_page_once_something_is_switched(lang):
    at = start_app(translate(lang, "app.view.w_o_off"), lang=lang)
    labels = [b.proto.label for b in at.get("download_button")]
    assert translate(lang, LABEL) not in labels  # nothing switched: nothing compared
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    buttons = [b for b in at.get("download_button") if b.proto.label == translate(lang, LABEL)]
    assert len(buttons) == 1 and buttons[0].proto.help == translate(lang, "standalone.help")


def test_the_w_o_off_page_holds_both_models_attention_the_residual_stream_and_the_drift(trace):
    shown = w_o_off_figures(trace)
    page = build_page("T", shown, {"W_o": "switched"}, "en")
    charts = standalone_charts(page)
    assert len(charts) == len(shown) == 4  # layer 1 learned and switched, residual, drift
    titles = [c["figure"]["layout"]["title"]["text"] for c in charts[:2]]
    assert titles == ["learned W_o", "switched"]
    # The switch reaches layer 1: its attention differs between the two models' charts.
    z = [json.dumps(c["figure"]["data"][0]["z"], sort_keys=True) for c in charts[:2]]
    assert z[0] != z[1]


def test_another_plotly_bundle_replaces_the_installed_one_and_is_kept_well_formed(trace):
    bundle = "/* a partial bundle */ var s = '</script>';"
    page = standalone.page(
        "T", sample_figures(trace)[:1], {}, plotly_bundle=bundle, use_plotly=True
    )
    assert plotly.offline.get_plotlyjs() not in page
    assert "/* a partial bundle */ var s = '<\\/script>';" in page
    assert page.count("</script>") == 2  # plotly.js's and the figure's: no early end


def test_a_caption_s_markdown_emphasis_is_not_shown_raw(trace):
    page = build_page("T", [("**Look:** the `W_o` map", sample_figures(trace)[0][1])], {}, "en")
    assert "<figcaption>Look: the W_o map</figcaption>" in page


def test_every_chart_the_views_export_is_one_standalone_js_draws(trace):
    for caption, figure in exported(trace):
        assert standalone.unsupported(figure) == [], caption


def test_minilm_s_clipped_w_o_with_its_rings_is_one_standalone_js_draws():
    model, _ = pretrained.load_minilm("cpu")
    W_o = model.layers[0].attn.W_o.weight.detach().numpy()
    figure = plots.w_o_matrix(W_o, model.layers[0].attn.n_heads)
    assert [t.type for t in figure.data][:2] == ["heatmap", "scatter"]  # the clipped cells' rings
    assert standalone.unsupported(figure) == []


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda f: f.update_layout(showlegend=True), "layout.showlegend"),
        (lambda f: f.update_traces(mode="lines", selector=dict(type="scatter")), "scatter.mode"),
        (lambda f: f.update_xaxes(type="log"), "axis.type"),
        (lambda f: f.add_annotation(text="x", showarrow=True), "annotation.showarrow"),
        (
            lambda f: f.update_traces(zsmooth="best", selector=dict(type="heatmap")),
            "heatmap.zsmooth",
        ),
    ],
)
def test_anything_standalone_js_does_not_draw_is_named(trace, change, named):
    figure = go.Figure(sample_figures(trace)[2][1])  # concat: heatmap, titles, shapes
    assert standalone.unsupported(figure) == []
    change(figure)
    assert any(item.startswith(named) for item in standalone.unsupported(figure))


def test_a_figure_s_json_is_its_plotly_json_without_the_theme_and_cannot_end_the_script(trace):
    labels = ["<s>", "</script><img src=x onerror=alert(1)>", "&amp;"]
    attn = np.full((3, 3), 1 / 3, dtype=np.float32)
    figure = plots.attention_map(attn, labels, title="</script>")
    text = standalone.figure_json(figure)
    assert "<" not in text
    data = json.loads(text)
    assert "template" not in data["layout"]
    assert data["data"][0]["x"] == plots.escape_labels(labels)  # plotly's own escaped labels
    page = standalone.page("T", [("c", figure)], {})
    assert page.count("</script>") == 2  # standalone.js's and the chart's
    assert "<img" not in page
