"""Browser test of the Lessons tab: every step, in English and in Chinese, in a real Chromium.

The server, browser and page fixtures and the waiting helpers are tests/browser/test_browser.py's
(imported, so both files start and drive the app the same way; like there, the test is skipped
without Chromium except under CI=true). Chinese is opened through the address (?lang=zh), which
tfviz.ui.i18n reads when the session has not chosen a language. What is checked on each step is
what a student sees: the step's title, no exception element, no ⟦missing key⟧ marker, and on
the first step the three dependency maps drawn. The decoder's steps (5-8, on the bundled language
model) are opened by a link and checked at a desktop's width and a phone's (390 px): their charts
drawn, nothing wider than the screen, a screenshot of each.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    EXCEPTION,
    assert_charts_drawn,
    assert_no_exception,
    open_tab,
    rerun,
    screenshot,
)
from tests.conftest import opened_app, resized
from tests.support import MAIN, shows
from tfviz.ui.i18n import missing, translate

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module: the test
# process's server and browser, a fresh session per test (opened_at, on the address it starts on).
app_exists, browser, server = shared.app_exists, shared.browser, shared.server
MARKER = missing("x")[0]  # the bracket that opens a missing key's marker


DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
# The decoder's steps and the charts each draws: one head's map (5, 6), the map and the loss
# along the text typed twice with the neuron view's three charts and the logit lens of its best
# induction head (7), the loss along the probe under each W_o switch (8).
DECODER_CHARTS = {5: 1, 6: 1, 7: 6, 8: 1}
# The main area's content width and the width it would scroll to: equal when nothing is wider
# than the screen.
WIDTHS_JS = f"""() => {{
    const main = document.querySelector('{MAIN}');
    return [main.clientWidth, main.scrollWidth];
}}"""


def check_step(page, lang: str, step: int) -> None:
    title = translate(lang, f"lessons.step{step}.title")
    page.wait_for_function(shows(title))
    assert_no_exception(page)
    text = page.locator(MAIN).inner_text()
    assert MARKER not in text, f"a key is missing from the {lang} catalogue on step {step}"
    assert translate(lang, "lessons.show_answer") in text
    if step == 1:
        assert_charts_drawn(page, at_least=1, heatmaps=True)  # without W_o and with W: one figure
        # The loaded model's map is drawn on request.
        show = page.get_by_text(translate(lang, "lessons.s1.show_model", name="reverse"))
        two_charts = "() => document.querySelectorAll('.js-plotly-plot').length >= 2"
        rerun(page, show.click, two_charts)
        assert_charts_drawn(page, at_least=2, heatmaps=True)
        assert MARKER not in page.locator(MAIN).inner_text()
        assert "1.8" in text
    if step == 3:  # the bundled sum_seed answers at once, nothing trained
        assert translate(lang, "lessons.s3.digits") in text
    if step in DECODER_CHARTS:  # the bundled language model's maps and loss curves
        assert_charts_drawn(page, at_least=DECODER_CHARTS[step], heatmaps=step in (5, 6))


def opened_at(browser, url: str):
    """A fresh session opened at url, as the page fixture opens the first page: a test that
    starts on another address loads that one page, not the first page and then its own."""
    return opened_app(browser, url, DESKTOP, settle=False, no_exception=False)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_lesson_step_in_both_languages(browser, server, lang):
    with opened_at(browser, server if lang == "en" else f"{server}/?lang={lang}") as page:
        every_lesson_step(page, lang)


def every_lesson_step(page, lang: str) -> None:
    open_tab(page, translate(lang, "app.view.lessons"))
    check_step(page, lang, 1)
    screenshot(page, f"browser_lessons_{lang}_1.png")
    for step in (2, 3, 4):
        button = page.get_by_role("button", name=translate(lang, "lessons.next"), exact=True)
        title = translate(lang, f"lessons.step{step}.title")
        rerun(page, button.click, shows(title))
        check_step(page, lang, step)
        screenshot(page, f"browser_lessons_{lang}_{step}.png")
    # Back one step with the other button, and the answer of the last step's question opens.
    back = page.get_by_role("button", name=translate(lang, "lessons.prev"), exact=True)
    rerun(page, back.click, shows(translate(lang, "lessons.step3.title")))
    page.get_by_text(translate(lang, "lessons.show_answer"), exact=True).click()
    page.wait_for_function(shows("99999999"))
    assert page.locator(EXCEPTION).count() == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decoder_steps_at_a_desktop_s_and_a_phone_s_width(browser, server, lang):
    link = f"{server}/?view=lessons&step=5" + ("&lang=zh" if lang != "en" else "")
    with opened_at(browser, link) as page:
        decoder_steps(page, lang)


def decoder_steps(page, lang: str) -> None:
    for step in DECODER_CHARTS:
        if step > 5:
            resized(page, DESKTOP)
            button = page.get_by_role("button", name=translate(lang, "lessons.next"), exact=True)
            rerun(page, button.click, shows(translate(lang, f"lessons.step{step}.title")))
        for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, size)
            check_step(page, lang, step)
            client, scroll = page.evaluate(WIDTHS_JS)
            assert scroll <= client + 1, f"step {step} is wider than a {name}: {scroll} > {client}"
            screenshot(page, f"browser_lessons_{lang}_{step}_{name}.png")
    # The last step's answer opens, worded from the model's numbers.
    page.get_by_text(translate(lang, "lessons.show_answer"), exact=True).click()
    page.wait_for_function(shows(translate(lang, "lessons.s8.answer_why")[:20]))
    assert_no_exception(page)
