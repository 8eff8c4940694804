"""Browser test: every head readable on a phone and a projector (issue 31, "Charts").

A teacher projects the app at 1280x720 and students open it on 390 px phones. Toy heatmaps were
squeezed to slivers at phone width (one mosaic of every head), and MiniLM's residual-stream block
titles sat on the data. What is measured is what is drawn: every block of a mosaic chart (a
head's squares, a layer's residual stream; plotly's SVG charts and the canvas charts alike) is
boxed from its axes, and

- every attention head's plot area is at least MIN_HEAD_PX wide;
- no block title's box overlaps any block's plot area.

Checked for a toy model (reverse) and the pretrained all-MiniLM-L6-v2 (installed from
requirements-minilm.txt; skipped without it, as tests/browser/test_browser_minilm.py is), on the
Attention tab and "W_o off: compare". Screenshots of each go to artifacts/ (or the folder in the
environment variable TFVIZ_SCREENSHOTS; tests/browser/test_browser.py's screenshot), named
readable_<model>_<view>_<lang>_<screen>.png (the Attention tab in English and Chinese, also on a
desktop screen).

The server and browser are tests/browser/test_browser.py's (its skip rules: skipped without
Chromium at
/usr/bin/chromium, except under CI=true).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import TIMEOUT_MS, assert_charts_drawn, screenshot
from tests.conftest import opened_app, resized
from tfviz import plots
from tfviz.hf import pretrained
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

PHONE = {"width": 390, "height": 844}
PROJECTOR = {"width": 1280, "height": 720}
DESKTOP = {"width": 1600, "height": 1000}
SCREENS = {"phone": PHONE, "projector": PROJECTOR, "desktop": DESKTOP}
# What is checked, as (model, view, lang): each view and language on a phone and a projector,
# and the Attention tab on a desktop too (the screenshot set). One page a case, checked
# on each screen in turn (tests.conftest.resized).
CASES = [
    (model, view, lang)
    for model in ("toy", "minilm")
    for view, lang in (("attention", "en"), ("attention", "zh"), ("w_o_off", "en"))
]
MIN_HEAD_PX = 150  # a head's plot area at least this wide: 10 px a token at 15 word-pieces
MINILM = f"pretrained:{pretrained.NAME}"
SENTENCE = "A woman is playing the violin on the stage."  # 12 word-pieces

# Every mosaic chart on the page (one with a block-titles trace: tfviz.plots.mosaic), as
# {chart, key, blocks: [box], titles: [box]} in page pixels. A block is a run of named rows by a
# run of named columns (the empty rows and columns between blocks are named "gap ..."), boxed
# from the chart's own axes: plotly's (_fullLayout's axes), or the canvas charts' cell centres
# (tfvizChart.cellAt). Titles are the block-titles trace's texts: plotly's SVG text boxes, or
# the boxes a canvas chart noted for the texts it drew.
MEASURE_JS = """
(meta) => {
  const runs = (names) => {
    const out = []; let start = null;
    names.forEach((n, i) => {
      const gap = String(n).startsWith('gap ');
      if (gap && start !== null) { out.push([start, i - 1]); start = null; }
      if (!gap && start === null) start = i;
    });
    if (start !== null) out.push([start, names.length - 1]);
    return out;
  };
  const keyOf = (el) => {
    const m = el.closest('[class*="st-key-"]')?.className.match(/st-key-(\\S+)/);
    return m ? m[1] : '';
  };
  const found = [];
  document.querySelectorAll('.js-plotly-plot').forEach((gd, i) => {
    const data = gd._fullData || [];
    const heat = data.find((t) => t.type === 'heatmap');
    if (!heat || !data.some((t) => t.meta === meta)) return;
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const svg = gd.querySelector('.main-svg').getBoundingClientRect();
    const px = (ax, v) => ax._offset + ax.l2p(v);
    const blocks = [];
    for (const [r0, r1] of runs(heat.y)) for (const [c0, c1] of runs(heat.x)) {
      const xs = [px(xa, c0 - 0.5), px(xa, c1 + 0.5)], ys = [px(ya, r0 - 0.5), px(ya, r1 + 0.5)];
      blocks.push({x0: svg.left + Math.min(...xs), x1: svg.left + Math.max(...xs),
                   y0: svg.top + Math.min(...ys), y1: svg.top + Math.max(...ys)});
    }
    const titles = [...gd.querySelectorAll('.scatterlayer .textpoint text')].map((el) => {
      const r = el.getBoundingClientRect();
      return {text: el.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom};
    });
    found.push({chart: 'plotly ' + i, key: keyOf(gd), blocks, titles});
  });
  document.querySelectorAll('.tfviz-chart[data-drawn]').forEach((div, i) => {
    const fig = div.__figure, heat = fig.data[0];
    const named = fig.data.find((t) => t.meta === meta);
    if (!heat || heat.type !== 'heatmap' || !named) return;
    const canvas = div.querySelector('canvas').getBoundingClientRect();
    const at = (r, c) => window.tfvizChart.cellAt(div, 0, r, c);
    const pitchX = heat.x.length > 1 ? Math.abs(at(0, 1)[0] - at(0, 0)[0]) : 0;
    const pitchY = heat.y.length > 1 ? Math.abs(at(1, 0)[1] - at(0, 0)[1]) : 0;
    const blocks = [];
    for (const [r0, r1] of runs(heat.y)) for (const [c0, c1] of runs(heat.x)) {
      const a = at(r0, c0), b = at(r1, c1);
      blocks.push({x0: canvas.left + Math.min(a[0], b[0]) - pitchX / 2,
                   x1: canvas.left + Math.max(a[0], b[0]) + pitchX / 2,
                   y0: canvas.top + Math.min(a[1], b[1]) - pitchY / 2,
                   y1: canvas.top + Math.max(a[1], b[1]) + pitchY / 2});
    }
    const names = new Set(named.text);
    const titles = (div.__texts || []).filter((t) => names.has(t.text)).map((t) => ({
      text: t.text, x0: canvas.left + t.x0, x1: canvas.left + t.x1,
      y0: canvas.top + t.y0, y1: canvas.top + t.y1}));
    found.push({chart: 'canvas ' + i, key: keyOf(div), blocks, titles});
  });
  return found;
}
"""


def measure(page) -> list[dict]:
    assert_charts_drawn(page, at_least=1)
    page.wait_for_timeout(500)  # a chart relayouts once after its first draw
    return page.evaluate(MEASURE_JS, plots.TITLES_META)


def narrow_heads(charts: list[dict]) -> list:
    """(chart, key, width) of every attention head narrower than MIN_HEAD_PX."""
    return [
        (c["chart"], c["key"], round(b["x1"] - b["x0"]))
        for c in charts
        if "attention" in c["key"]
        for b in c["blocks"]
        if b["x1"] - b["x0"] < MIN_HEAD_PX
    ]


def titles_on_data(charts: list[dict]) -> list:
    """(chart, title, block) of every block title whose box overlaps a block's plot area."""
    found = []
    for c in charts:
        for t in c["titles"]:
            for b in c["blocks"]:
                dx = min(t["x1"], b["x1"]) - max(t["x0"], b["x0"])
                dy = min(t["y1"], b["y1"]) - max(t["y0"], b["y0"])
                if dx > 1 and dy > 1:
                    found.append((c["chart"], c["key"], t["text"], b))
    return found


def view_query(model: str, view: str, lang: str = "en") -> str:
    values = {"view": view, "lang": lang}
    if view == "w_o_off":
        values["w_o_mode"] = "identity"
    if model == "minilm":
        values.update(model=MINILM, sequence=SENTENCE)
    return urlencode(values)


def opened_view(browser, server, model: str, view: str, screen: str, lang: str = "en"):
    """The app on model's view, drawn (opened_app; MiniLM's page starts with its similarity)."""
    first = {}
    if model == "minilm":
        pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
        first = dict(first=".st-key-similarity", first_timeout_ms=4 * TIMEOUT_MS)
    url = f"{server}/?{view_query(model, view, lang)}"
    return opened_app(browser, url, SCREENS[screen], **first)


@pytest.mark.parametrize("model, view, lang", CASES)
def test_every_head_is_wide_enough_and_no_title_sits_on_data(browser, server, model, view, lang):
    screens = [screen for screen in SCREENS if screen != "desktop" or view == "attention"]
    with opened_view(browser, server, model, view, screens[0], lang) as page:
        for screen in screens:
            resized(page, SCREENS[screen])
            charts = measure(page)
            screenshot(page, f"readable_{model}_{view}_{lang}_{screen}.png")
            heads = [c for c in charts if "attention" in c["key"]]
            assert heads, f"{screen}: no attention chart measured: {[c['key'] for c in charts]}"
            assert all(c["blocks"] for c in heads), (screen, heads)
            assert narrow_heads(charts) == [], f"{screen}: heads narrower than {MIN_HEAD_PX} px"
            assert titles_on_data(charts) == [], f"{screen}: block titles drawn over the data"


HOVER_JS = """
([block, row, col]) => {
  const div = document.querySelector(`.tfviz-chart[data-drawn][data-block="${block}"]`);
  const [x, y] = window.tfvizChart.cellAt(div, 0, row, col);
  return window.tfvizChart.hoverAt(div, x, y);
}
"""


def test_minilm_on_the_log_scale_draws_decades_and_hovers_the_weight(browser, server):
    """The canvas charts (MiniLM's columns of heads) take the log scale as plotly would: the
    colour bar's decades, and the hover's weight itself, not its logarithm."""
    from tests.browser.test_browser import rerun
    from tfviz.core.trace import run_trace

    with opened_view(browser, server, "minilm", "attention", "projector") as page:
        radio = page.locator(".st-key-attn_weight_scale")
        done = "() => document.body.innerText.includes('0.001 or less')"
        rerun(page, lambda: radio.get_by_text("log scale", exact=True).click(), done)
        measure(page)
        screenshot(page, "readable_minilm_attention_log_projector.png")
        drawn = page.evaluate(
            "() => document.querySelector('.tfviz-chart[data-drawn]').__texts.map((t) => t.text)"
        )
        assert "≤ 0.001" in drawn and "0.1" in drawn, drawn  # the colour bar's decades
        model, tokenizer = pretrained.load_minilm()
        tr = run_trace(model, pretrained.SentenceTask(tokenizer), SENTENCE)
        lines = page.evaluate(HOVER_JS, ["L0 H1", 3, 5])  # head 1's chart, query 3, key 5
        assert lines[-1] == f"weight {tr.attn[0, 1, 3, 5]:.3f}", lines


# ---- a long input's whole map, zoomed: its labels thinned anew for the cells shown -------------

# 114 word-pieces with [CLS] and [SEP]: the whole layer's map has room for every other label.
LONG_TEXT = " ".join("the man reads a book near the river with a small dog and sings".split() * 8)
WHOLE = ".st-key-attention_whole .tfviz-chart[data-drawn]"
# The x labels a chart drew (its texts under the plot area, left of the colour bar), its zoom
# and its every label, in page order.
X_LABELS_JS = """
(selector) => {
  const div = document.querySelector(selector);
  const L = div.__layout, bottom = L.box.t + L.ph, right = L.box.l + L.pw;
  const drawn = div.__texts.filter((t) => t.y0 >= bottom - 1 && t.x0 <= right).map((t) => t.text);
  return {drawn, zoom: div.__zoom || null, labels: div.__figure.layout.meta.labels};
}
"""


def drag(page, selector: str, start: tuple[int, int], end: tuple[int, int]) -> None:
    """Drag the mouse over a canvas chart from cell start to cell end ((row, col) each)."""
    box = page.locator(f"{selector} canvas").bounding_box()
    points = [
        page.evaluate(
            "([s, r, c]) => window.tfvizChart.cellAt(document.querySelector(s), 0, r, c)",
            [selector, *cell],
        )
        for cell in (start, end)
    ]
    (x0, y0), (x1, y1) = [(box["x"] + x, box["y"] + y) for x, y in points]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2)
    page.mouse.move(x1, y1)
    page.mouse.up()


def test_a_zoomed_map_names_the_tokens_the_whole_map_had_no_room_for(browser, server):
    """Issue 31: labels thinned by zoom. The whole layer's map of a long input labels every
    other word-piece; dragged over 20 of them, it labels all 20 (and only those), its hover still
    names each cell, and its button shows the whole map again, thinned as before."""
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    from tests.browser.test_browser import rerun

    url = f"{server}/?" + urlencode({"model": MINILM, "sequence": LONG_TEXT, "view": "attention"})
    first = dict(first=".st-key-similarity", first_timeout_ms=4 * TIMEOUT_MS)
    with opened_app(browser, url, DESKTOP, **first) as page:
        toggle = page.locator(".st-key-attn_whole label")
        rerun(page, toggle.click, f"() => document.querySelector('{WHOLE}') !== null")
        whole = page.evaluate(X_LABELS_JS, WHOLE)
        labels = whole["labels"]
        assert len(labels) == 114 and whole["zoom"] is None
        assert 10 < len(whole["drawn"]) < len(labels), whole["drawn"]  # thinned to fit
        drag(page, WHOLE, (40, 40), (59, 59))
        zoomed = page.evaluate(X_LABELS_JS, WHOLE)
        assert zoomed["zoom"] == {"xaxis": [39.5, 59.5], "yaxis": [59.5, 39.5]}  # y reversed
        assert zoomed["drawn"] == labels[40:60]  # every one of them now, and no other
        shown_before = [t for t in whole["drawn"] if t in labels[40:60]]
        assert len(shown_before) < 20
        hover = page.evaluate(
            """(s) => { const div = document.querySelector(s);
                        const [x, y] = window.tfvizChart.cellAt(div, 0, 45, 50);
                        return window.tfvizChart.hoverAt(div, x, y); }""",
            WHOLE,
        )
        assert hover[0].endswith(labels[45]) and hover[1].endswith(labels[50]), hover
        screenshot(page, "readable_minilm_whole_zoomed_desktop.png")
        page.get_by_role("button", name=translate("en", "common.show_whole")).click()
        page.wait_for_function(f"() => !document.querySelector('{WHOLE}').__zoom")
        assert page.evaluate(X_LABELS_JS, WHOLE)["drawn"] == whole["drawn"]
