"""Browser tests of readability: no two texts of a chart on top of each other, on a desktop and
on a phone, in English and in Chinese (issue 16, "A class's first hour").

What a student cannot read is measured where it is drawn: every text plotly puts in a chart's
SVG (tick labels, axis and colour-bar titles, block and panel titles) is boxed with
getBoundingClientRect, and no two boxes may intersect, nor may one stick out of the chart. The
charts checked: the Lessons tab's first step (the two dependency maps, and the loaded model's),
the Attention tab of the pretrained all-MiniLM-L6-v2 on a sentence of 12 word-pieces (its 12
heads and their mean), and the same model's "W_o off: compare" view.

The server and the browser are tests/browser/test_browser.py's (its fixtures are reused, and its
skip
rules: skipped without Chromium at /usr/bin/chromium, except under CI=true, where they fail).
Screenshots go to artifacts/ for a human to look at.
"""

from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import urlencode

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    PLOT,
    TIMEOUT_MS,
    assert_charts_drawn,
    rerun,
    screenshot,
)
from tests.conftest import opened_app, quiet, resized
from tfviz.hf import pretrained
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module: the test
# process's server and browser.
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
SCREENS = {"desktop": DESKTOP, "phone": PHONE}
MINILM = f"pretrained:{pretrained.NAME}"
BLOCK_TITLES = ".scatterlayer .textpoint text"  # a mosaic's block titles: one text trace
# 12 word-pieces with [CLS] and [SEP], two of them the same word ("the (5)", "the (8)").
TWELVE_PIECES = "A woman is playing the violin on the stage."

# Every plotly chart's texts that overlap another or leave the chart: [chart, text, text, box].
# Text inside a heatmap's cells (the numbers written in) lies on its cell, not on a label, and
# the hover and toolbar layers are not shown until used: those are left out. A scatter trace's
# texts (.textpoint) are in: the block titles are one such trace (tfviz.plots.mosaic._block_titles).
OVERLAPS_JS = """
() => {
  const found = [];
  // The texts of one chart (boxes) that leave its bounds or overlap another.
  const check = (chart, boxes, bounds) => {
    for (const b of boxes) {
      if (b.x0 < bounds.left - 1 || b.x1 > bounds.right + 1 || b.y0 < bounds.top - 1
          || b.y1 > bounds.bottom + 1) found.push([chart, b.text, 'outside the chart', b]);
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        const dx = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
        const dy = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
        if (dx > 1 && dy > 1) found.push([chart, a.text, b.text, [a, b]]);
      }
    }
  };
  document.querySelectorAll('.js-plotly-plot').forEach((gd, chart) => {
    const boxes = [];
    gd.querySelectorAll('svg text').forEach((el) => {
      if (!el.textContent.trim() || el.closest('.hoverlayer, .modebar')) return;
      if (el.closest('.heatmaplayer')) return;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) return;
      boxes.push({text: el.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom});
    });
    check(chart, boxes, gd.querySelector('.main-svg').getBoundingClientRect());
  });
  // A canvas chart (tfviz.ui.widgets.canvas_charts) notes every text it drew and its box, in
  // its canvas's pixels.
  document.querySelectorAll('.tfviz-chart[data-drawn]').forEach((div, i) => {
    const canvas = div.querySelector('canvas');
    const bounds = {left: 0, top: 0, right: canvas.clientWidth, bottom: canvas.clientHeight};
    check('canvas ' + i, div.__texts, bounds);
  });
  return found;
}
"""

# Every text a canvas chart drew, in page order.
CANVAS_TEXTS_JS = """
() => [...document.querySelectorAll('.tfviz-chart[data-drawn]')]
    .flatMap((div) => div.__texts.map((b) => b.text))
"""


def overlaps(page) -> list:
    """The overlapping or escaping texts of every chart on the page (empty when all is clear)."""
    assert_charts_drawn(page, at_least=1)
    page.wait_for_timeout(300)  # a chart relayouts once after its first draw
    return page.evaluate(OVERLAPS_JS)


# Each test opens one page and checks it on each screen in turn (tests.conftest.resized).


def clear_on_every_screen(page, shot: str, what: str, more=lambda screen: None) -> None:
    """The page on each screen in turn: no two texts of its charts overlap there, its
    screenshot is shot_<screen>.png, and more(screen) holds (the test's own checks)."""
    for screen, size in SCREENS.items():
        resized(page, size)
        found = overlaps(page)
        screenshot(page, f"{shot}_{screen}.png")
        assert found == [], f"{screen}: {what} has texts overlapping: {found}"
        more(screen)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lesson_maps_titles_head_names_and_axis_titles_do_not_overlap(browser, server, lang):
    link = urlencode({"view": "lessons", "step": 1, "lang": lang})
    with opened_app(browser, f"{server}/?{link}", DESKTOP) as page:
        titles = [translate(lang, "lessons.s1.map_without"), translate(lang, "lessons.s1.map_with")]
        for screen, size in SCREENS.items():
            resized(page, size)
            found = overlaps(page)
            assert found == [], f"{screen}: the lesson's maps have texts overlapping: {found}"
            drawn = page.locator(f"{PLOT} .annotation-text").all_text_contents()
            assert all(any(t in d.replace("\u200b", "") for d in drawn) for t in titles), drawn
        # The loaded model's own map, drawn on request, has the same parts: check it too.
        show = page.get_by_text(translate(lang, "lessons.s1.show_model", name="reverse"))
        two_charts = f"() => document.querySelectorAll('{PLOT}').length >= 2"
        rerun(page, show.click, two_charts)
        quiet(page)
        clear_on_every_screen(page, f"layout_lesson1_{lang}", "the model's map")


@contextmanager
def opened_minilm(browser, url: str, viewport: dict):
    """tests.conftest.opened_app for the pretrained model: its page has no prediction block (its
    word-pieces and similarity instead), and a fresh server loads it first."""
    similarity, slow = ".st-key-similarity", 4 * TIMEOUT_MS
    with opened_app(browser, url, viewport, first=similarity, first_timeout_ms=slow) as page:
        yield page


def minilm_link(view: str, **more: str) -> str:
    return urlencode({"model": MINILM, "sequence": TWELVE_PIECES, "view": view, **more})


def twelve_pieces() -> list[str]:
    _, tokenizer = pretrained.load_minilm()
    return pretrained.SentenceTask(tokenizer).labels(TWELVE_PIECES)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_minilm_heads_are_laid_out_with_labels_that_fit(browser, server, lang):
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    pieces = twelve_pieces()
    assert len(pieces) == 12, pieces
    link = minilm_link("attention", lang=lang)
    with opened_minilm(browser, f"{server}/?{link}", DESKTOP) as page:

        def every_head_and_piece_labelled(screen: str) -> None:
            # Every head and the mean is titled, and each of the 12 word-pieces labels the
            # columns: the columns of heads are canvas charts, which note what they drew.
            texts = page.evaluate(CANVAS_TEXTS_JS)
            for h in range(12):
                assert f"L0 H{h}" in texts, (screen, texts)
            assert "L0 mean" in texts or "L0 " + translate(lang, "chart.block.mean") in texts
            for piece in pieces:
                assert texts.count(piece) >= 2, (screen, piece, texts)  # a row's and a column's

        shot, what = f"layout_minilm_attention_{lang}", "the attention grid"
        clear_on_every_screen(page, shot, what, every_head_and_piece_labelled)


def test_minilm_compare_view_texts_do_not_overlap(browser, server):
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    link = minilm_link("w_o_off", w_o_mode="identity")
    with opened_minilm(browser, f"{server}/?{link}", DESKTOP) as page:
        clear_on_every_screen(page, "layout_minilm_compare", "the compare view")


def test_minilm_before_after_w_o_texts_do_not_overlap(browser, server):
    """The Before/after W_o view (concat, attn_out, W_o, each head's term): its layer-0 attn_out
    has outlier dimensions, drawn on the robust range with ringed cells."""
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    with opened_minilm(browser, f"{server}/?{minilm_link('w_o')}", DESKTOP) as page:
        found = overlaps(page)
        screenshot(page, "layout_minilm_before_after_desktop.png")
        assert found == [], f"the Before/after W_o view has texts overlapping: {found}"


def test_the_toy_attention_grid_texts_do_not_overlap(browser, server):
    with opened_app(browser, f"{server}/?view=attention", DESKTOP) as page:

        def every_query_labelled(screen: str) -> None:
            # The grid is a canvas chart: on a phone its key labels are thinned to what fits
            # (they were ~4 px apart); every query label stays.
            drawn, queries = page.evaluate(
                """() => {
                  const div = document.querySelector('.st-key-attention_grid .tfviz-chart');
                  return [div.__texts.map((b) => b.text), div.__figure.layout.yaxis.ticktext];
                }"""
            )
            assert all(label in drawn for label in queries), (screen, queries, drawn)

        clear_on_every_screen(page, "layout_toy_attention", "the toy grid", every_query_labelled)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("view", ["parts", "experiment"])
def test_legends_and_titles_fit_a_phone(browser, server, view, lang):
    """Take W_o apart's mode sweep and Does W_o matter?'s curves on a phone: their titles ran
    out of the chart and their legends, on three rows, over the x axis's title."""
    link = urlencode({"view": view, "lang": lang})
    with opened_app(browser, f"{server}/?{link}", PHONE) as page:
        found = overlaps(page)
        screenshot(page, f"layout_{view}_{lang}_phone.png")
        assert found == [], f"the {view} view has texts overlapping: {found}"


def test_minilm_analysis_texts_do_not_overlap(browser, server):
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    with opened_minilm(browser, f"{server}/?{minilm_link('analysis')}", DESKTOP) as page:
        found = overlaps(page)
        screenshot(page, "layout_minilm_analysis_desktop.png")
        assert found == [], f"the Analysis view has texts overlapping: {found}"
