"""The toy models' Attention page loads no plotly.js on its first view (issue 31).

Streamlit fetches its plotly chunk (PlotlyChart.*.js, ~4.7 MB, half the page's JavaScript) the
first time a plotly chart is drawn. The Attention view draws its grid on a canvas
(tfviz.ui.widgets.canvas_charts) and app.first_paint sends it no plotly warm-up, so a page
opened on it must not fetch the chunk, nor its enlarged head (a canvas chart too); a view whose
charts need plotly (Before/after W_o) still gets it, which shows that the check sees the chunk
when it comes.

The server and the browser are tests/browser/test_browser.py's (its fixtures and skip rules).
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import PLOT, rerun
from tests.conftest import opened_app

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

DESKTOP = {"width": 1400, "height": 1000}
# The scripts the page fetched: [address, bytes].
SCRIPTS_JS = """
() => performance.getEntriesByType('resource')
    .filter((e) => e.name.split('?')[0].endsWith('.js'))
    .map((e) => [e.name, e.decodedBodySize])
"""


CHUNK = "/PlotlyChart."  # Streamlit's plotly chunk: static/js/PlotlyChart.<hash>.js


def plotly_chunks(page) -> list[str]:
    return [name for name, _ in page.evaluate(SCRIPTS_JS) if CHUNK in name]


def test_the_toy_attention_page_fetches_plotly_only_when_a_chart_needs_it(browser, server):
    with opened_app(browser, f"{server}/?view=attention", DESKTOP) as page:
        # The grid's heads and means (tfviz.ui.heads), each on a canvas: reverse's 2 layers of
        # 4 heads and their mean.
        drawn = page.locator(".st-key-attention_grid .tfviz-chart[data-drawn]").count()
        assert drawn == 2 * (4 + 1)
        assert page.locator(PLOT).count() == 0
        page.wait_for_timeout(500)  # a fetch the first view started is recorded by now
        assert plotly_chunks(page) == [], "the first view fetched Streamlit's plotly chunk"
        # The canvas grid hovers: query, key, head and weight, one cell's.
        grid = page.locator(".st-key-attention_grid .tfviz-chart canvas").first
        x, y = page.evaluate(
            """() => tfvizChart.cellAt(
                document.querySelector('.st-key-attention_grid .tfviz-chart'), 0, 0, 0)"""
        )
        grid.hover(position={"x": x, "y": y})
        hover = page.locator(".st-key-attention_grid .tfviz-hover").first
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector("
            "'.st-key-attention_grid .tfviz-hover')).display !== 'none'"
        )
        assert len(hover.inner_text().strip().splitlines()) >= 3, hover.inner_text()

        # The enlarged head is a canvas chart too (zoomable: tfviz.plots.attention_map).
        enlarged = "() => document.querySelector('.st-key-attention_head [data-drawn]') !== null"
        rerun(page, page.get_by_text("Enlarge one head", exact=True).click, enlarged)
        page.wait_for_timeout(500)
        assert plotly_chunks(page) == [], "the enlarged head fetched Streamlit's plotly chunk"
        # A view whose charts are plotly's gets the chunk: the check sees it when it comes.
        shared.open_tab(page, "Before/after W_o")
        page.wait_for_selector(f"{PLOT} .main-svg")
        # A fetch's entry is recorded a moment after the fetch ends.
        page.wait_for_function(f"() => ({SCRIPTS_JS})().some(([name]) => name.includes('{CHUNK}'))")
