"""Browser tests of a class's first hour (the first-hour issue), in a real Chromium: what AppTest
cannot see because it reruns the whole script where the browser reruns only a fragment, or because
the defect is in what the browser keeps.

- "Show this model" under a finished training opens that model in the sidebar's picker and in the
  address (a button in the main area, a fragment, used to rerun only the fragment: nothing moved).
- Switching the page to 中文 relabels every picker at once (the browser kept showing the choice's
  English label, "reverse (bundled)", "all layers").

The fixtures and helpers are tests/browser/test_browser.py's; skipped without Chromium except under
CI.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import APP_IDLE, assert_no_exception, open_tab, rerun, screenshot
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
# Its own server: a test here saves a trained model to the server's user models folder, which
# the other modules' pickers would then list.
app_exists, browser, page = shared.app_exists, shared.browser, shared.page
server = shared.private_server
MAIN = '[data-testid="stMain"]'
SIDEBAR = '[data-testid="stSidebar"]'
TRAIN_S = 120


def element_shows(where: str, text: str) -> str:
    """A JS predicate: the element `where` shows text."""
    return f"""() => {{
        const el = document.querySelector('{where}');
        return el !== null && el.innerText.includes({json.dumps(text)});
    }}"""


def picker_text(page, label: str) -> str:
    """What the select box labelled `label` shows as its choice (a combobox's input value)."""
    return page.get_by_role("combobox", name=label, exact=True).input_value()


def picker_shows(label: str, text: str) -> str:
    """A JS predicate: the select box labelled `label` shows text."""
    return f"""() => {{
        const box = Array.from(document.querySelectorAll('input[role="combobox"]'))
            .find((b) => b.getAttribute('aria-label') === {json.dumps(label)});
        return box !== undefined && box.value === {json.dumps(text)};
    }}"""


def test_show_this_model_opens_the_trained_model_in_the_picker_and_the_address(page):
    open_tab(page, "Train")
    name = page.get_by_role("textbox", name="Model name")
    name.fill("class_demo2")
    rerun(page, lambda: name.press("Enter"), "() => true")
    steps = page.get_by_role("spinbutton", name="Steps")
    steps.fill("60")
    steps.press("Tab")  # a form: the value is sent with the submit
    page.get_by_role("button", name="Start training").click()
    page.wait_for_function(element_shows(MAIN, "Show this model"), timeout=TRAIN_S * 1000)
    page.wait_for_selector(APP_IDLE)
    button = page.get_by_role("button", name="Show this model")
    rerun(page, button.click, picker_shows("Model", "class_demo2 (yours)"))
    page.wait_for_function(picker_shows("Model", "class_demo2 (yours)"))
    assert picker_text(page, "Model") == "class_demo2 (yours)"
    query = parse_qs(urlparse(page.url).query)
    assert query["model"] == ["yours:class_demo2"], page.url
    assert_no_exception(page)
    screenshot(page, "first_hour_show_this_model.png")


def test_switching_to_chinese_relabels_the_pickers_at_once(page):
    open_tab(page, "Before/after W_o")
    assert picker_text(page, "Model") == "reverse (bundled)"
    switch = page.locator(SIDEBAR).get_by_text("中文", exact=True)
    bundled = translate(
        "zh",
        "sidebar.model_option",
        name="reverse",
        source=translate("zh", "sidebar.source.bundled"),
    )
    model_label = translate("zh", "sidebar.model")
    rerun(page, switch.click, picker_shows(model_label, bundled))
    page.wait_for_function(picker_shows(model_label, bundled))
    assert picker_text(page, model_label) == bundled
    # Every select box on the page shows a label of the new language: none is left English.
    english = {"reverse (bundled)", "all layers"}
    shown = {box.input_value() for box in page.locator('input[role="combobox"]').all()}
    assert shown and not shown & english, shown
    assert_no_exception(page)
    screenshot(page, "first_hour_chinese_pickers.png")
