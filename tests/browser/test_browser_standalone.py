"""The standalone web page in a real browser, from file:// with the network cut.

Every request that is not for a file:// address is aborted and recorded: the page must draw every
chart and show a hover label with none of them, and make none. A hostile sequence in the facts
must not run (no dialog opens). The exported views are drawn by tfviz's standalone.js: a cell's
colour is checked against plotly's own colour scale, and its hover against the figure's
template; a page of a figure standalone.js does not draw falls back to plotly.js, tested too.

The browser is tests/browser/test_browser.py's: skipped without Chromium at /usr/bin/chromium,
except
under CI=true, where these tests fail.
"""

from __future__ import annotations

import plotly.colors
import pytest

from bench.harness import cut_network
from tests.browser import test_browser as shared
from tests.browser.test_browser import TIMEOUT_MS
from tfviz import get_task, load_checkpoint, plots
from tfviz.core.trace import run_trace
from tfviz.hf import pretrained
from tfviz.plots import standalone
from tfviz.ui.views import attention

pytestmark = pytest.mark.browser
browser, server, page = shared.browser, shared.server, shared.page

HOSTILE = "<img src=x onerror=alert(1)>"
CHART = ".js-plotly-plot"  # plotly.js's
DRAWN = ".js-plotly-plot .main-svg"  # plotly.js adds its svg once it has drawn the chart
LITE = ".tfviz-chart"  # standalone.js's
LITE_DRAWN = ".tfviz-chart[data-drawn]"


def toy_figures():
    """The Attention view of the bundled reverse model with one head enlarged, and the
    Before/after W_o view's concat and attn_out; and the trace."""
    model, meta = load_checkpoint("models/reverse.safetensors")
    tr = run_trace(model, get_task(meta.task), "abcdef")
    drawn = attention.exported_figures(tr, None, (1, 2), caption="Attention")
    drawn += [
        ("concat", plots.activation_map(tr.concat[0], tr.labels, n_heads=tr.n_heads)),
        ("attn_out", plots.activation_map(tr.attn_out[0], tr.labels)),
    ]
    return drawn, tr


def toy_page(use_plotly: bool = False) -> tuple[str, int]:
    """toy_figures' page, a hostile sequence in its facts; the number of charts."""
    drawn, tr = toy_figures()
    facts = {"Model": "reverse", "Sequence": HOSTILE, "Prediction": " ".join(tr.prediction)}
    page = standalone.page(f"tfviz {HOSTILE}", drawn, facts, use_plotly=use_plotly)
    return page, len(drawn)


MINILM_TEXT = f"the quick brown fox {HOSTILE} jumps over the lazy dog"


def minilm_page() -> tuple[str, int]:
    """MiniLM's Attention view as a many-headed model shows it: one layer's heads and their mean,
    for a sentence with HTML in it (its word-pieces are the charts' labels); and how many
    charts it draws."""
    model, tokenizer = pretrained.load_minilm("cpu")
    task = pretrained.SentenceTask(tokenizer)
    tr = run_trace(model, task, MINILM_TEXT)
    drawn = attention.exported_figures(tr, 0, None, caption="L0")
    assert len(drawn) == 1  # the layer's heads and mean: a chart each, in a grid (row by row)
    return standalone.page("MiniLM", drawn, {"Model": pretrained.NAME}), tr.n_heads + 1


def open_offline(browser, tmp_path, html_text: str):
    """The page opened from a file with every non-file request aborted; (page, context,
    requests made outside file://, dialogs opened)."""
    path = tmp_path / "view.html"
    path.write_text(html_text, encoding="utf-8")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside, dialogs = [], []
    cut_network(context, outside)
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri(), timeout=TIMEOUT_MS)
    return page, context, outside, dialogs


def assert_all_drawn(page, n: int) -> None:
    """n plotly.js charts, each drawn."""
    assert page.locator(CHART).count() == n
    page.wait_for_function(
        f"document.querySelectorAll('{CHART}').length === {n} && "
        f"[...document.querySelectorAll('{CHART}')].every(g => g.querySelector('.main-svg'))",
        timeout=TIMEOUT_MS,
    )


def assert_all_drawn_lite(page, n: int) -> None:
    """n standalone.js charts, each drawn, and no plotly.js in the page."""
    page.wait_for_function(
        f"document.querySelectorAll('{LITE_DRAWN}').length === {n}", timeout=TIMEOUT_MS
    )
    assert page.locator(LITE).count() == n
    assert page.evaluate("typeof window.Plotly") == "undefined"


def assert_inert_and_offline(view, dialogs: list, outside: list) -> None:
    """The hostile sequence is shown as text (no image, no script ran), nothing was fetched."""
    assert HOSTILE in view.locator("dd").nth(1).text_content()
    assert view.locator("img").count() == 0
    assert dialogs == []
    assert outside == []


def cell_colour(page, chart: str, row: int, col: int) -> tuple[list[float], list[int]]:
    """Where cell (row, col) of a chart's first trace is drawn, and the canvas's colour there."""
    return page.evaluate(
        """([id, row, col]) => {
          const [x, y] = tfvizChart.cellAt(id, 0, row, col);
          const canvas = document.querySelector('#' + id + ' canvas');
          const k = canvas.width / canvas.clientWidth;
          const at = [Math.round(x * k), Math.round(y * k)];
          const rgba = canvas.getContext('2d').getImageData(at[0], at[1], 1, 1).data;
          return [[x, y], [rgba[0], rgba[1], rgba[2]]];
        }""",
        [chart, row, col],
    )


def scale_colour(scale, t: float) -> list[int]:
    """plotly's own colour of t in [0, 1] on scale."""
    rgb = plotly.colors.sample_colorscale(scale, [t], colortype="tuple")[0]
    rgb = plotly.colors.unconvert_from_RGB_255(rgb) if max(rgb) > 1 else rgb
    return [round(255 * c) for c in rgb]


def test_the_page_draws_every_chart_exactly_and_hovers_with_the_network_cut(browser, tmp_path):
    drawn, tr = toy_figures()
    html_text, n = toy_page()
    view, context, outside, dialogs = open_offline(browser, tmp_path, html_text)
    try:
        assert_all_drawn_lite(view, n)
        # The enlarged head (L1 H2): each checked cell has plotly's colour for its weight, and
        # a real mouse over it shows the figure's hover with its labels and weight.
        weights = tr.attn[1, 2]
        view.locator("#tfviz-chart-1 canvas").scroll_into_view_if_needed()
        for row, col in [(0, 0), (2, 5), (6, 1), (3, 3)]:
            (x, y), rgb = cell_colour(view, "tfviz-chart-1", row, col)
            expected = scale_colour(plots.ATTENTION_SCALE, float(weights[row, col]))
            assert max(abs(a - b) for a, b in zip(rgb, expected, strict=True)) <= 2, (row, col)
            box = view.locator("#tfviz-chart-1 canvas").bounding_box()
            view.mouse.move(box["x"] + x, box["y"] + y)
            hover = view.locator("#tfviz-chart-1 .tfviz-hover")
            hover.wait_for(state="visible", timeout=TIMEOUT_MS)
            assert hover.inner_text().splitlines() == [
                f"query {tr.labels[row]}",
                f"key {tr.labels[col]}",
                f"weight {weights[row, col]:.3f}",
            ]
        # A screen reader hears each chart's name: the enlarged head's title.
        assert view.locator("#tfviz-chart-1 canvas").get_attribute("aria-label") == "L1 H2"
        assert view.locator("#tfviz-chart-1 canvas").get_attribute("role") == "img"
        # concat's signed values: a negative one is written with plotly's minus sign.
        concat = tr.concat[0]
        row, col = map(int, divmod(int(concat.argmin()), concat.shape[1]))
        (x, y), _ = cell_colour(view, "tfviz-chart-2", row, col)
        text = view.evaluate(f"tfvizChart.hoverAt('tfviz-chart-2', {x}, {y})")
        assert text[-1] == f"value −{abs(concat[row, col]):.3f}"
        assert_inert_and_offline(view, dialogs, outside)
    finally:
        context.close()


def test_a_plotly_js_page_draws_every_chart_and_hovers_with_the_network_cut(browser, tmp_path):
    html_text, n = toy_page(use_plotly=True)
    view, context, outside, dialogs = open_offline(browser, tmp_path, html_text)
    try:
        assert_all_drawn(view, n)
        # A real mouse over the grid's first cell (its middle may be a gap between heads):
        # plotly shows its hover label.
        plot_area = view.locator(".js-plotly-plot .nsewdrag").first
        plot_area.hover(position={"x": 15, "y": 15}, timeout=TIMEOUT_MS)
        label = view.locator(".hoverlayer .hovertext").first
        label.wait_for(state="visible", timeout=TIMEOUT_MS)
        assert "weight" in label.text_content()
        assert_inert_and_offline(view, dialogs, outside)
    finally:
        context.close()


def test_minilm_s_page_draws_every_head_with_the_network_cut(browser, tmp_path):
    html_text, n = minilm_page()
    view, context, outside, dialogs = open_offline(browser, tmp_path, html_text)
    try:
        assert_all_drawn_lite(view, n)
        # The sentence's "<img" word-pieces are labels drawn as text, and hover as text.
        head = "tfviz-chart-0-0"  # the grid's first cell: L0 H0
        assert view.locator(f"#{head}").get_attribute("data-block") == "L0 H0"
        labels = view.evaluate(f"document.getElementById('{head}').__figure.data[0].x.slice(0, 40)")
        row = labels.index("key &lt;")  # plotly's JSON holds the escaped label
        (x, y), _ = cell_colour(view, head, row, row)
        hover = view.evaluate(f"tfvizChart.hoverAt('{head}', {x}, {y})")
        assert "query <" in hover and "key <" in hover, hover  # each on its own line
        assert view.locator("img").count() == 0 and dialogs == []
        assert outside == []
    finally:
        context.close()


def test_the_page_fits_a_phone_s_width(browser, tmp_path):
    html_text, n = minilm_page()
    path = tmp_path / "phone.html"
    path.write_text(html_text, encoding="utf-8")
    context = browser.new_context(viewport={"width": 390, "height": 800})
    try:
        view = context.new_page()
        view.goto(path.as_uri(), timeout=TIMEOUT_MS)
        assert_all_drawn_lite(view, n)
        widths = view.evaluate(
            "[...document.querySelectorAll('.tfviz-chart canvas')].map(c => c.clientWidth)"
        )
        assert len(widths) == n and all(0 < w <= 390 for w in widths)
        assert view.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


def test_the_app_s_button_downloads_the_attention_view_and_it_opens_offline(
    browser, page, tmp_path
):
    """The real app: the button's page is built on click (a callable), named after the model,
    and opens from a file with the network cut, its grid drawn."""
    button = page.get_by_role("button", name="Download this view as a web page")
    with page.expect_download() as download:
        button.click()
    assert download.value.suggested_filename == "tfviz_reverse_attention.html"
    html_text = download.value.path().read_text(encoding="utf-8")
    assert "<dd>reverse</dd>" in html_text
    view, context, outside, _ = open_offline(browser, tmp_path, html_text)
    try:
        assert_all_drawn_lite(view, 1)  # the grid of every layer and head
        assert outside == []
    finally:
        context.close()
