"""The standalone web page in a real browser, from file:// with the network cut.

Every request that is not for a file:// address is aborted and recorded: the page must draw every
chart and show a hover label with none of them, and make none. A hostile sequence in the facts
must not run (no dialog opens).

The browser is tests/test_browser.py's: skipped without Chromium at /usr/bin/chromium, except
under CI=true, where these tests fail.
"""

from __future__ import annotations

import pytest

from bench.standalone import cut_network
from tests import test_browser as shared
from tests.test_browser import TIMEOUT_MS
from tfviz import get_task, load_checkpoint, plots, pretrained, standalone
from tfviz.trace import run_trace
from tfviz.ui.views import attention

pytestmark = pytest.mark.browser
browser, server, page = shared.browser, shared.server, shared.page

HOSTILE = "<img src=x onerror=alert(1)>"
CHART = ".js-plotly-plot"
DRAWN = ".js-plotly-plot .main-svg"  # plotly.js adds its svg once it has drawn the chart


def toy_page() -> tuple[str, int]:
    """The Attention view of the bundled reverse model with one head enlarged, and the
    Before/after W_o view's concat and attn_out; the number of charts."""
    model, meta = load_checkpoint("models/reverse.safetensors")
    tr = run_trace(model, get_task(meta.task), "abcdef")
    drawn = attention.exported_figures(tr, None, (1, 2), caption="Attention")
    drawn += [
        ("concat", plots.activation_map(tr.concat[0], tr.labels, n_heads=tr.n_heads)),
        ("attn_out", plots.activation_map(tr.attn_out[0], tr.labels)),
    ]
    facts = {"Model": "reverse", "Sequence": HOSTILE, "Prediction": " ".join(tr.prediction)}
    return standalone.page(f"tfviz {HOSTILE}", drawn, facts), len(drawn)


def minilm_page() -> tuple[str, int]:
    """MiniLM's Attention view as a many-headed model shows it: one layer's columns of heads."""
    model, tokenizer = pretrained.load_minilm("cpu")
    task = pretrained.SentenceTask(tokenizer)
    tr = run_trace(model, task, "the quick brown fox jumps over the lazy dog")
    drawn = attention.exported_figures(tr, 0, None, caption="L0")
    return standalone.page("MiniLM", drawn, {"Model": pretrained.NAME}), len(drawn)


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
    assert page.locator(CHART).count() == n
    page.wait_for_function(
        f"document.querySelectorAll('{CHART}').length === {n} && "
        f"[...document.querySelectorAll('{CHART}')].every(g => g.querySelector('.main-svg'))",
        timeout=TIMEOUT_MS,
    )


def test_the_page_draws_every_chart_and_hovers_with_the_network_cut(browser, tmp_path):
    html_text, n = toy_page()
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
        assert HOSTILE in view.locator("dd").nth(1).text_content()  # shown as text
        assert view.locator("img").count() == 0
        assert dialogs == []
        assert outside == []
    finally:
        context.close()


def test_minilm_s_page_draws_every_column_with_the_network_cut(browser, tmp_path):
    html_text, n = minilm_page()
    view, context, outside, _ = open_offline(browser, tmp_path, html_text)
    try:
        assert_all_drawn(view, n)
        assert outside == []
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
        assert_all_drawn(view, 1)  # the grid of every layer and head
        assert outside == []
    finally:
        context.close()
