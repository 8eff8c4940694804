"""Browser test of the neuron view (Attention: inside one head) and each head's share of attn_out
(Before/after W_o): for a toy model, MiniLM, a GPT-2-style and a Llama-style folder (rotary,
grouped-query attention), each in English and Chinese (CASES), on a phone (390 px) and a desktop
(1400 px), both sections draw their charts; screenshots go to artifacts/.

The browser, page and waiting helpers are tests/browser/test_browser.py's (skipped without Chromium
except under CI=true); the server is this module's own, started with the models folder in its
environment.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import assert_charts_drawn, assert_no_exception, rerun, screenshot
from tests.conftest import TIMEOUT_MS, opened_app, resized
from tests.hf.test_hf_decoders import build  # skips this module without transformers (fails in CI)
from tests.support import link, shows
from tfviz import settings
from tfviz.hf import pretrained
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser = shared.app_exists, shared.browser

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
MODELS = {
    "toy": None,
    "llama": "folder:llama",
    "gpt2": "folder:gpt2",
    "minilm": f"pretrained:{pretrained.NAME}",
}
CASES = [(name, lang) for name in MODELS for lang in ("en", "zh")]
NEURON_CHARTS = 3  # q above the keys, q x k, and the scores' bars
SHARE_CHARTS = 2  # the layers' flow, and one layer's tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`streamlit run app.py` with $TFVIZ_PRETRAINED_DIR holding tiny Llama- and GPT-2-style
    folders."""
    root = tmp_path_factory.mktemp("neuron_dir")
    for kind in ("llama", "gpt2"):
        build(kind, root / kind)
    yield from shared.app_server(tmp_path_factory, {settings.PRETRAINED_DIR_ENV: str(root)})


def query(server: str, model: str | None, lang: str, view: str) -> str:
    params = {"lang": lang, "view": view}
    if model is not None:
        params["model"] = model
    return link(server, **params)


def opened_model(browser, server: str, name: str, lang: str, view: str):
    """A fresh session on one of MODELS in one view, at a desktop's size, waited for as its first
    run draws: a sentence model's similarity (loaded on first use: given longer), else the
    prediction."""
    url = query(server, MODELS[name], lang, view)
    if name == "minilm":
        first = dict(first=".st-key-similarity", first_timeout_ms=4 * TIMEOUT_MS)
        return opened_app(browser, url, DESKTOP, **first)
    return opened_app(browser, url, DESKTOP)


def title_pattern(title: str) -> re.Pattern:
    """A chart title as a pattern that also matches it broken into lines: plotly draws a long
    title's lines as separate text elements, whose text runs together without the spaces."""
    return re.compile(r"\s*".join(re.escape(c) for c in title if not c.isspace()))


# A canvas chart (tfviz.ui.widgets.canvas_charts) drawn with a title: its title is painted on
# the canvas, not in the page's text, so it is read from the figure standalone.js drew.
CANVAS_TITLED_JS = """title => Array.from(document.querySelectorAll('.tfviz-chart[data-drawn]'))
    .some((div) => ((div.__figure.layout.title || {}).text || '').includes(title))"""


def drawn_with_titles(page, titles: list[str]) -> None:
    """Every chart on the page drawn, and one with each title, plotly's or a canvas chart
    (waited for: the page's other charts may be drawn before these are)."""
    for title in titles:
        plotly_chart = page.locator(".js-plotly-plot", has_text=title_pattern(title))
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not (plotly_chart.count() or page.evaluate(CANVAS_TITLED_JS, title)):
            if time.monotonic() > deadline:
                body = page.locator('[data-testid="stMain"]').inner_text()
                raise AssertionError((title, body[:300]))
            page.wait_for_timeout(100)
    assert assert_charts_drawn(page, at_least=len(titles))


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_the_neuron_view_draws_on_a_phone_and_a_desktop(browser, server, name, lang):
    with opened_model(browser, server, name, lang, "attention") as page:
        toggle = page.locator(".st-key-attn_neuron label")
        said = translate(lang, "attention.neuron.qk_caption", d_k="§").split("§")[0]
        rerun(page, toggle.click, shows(said))
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)
            assert_no_exception(page)
            drawn_with_titles(
                page,
                [
                    translate(lang, "chart.title.neuron_qk"),
                    translate(lang, "chart.title.neuron_product"),
                    translate(lang, "chart.panel.dot"),
                ],
            )
            text = page.locator('[data-testid="stMain"]').inner_text()
            assert translate(lang, "attention.neuron.toggle") in text
            screenshot(page, f"browser_neuron_{name}_{lang}_{screen}.png")


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_the_head_shares_draw_on_a_phone_and_a_desktop(browser, server, name, lang):
    with opened_model(browser, server, name, lang, "w_o") as page:
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)
            assert_no_exception(page)
            title = translate(lang, "w_o.shares.flow_title", at="§").split("§")[0]
            drawn_with_titles(page, [title, translate(lang, "w_o.shares.tokens_title", layer=0)])
            screenshot(page, f"browser_shares_{name}_{lang}_{screen}.png")
