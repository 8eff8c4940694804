"""Browser test of W_o's freedom (Take W_o apart) and the logit lens with direct contributions
(Analysis): for the models and languages of tests/browser/test_browser_neuron.py's CASES (a toy
model, MiniLM, a GPT-2- and a Llama-style folder), on a phone (390 px) and a desktop (1400 px),
each section draws its charts, except the lens of a model without a vocabulary head (the toy
model, MiniLM's sentence encoder), which says in one line why it has none; screenshots go to
artifacts/.

The browser and waiting helpers are tests/browser/test_browser.py's (skipped without Chromium
except under CI=true); the server (its models folder holding a tiny Llama), the addresses and the
titled-chart wait are tests/browser/test_browser_neuron.py's.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser import test_browser_neuron as neuron
from tests.browser.test_browser import assert_no_exception, rerun, screenshot
from tests.browser.test_browser_neuron import (
    CASES,
    DESKTOP,
    PHONE,
    drawn_with_titles,
    opened_model,
)
from tests.conftest import resized
from tests.support import MAIN, shows
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, neuron.server


def picked(page, lang: str, section_key: str, outcome: str) -> None:
    """One section of a view's section picker clicked, and the run it starts drawn (outcome: a
    text only that section shows)."""
    label = translate(lang, section_key)
    group = page.locator('[data-testid="stButtonGroup"]').filter(has_text=label)
    rerun(page, lambda: group.get_by_text(label, exact=True).click(), shows(outcome))


def before(lang: str, key: str, **values) -> str:
    """A catalogue text up to its first placeholder (values: the placeholders' names)."""
    return translate(lang, key, **dict.fromkeys(values, "§")).split("§")[0]


# Models without a vocabulary head: the logit lens says why it has none.
NO_VOCABULARY = ("toy", "minilm")


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_w_o_s_freedom_draws_on_a_phone_and_a_desktop(browser, server, name, lang):
    with opened_model(browser, server, name, lang, "parts") as page:
        picked(page, lang, "parts.section.freedom", translate(lang, "parts.freedom.rank"))
        at = dict(layer=0, head=0, kv=0)
        titles = [
            before(lang, "parts.freedom.spectrum_chart", d_k=None),
            translate(lang, "parts.freedom.w_v_chart", **at),
            translate(lang, "parts.freedom.w_o_chart", **at),
            translate(lang, "parts.freedom.spaces_learned", layer=0),
            translate(lang, "parts.freedom.spaces_identity", layer=0),
        ]
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)
            assert_no_exception(page)
            drawn_with_titles(page, titles)
            screenshot(page, f"browser_freedom_{name}_{lang}_{screen}.png")


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_the_logit_lens_draws_or_says_why_not_on_a_phone_and_a_desktop(browser, server, name, lang):
    refusal = translate(lang, "refusal.lens.no_vocabulary")
    with opened_model(browser, server, name, lang, "analysis") as page:
        if name in NO_VOCABULARY:  # no vocabulary head: one line says so
            picked(page, lang, "analysis.section.lens", refusal)
        else:
            contributions = before(lang, "analysis.lens.contrib_title", token=None, position=None)
            picked(page, lang, "analysis.section.lens", contributions)
        titles = [
            translate(lang, "analysis.lens.title_learned"),
            translate(lang, "analysis.lens.heads_learned"),
        ]
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)
            assert_no_exception(page)
            if name in NO_VOCABULARY:
                assert refusal in page.locator(MAIN).inner_text()
                for title in titles:
                    charts = page.locator(".js-plotly-plot", has_text=neuron.title_pattern(title))
                    assert charts.count() == 0, title
            else:
                drawn_with_titles(page, titles)
            screenshot(page, f"browser_lens_{name}_{lang}_{screen}.png")
