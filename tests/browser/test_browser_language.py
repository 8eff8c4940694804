"""Browser test of the bundled language models (issue 42): each is in every server's picker with no
setting, opens in every view with its heatmaps drawn and its next characters shown, refuses a
text with characters outside its alphabet by name (in the page's language, no traceback), and
its Induction heads section draws in Chinese on a phone.

The browser, server, page and waiting helpers are tests/browser/test_browser.py's (so the test is
skipped
without Chromium, except under CI=true): the app as `streamlit run app.py` starts it, with no
model folder set.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    ALERT,
    assert_charts_drawn,
    assert_no_exception,
    rerun,
    screenshot,
)
from tests.conftest import CODE, opened_app, resized
from tests.support import link
from tfviz.training.language import LANGUAGE_RECIPES
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

NAMES = list(LANGUAGE_RECIPES)
DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}


def test_the_picker_offers_each_bundled_language_model(browser, server):
    with opened_app(browser, link(server), DESKTOP) as page:
        picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
        picker.click()
        label = translate("en", "folder.option_bundled")
        for name in NAMES:
            option = page.get_by_role("option", name=f"{name} ({label})", exact=True)
            assert option.count() == 1, name
        page.keyboard.press("Escape")


@pytest.mark.parametrize("name", NAMES)
def test_each_language_model_opens_in_every_view(browser, server, name):
    with opened_app(browser, link(server, model=f"bundled-lm:{name}"), DESKTOP) as page:
        assert translate("en", "next.col.learned") in page.locator(CODE).first.inner_text()
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert "Shakespeare" in sidebar and "nats" in sidebar  # what it learned, and how well
        tabs = page.get_by_role("tab").all_inner_texts()
        for label in tabs[1:] + tabs[:1]:  # Attention last, to see its charts drawn
            shared.open_tab(page, label)
            assert_no_exception(page)
        assert_charts_drawn(page, at_least=1, heatmaps=True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_text_outside_the_alphabet_is_refused_by_name_in_the_pages_language(browser, server, lang):
    query = link(server, model=f"bundled-lm:{NAMES[0]}", lang=lang)
    with opened_app(browser, query, DESKTOP) as page:
        box = page.get_by_role("textbox", name=translate(lang, "next.box"))
        box.fill("To be 我 🙂")
        outcome = f"() => document.querySelector('{ALERT}') !== null"
        rerun(page, lambda: box.press("Enter"), outcome)
        alert = page.locator(ALERT).first.inner_text()
        assert "'我' U+6211" in alert and "'🙂' U+1F642" in alert
        marker = "字符" if lang == "zh" else "characters"
        assert marker in alert
        assert_no_exception(page)
        screenshot(page, f"browser_language_refused_{lang}.png")


def test_the_induction_section_reads_in_chinese_on_a_phone_and_a_desktop(browser, server):
    query = link(server, model="bundled-lm:shakespeare-2l-attn", lang="zh", view="analysis")
    with opened_app(browser, query, DESKTOP) as page:
        section = translate("zh", "analysis.section.induction")
        group = page.locator('[data-testid="stButtonGroup"]').filter(has_text=section)
        rerun(
            page,
            lambda: group.get_by_text(section, exact=True).click(),
            f"() => document.body.innerText.includes({translate('zh', 'induction.best_head')!r})",
        )
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)
            charts = assert_charts_drawn(page, at_least=2)  # the stripe and the losses
            assert any(c["heatmaps"] > 0 for c in charts), charts  # the head's pattern
            assert_no_exception(page)
            screenshot(page, f"browser_language_induction_zh_{screen}.png")
