"""Browser test (issue 31): every control on every tab has an accessible name, and the Train
tab's "Retrain W_o alone" draws its accuracy chart without a console warning or error.

A screen reader, a voice-control user and a test driving the page by role all find a control by
its accessible name, which Chromium computes as it does for them (the accessibility tree, read
over the DevTools protocol): an icon-only button with no aria-label has none. The console check
guards the Vega-Lite chart of the retraining (`Infinite extent for field "step"` on a first draw
from an empty dataset). Fixtures and helpers are tests/browser/test_browser.py's.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import APP_IDLE, assert_no_exception, open_tab, rerun, set_w_o
from tests.browser.test_browser_train_parts import RETRAIN_S, shows

pytestmark = pytest.mark.browser
app_exists, browser, server, page = shared.app_exists, shared.browser, shared.server, shared.page
# The roles a person operates; each must be named.
CONTROLS = {
    "button",
    "checkbox",
    "combobox",
    "link",
    "menuitem",
    "radio",
    "slider",
    "spinbutton",
    "switch",
    "tab",
    "textbox",
}


def unnamed_controls(page) -> list[str]:
    """The controls Chromium's accessibility tree holds without a name, each as its role and the
    start of its HTML (to find it by)."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
        out = []
        for node in nodes:
            role = node.get("role", {}).get("value")
            name = str(node.get("name", {}).get("value") or "").strip()
            if role in CONTROLS and not name and not node.get("ignored"):
                html = cdp.send("DOM.getOuterHTML", {"backendNodeId": node["backendDOMNodeId"]})
                out.append(f"{role}: {html['outerHTML'][:200]}")
        return out
    finally:
        cdp.detach()


def test_every_control_on_every_tab_has_an_accessible_name(page):
    set_w_o(page, "off (identity)")  # so that "W_o off: compare" shows its charts and controls
    tabs = page.get_by_role("tab").all_inner_texts()
    assert len(tabs) == 8, tabs
    for label in tabs:
        open_tab(page, label)
        page.wait_for_selector(APP_IDLE)
        assert unnamed_controls(page) == [], label
    assert_no_exception(page)


def test_retraining_w_o_alone_draws_without_a_console_warning(page):
    said: list[str] = []

    def heard(m):
        if m.type in ("warning", "error"):
            said.append(f"{m.type}: {m.text[:300]}")

    page.on("console", heard)  # taken off at the end: the tab serves the next test's page
    open_tab(page, "Train")
    rerun(page, page.get_by_role("radio", name="Retrain W_o alone").click, shows("W_o starts from"))
    steps = page.get_by_role("spinbutton", name="Steps")
    steps.fill("20")
    steps.press("Tab")  # a form: the value is sent with the submit
    page.get_by_role("button", name="Retrain W_o").click()
    page.wait_for_function(shows("retrained alone from"), timeout=RETRAIN_S * 1000)
    page.wait_for_selector(APP_IDLE)
    chart = page.locator('[data-testid="stVegaLiteChart"]')
    chart.locator("canvas, svg").first.wait_for()
    page.wait_for_timeout(1000)  # a late warning from the chart's second draw is caught too
    page.remove_listener("console", heard)
    assert said == []
    assert unnamed_controls(page) == []
    assert_no_exception(page)
