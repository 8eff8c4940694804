"""Browser test of the "Take W_o apart" tab in a real Chromium: the mode chart drawn, a mode
switched in the sidebar, and the chart redrawn for one layer.

The server, browser and page fixtures and the waiting helpers are tests/browser/test_browser.py's
(imported, so every browser test starts and drives the app the same way; like there, the test is
skipped without Chromium except under CI=true).
"""

from __future__ import annotations

import json

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import assert_charts_drawn, assert_no_exception, open_tab, rerun
from tests.support import en

pytestmark = pytest.mark.browser
app_exists, browser, server, page = shared.app_exists, shared.browser, shared.server, shared.page
MAIN = '[data-testid="stMain"]'
SIDEBAR = '[data-testid="stSidebar"]'


def chart_titles() -> str:
    """A JS expression: the titles of the plotly charts on the page, joined."""
    return """Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))
        .map((t) => t.textContent).join('\\n')"""


def shows_title(text: str) -> str:
    """A JS predicate: a chart title holds text (spaces aside: a long title is broken into
    lines, whose text runs together in textContent)."""
    flat = json.dumps("".join(text.split()))
    return f"() => ({chart_titles()}).replace(/\\s+/g, '').includes({flat})"


def test_the_mode_chart_is_drawn_and_follows_a_mode_switch(page):
    open_tab(page, en("app.view.parts"))
    every = en("parts.modes.title", what=en("metric.token_accuracy.name"), scope="all layers")
    page.wait_for_function(shows_title(every))
    assert_no_exception(page)
    assert_charts_drawn(page, at_least=2)  # the modes swept, W_o's singular values
    legend = page.evaluate(  # SVG text: read textContent (innerText is for HTML)
        f"Array.from(document.querySelectorAll('{MAIN} .legendtext')).map((t) => t.textContent)"
    )
    for mode in ("learned", "block-diagonal", "off (identity)", "zero", "rank-k W_o"):
        assert any(mode in item for item in legend), (mode, legend)

    # The sidebar's new mode: rank k brings its own k box (1..D, d_k by default).
    radio = page.locator(SIDEBAR).locator('[data-testid="stRadio"]')
    rerun(
        page,
        lambda: radio.get_by_text(en("switch.rank_k"), exact=True).click(),
        f"() => document.querySelector('{SIDEBAR} [data-testid=\"stNumberInput\"]') !== null",
    )
    k_box = page.locator(SIDEBAR).get_by_label(en("switch.k", d=64), exact=True)
    assert k_box.input_value() == "16"
    assert_no_exception(page)

    # The view's own switch: W_o swept in layer 1 only; the chart is redrawn for that layer.
    page.locator(MAIN).get_by_role("combobox", name=en("parts.scope")).click()
    layer_1 = en("parts.modes.title", what=en("metric.token_accuracy.name"), scope="L1")
    rerun(
        page,
        lambda: page.get_by_role("option", name="L1", exact=True).click(),
        shows_title(layer_1),
    )
    page.wait_for_function(shows_title(layer_1))
    assert_charts_drawn(page, at_least=2)
    assert_no_exception(page)
