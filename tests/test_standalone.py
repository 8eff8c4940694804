"""The standalone web page (tfviz.standalone) and its download button (tfviz.ui.standalone).

The page must open with no server and no network: plotly.js inlined exactly once however many
charts, nothing to fetch (no src or href to http), and a user's text inert. The browser half,
with the network blocked, is tests/test_browser_standalone.py.
"""

from __future__ import annotations

import json
import re

import plotly.offline
import pytest

from tests.conftest import start_app
from tfviz import get_task, load_checkpoint, plots, standalone
from tfviz.trace import run_trace
from tfviz.ui.i18n import translate
from tfviz.ui.standalone import build_page
from tfviz.ui.views import attention
from tfviz.ui.widgets import plot_words

LABEL = "standalone.button"
HOSTILE = "<img src=x onerror=alert(1)>"
# An attribute that makes the browser fetch something, or a link away from the page.
FETCHING = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def trace():
    model, meta = load_checkpoint("models/reverse.safetensors")
    return run_trace(model, get_task(meta.task), "abcdef")


def figures(trace) -> list:
    grid = plots.attention_grid(trace.attn, trace.labels, [0, 1], title="grid", with_mean=True)
    head = plots.attention_map(trace.attn[0, 1], trace.labels, title="L0 H1")
    concat = plots.activation_map(trace.concat[0], trace.labels, n_heads=trace.n_heads)
    return [("the grid", grid), ("one head", head), ("concat", concat)]


def body(html_text: str) -> str:
    """The page without its inlined plotly.js (whose code holds URL strings it never fetches)."""
    js = plotly.offline.get_plotlyjs()
    assert html_text.count(js) == 1
    return html_text.replace(js, "")


def plotted(html_text: str) -> list[dict]:
    """The data of every Plotly.newPlot call in the page, in order."""
    calls = re.findall(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*\{', body(html_text))
    return [{"id": div, "data": json.loads(data)} for div, data in calls]


def test_plotly_js_is_inlined_once_for_several_figures(trace):
    page = standalone.page("T", figures(trace), {"Model": "reverse"})
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert page.count("<script") == 1 + len(figures(trace))  # plotly.js, then one per figure


def test_nothing_in_the_page_is_fetched_from_elsewhere(trace):
    page = body(standalone.page("T", figures(trace), {"Model": "reverse"}))
    assert not FETCHING.findall(page)
    assert "mathjax" not in page.lower()
    assert "http" not in page  # not even a link: a class offline cannot follow one


def test_every_figure_and_its_caption_is_in_the_page(trace):
    shown = figures(trace)
    page = standalone.page("T", shown, {})
    calls = plotted(page)
    assert [c["id"] for c in calls] == [f"tfviz-chart-{i}" for i in range(len(shown))]
    assert [len(c["data"]) for c in calls] == [len(f.data) for _, f in shown]
    for caption, _ in shown:
        assert f"<figcaption>{caption}</figcaption>" in page
    assert '"responsive": true' in page and '"displaylogo": false' in page


def test_facts_are_shown_and_a_user_s_text_is_inert(trace):
    facts = {"Model": f"upload {HOSTILE}", "Sequence": HOSTILE, "W_o": "identity"}
    page = body(standalone.page(f"title {HOSTILE}", [(HOSTILE, figures(trace)[0][1])], facts))
    assert "<img" not in page
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    assert page.count(escaped) == 5  # <title>, <h1>, model, sequence, caption
    assert "<dt>W_o</dt><dd>identity</dd>" in page


def test_the_attention_view_s_figures_are_put_in_the_page_s_language(trace):
    drawn = attention.exported_figures(trace, None, (1, 2), "Raster", plot_words("zh"))
    assert [caption for caption, _ in drawn] == ["Raster", "L1 H2"]
    page = build_page("T", lambda: drawn, {}, "zh")
    # The view binds the words to the page's language while its script runs; the figures are
    # drawn on click, and the page says "query" in Chinese.
    assert "query %{y}" not in page
    assert translate("zh", "chart.word.query") + " %{y}" in page
    assert len(plotted(page)) == 2


def test_a_many_headed_layer_is_exported_as_the_columns_the_view_shows(trace):
    drawn = attention.exported_figures(trace, 1, None, caption="L1")
    titles = [title for _, f in drawn for title in plots.block_titles(f)]
    assert len(drawn) == min(attention.HEAD_COLUMNS, trace.n_heads + 1)
    assert titles == [f"L1 H{h}" for h in range(trace.n_heads)] + ["L1 mean"]


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("view", ["app.view.attention", "app.view.w_o", "app.view.lessons"])
def test_the_views_offer_the_page_in_the_student_s_language(view, lang):
    at = start_app(translate(lang, view), lang=lang)
    buttons = [b for b in at.get("download_button") if b.proto.label == translate(lang, LABEL)]
    assert len(buttons) == 1
    assert buttons[0].proto.help == translate(lang, "standalone.help")


def test_another_plotly_bundle_replaces_the_installed_one_and_is_kept_well_formed(trace):
    bundle = "/* a partial bundle */ var s = '</script>';"
    page = standalone.page("T", figures(trace)[:1], {}, plotly_bundle=bundle)
    assert plotly.offline.get_plotlyjs() not in page
    assert "/* a partial bundle */ var s = '<\\/script>';" in page
    assert page.count("</script>") == 2  # plotly.js's and the figure's: no early end


def test_a_caption_s_markdown_emphasis_is_not_shown_raw(trace):
    page = build_page("T", [("**Look:** the `W_o` map", figures(trace)[0][1])], {}, "en")
    assert "<figcaption>Look: the W_o map</figcaption>" in page
