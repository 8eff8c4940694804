"""Browser test of the Train view's "Retrain W_o alone": a retraining run in a real Chromium.

The server, browser and page fixtures and the waiting helpers are tests/browser/test_browser.py's
(imported, so every browser test starts and drives the app the same way; like there, the test is
skipped without Chromium except under CI=true). What is checked is what a student sees: the job's
progress, then the outcome line, the three numbers (learned, start, after) and the accuracy
curve drawn, and no exception element.
"""

from __future__ import annotations

import re

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import APP_IDLE, assert_no_exception, open_tab, rerun, screenshot
from tests.support import MAIN, shows

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module.
app_exists, browser, server, page = shared.app_exists, shared.browser, shared.server, shared.page
RETRAIN_S = 120  # 40 steps of W_o alone and 21 measurements: seconds on 2 shared cores


def test_retraining_w_o_alone_shows_the_accuracy_coming_back(page):
    open_tab(page, "Train")
    part = page.get_by_role("radio", name="Retrain W_o alone")
    rerun(page, part.click, shows("W_o starts from"))
    steps = page.get_by_role("spinbutton", name="Steps")
    steps.fill("40")
    steps.press("Tab")  # a form: the value is sent with the submit
    page.get_by_role("button", name="Retrain W_o").click()
    page.wait_for_function(shows("retrained alone from"), timeout=RETRAIN_S * 1000)
    page.wait_for_selector(APP_IDLE)
    main = page.locator(MAIN).inner_text()
    assert re.search(r"W_o of reverse retrained alone from identity \(W_o off\) for 40 steps", main)
    # learned, start and after: three percentages (reverse is scored by token accuracy).
    values = page.locator(f'{MAIN} [data-testid="stMetricValue"]').all_inner_texts()
    assert len(values) == 3 and all(re.fullmatch(r"\d+\.\d%", v) for v in values), values
    learned, start, after = (float(v.rstrip("%")) for v in values)
    assert start < learned and start < after  # W_o off costs accuracy; retraining gets it back
    chart = page.locator('[data-testid="stVegaLiteChart"]')
    chart.locator("canvas, svg").first.wait_for()
    assert chart.bounding_box()["width"] > 100
    assert_no_exception(page)
    screenshot(page, "train_retrain_w_o.png")
