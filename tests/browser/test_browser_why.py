"""Browser test of the views that show why, on one session a model and language: the neuron view
(Attention: inside one head), each head's share of attn_out (Before/after W_o), W_o's freedom
(Take W_o apart) and the logit lens with direct contributions (Analysis). For a toy model, MiniLM,
a GPT-2-style and a Llama-style folder (rotary, grouped-query attention), each in English and
Chinese (CASES), on a phone (390 px) and a desktop (1400 px), each part draws its charts, except
the lens of a model without a vocabulary head (the toy model, MiniLM's sentence encoder), which
says in one line why it has none; screenshots go to artifacts/.

The four tests of a case share one page (the module's `opened` fixture, parametrized by case):
each opens its own tab, as a student moves between them. One page a case, not one a test: a page
load costs the browser more than a tab's run does.

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
from tests.support import MAIN, link, shows
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


# Models without a vocabulary head: the logit lens says why it has none.
NO_VOCABULARY = ("toy", "minilm")


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{lang}" for n, lang in CASES])
def opened(request, browser, server):
    """One session a case, opened on the Attention tab: (page, model name, language). Its four
    tests take it in turn (pytest runs a module's tests grouped by this fixture's case); on
    leaving, no exception element and no uncaught error on the page (opened_app)."""
    name, lang = request.param
    with opened_model(browser, server, name, lang, "attention") as page:
        yield page, name, lang


def on_tab(opened, view: str):
    """The case's page on one tab, at the size the test before left it: (page, model name,
    language)."""
    page, name, lang = opened
    shared.open_tab(page, translate(lang, f"app.view.{view}"))
    return page, name, lang


def screens(page) -> list[tuple[str, dict]]:
    """The desktop and the phone, the page's present size first: each test checks both, and
    starting where the test before ended saves the page a resize and its redrawing."""
    both = [("desktop", DESKTOP), ("phone", PHONE)]
    return both[::-1] if page.viewport_size == PHONE else both


def picked(page, lang: str, section_key: str, outcome: str) -> None:
    """One section of a view's section picker clicked, and the run it starts drawn (outcome: a
    text only that section shows)."""
    label = translate(lang, section_key)
    group = page.locator('[data-testid="stButtonGroup"]').filter(has_text=label)
    rerun(page, lambda: group.get_by_text(label, exact=True).click(), shows(outcome))


def before(lang: str, key: str, **values) -> str:
    """A catalogue text up to its first placeholder (values: the placeholders' names)."""
    return translate(lang, key, **dict.fromkeys(values, "§")).split("§")[0]


def test_the_neuron_view_draws_on_a_phone_and_a_desktop(opened):
    page, name, lang = on_tab(opened, "attention")
    toggle = page.locator(".st-key-attn_neuron label")
    rerun(page, toggle.click, shows(before(lang, "attention.neuron.qk_caption", d_k=None)))
    for screen, viewport in screens(page):
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
        assert translate(lang, "attention.neuron.toggle") in page.locator(MAIN).inner_text()
        screenshot(page, f"browser_neuron_{name}_{lang}_{screen}.png")


def test_the_head_shares_draw_on_a_phone_and_a_desktop(opened):
    page, name, lang = on_tab(opened, "w_o")
    for screen, viewport in screens(page):
        resized(page, viewport)
        assert_no_exception(page)
        title = before(lang, "w_o.shares.flow_title", at=None)
        drawn_with_titles(page, [title, translate(lang, "w_o.shares.tokens_title", layer=0)])
        screenshot(page, f"browser_shares_{name}_{lang}_{screen}.png")


def test_w_o_s_freedom_draws_on_a_phone_and_a_desktop(opened):
    page, name, lang = on_tab(opened, "parts")
    picked(page, lang, "parts.section.freedom", translate(lang, "parts.freedom.rank"))
    at = dict(layer=0, head=0, kv=0)
    titles = [
        before(lang, "parts.freedom.spectrum_chart", d_k=None),
        translate(lang, "parts.freedom.w_v_chart", **at),
        translate(lang, "parts.freedom.w_o_chart", **at),
        translate(lang, "parts.freedom.spaces_learned", layer=0),
        translate(lang, "parts.freedom.spaces_identity", layer=0),
    ]
    for screen, viewport in screens(page):
        resized(page, viewport)
        assert_no_exception(page)
        drawn_with_titles(page, titles)
        screenshot(page, f"browser_freedom_{name}_{lang}_{screen}.png")


def test_the_logit_lens_draws_or_says_why_not_on_a_phone_and_a_desktop(opened):
    page, name, lang = on_tab(opened, "analysis")
    refusal = translate(lang, "refusal.lens.no_vocabulary")
    if name in NO_VOCABULARY:  # no vocabulary head: one line says so
        picked(page, lang, "analysis.section.lens", refusal)
    else:
        contributions = before(lang, "analysis.lens.contrib_title", token=None, position=None)
        picked(page, lang, "analysis.section.lens", contributions)
    titles = [
        translate(lang, "analysis.lens.title_learned"),
        translate(lang, "analysis.lens.heads_learned"),
    ]
    for screen, viewport in screens(page):
        resized(page, viewport)
        assert_no_exception(page)
        if name in NO_VOCABULARY:
            assert refusal in page.locator(MAIN).inner_text()
            for title in titles:
                charts = page.locator(".js-plotly-plot", has_text=title_pattern(title))
                assert charts.count() == 0, title
        else:
            drawn_with_titles(page, titles)
        screenshot(page, f"browser_lens_{name}_{lang}_{screen}.png")
