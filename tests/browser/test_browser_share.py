"""Browser tests of issue #10: a shared link restores its view, a phone sees the page without
sideways scrolling, a chart's toolbar downloads it as PNG and SVG, and every control has a name
and works from the keyboard, in both languages.

The server, the browser and the skip rules are those of tests/browser/test_browser.py (its fixtures
are reused): skipped without Chromium at /usr/bin/chromium, except under CI=true, where they
fail. Screenshots go to artifacts/ for a human to look at.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    CODE,
    PLOT,
    rerun,
    shot_of,
)
from tests.conftest import opened_app, quiet
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module: the test
# process's server and browser.
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

PHONE = {"width": 390, "height": 844}


def address_query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_a_shared_link_opens_exactly_that_view(browser, server):
    link = {
        "model": "bundled:sum",
        "sequence": "12345",
        "w_o_mode": "identity",
        "w_o_scope": "1",
        "ablate": "L0H1",
        "view": "w_o_off",
        "lang": "zh",
    }
    with opened_app(
        browser, f"{server}/?{urlencode(link)}", {"width": 1400, "height": 1000}
    ) as page:
        tab = page.get_by_role("tab", name=translate("zh", "app.view.w_o_off"), exact=True)
        assert tab.get_attribute("aria-selected") == "true"
        assert page.locator(".st-key-sequence input").input_value() == "12345"
        sidebar = page.locator('[data-testid="stSidebar"]')
        identity = translate("zh", "common.w_o.identity")
        checked = sidebar.locator('[data-testid="stRadio"] label:has(input:checked)')
        assert checked.inner_text().strip() == identity
        # The sum model's answer to 12345: the digits' sum, under the input.
        lines = page.locator(CODE).first.inner_text().splitlines()
        assert lines[0].split()[-1] == "12345" and lines[1].split()[-1] == "15", lines
        assert "L0H1" in sidebar.locator('[data-testid="stMultiSelect"]').inner_text()
        header = page.locator('[data-testid="stMain"] [data-testid="stHeading"]').first.inner_text()
        assert header.strip() == translate("zh", "app.title")
        assert page.locator('[data-testid="stAlert"]').count() == 0  # nothing refused
        # The address keeps the view, language included (nothing dropped on the way).
        kept = address_query(page)
        for key, value in link.items():
            assert kept.get(key) == value, (key, kept)
        copy = page.locator('[data-testid="stCode"]').filter(has_text="view=w_o_off")
        assert "lang=zh" in copy.first.text_content()  # the link to copy keeps the language


def test_the_address_follows_a_change(browser, server):
    with opened_app(browser, server, {"width": 1400, "height": 1000}) as page:
        box = page.locator(".st-key-sequence input")
        box.fill("jjiihh")

        def typed() -> None:
            box.press("Enter")

        rerun(page, typed, "() => location.search.includes('sequence=jjiihh')")
        page.wait_for_function("() => location.search.includes('sequence=jjiihh')")
        assert address_query(page)["model"] == "bundled:reverse"


def test_a_hostile_link_shows_the_default_page_and_notices(browser, server):
    link = "?model=%3Cscript%3Ealert(1)%3C%2Fscript%3E&w_o_mode=rank%3A0&ablate=L99H99&view=x"
    with opened_app(browser, f"{server}/{link}", {"width": 1400, "height": 1000}) as page:
        alerts = page.locator('[data-testid="stAlert"]')
        assert alerts.count() == 4
        assert "<script>" in alerts.all_inner_texts()[0] or any(
            "<script>" in text for text in alerts.all_inner_texts()
        )  # shown as text, never run
        assert page.evaluate("() => typeof window.alert") == "function"
        assert "sum" not in address_query(page).get("model", "")


def test_a_phone_sees_sequence_and_prediction_first_and_never_scrolls_sideways(browser, server):
    with opened_app(browser, server, PHONE, is_mobile=True, has_touch=True) as page:
        shot_of(page, "browser_phone_390x844.png")
        widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"
        box = page.locator(".st-key-sequence input").bounding_box()
        code = page.locator(CODE).bounding_box()
        assert box is not None and code is not None
        assert box["y"] + box["height"] <= PHONE["height"], box  # on the first screen
        assert code["y"] < PHONE["height"], code  # the prediction starts on the first screen
        # No element but a chart is wider than the screen.
        wide = page.evaluate(
            """() => Array.from(document.querySelectorAll('[data-testid="stMain"] *'))
                .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
                .filter((el) => !el.closest('.js-plotly-plot, [data-testid="stPlotlyChart"]'))
                .filter((el) => getComputedStyle(el).visibility !== 'hidden')
                .map((el) => el.tagName + '.' + (el.getAttribute('data-testid') || ''))
                .slice(0, 10)"""
        )
        assert wide == [], f"wider than the phone: {wide}"


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_the_chart_toolbar_downloads_png_and_svg(browser, server, fmt):
    desktop = {"width": 1400, "height": 1000}
    # Before/after W_o: its W_o map is plotly's (the charts a keystroke redraws, like the
    # Attention grid, are canvas charts, which save PNG only, from a button of their own).
    link = f"{server}/?view=w_o"
    with opened_app(browser, link, desktop, accept_downloads=True) as page:
        if fmt == "svg":
            button = page.locator(".st-key-chart_format button").filter(has_text="SVG")

            def pick() -> None:
                button.click()

            # Waits for what the switch changes, the chart's save format, not for a "running"
            # state a fast rerun can skip.
            saves_svg = """() => {
                const plot = document.querySelector('.js-plotly-plot');
                return plot?._context?.toImageButtonOptions?.format === 'svg';
            }"""
            rerun(page, pick, saves_svg)
        chart = page.locator(PLOT).first
        chart.hover()
        camera = chart.locator('.modebar-btn[data-title^="Download plot"]')
        with page.expect_download() as download:
            camera.click()
        name = download.value.suggested_filename
        assert name == f"tfviz_reverse_w_o.{fmt}", name
        path = download.value.path()
        head = path.read_bytes()[:200]
        if fmt == "png":
            assert head.startswith(b"\x89PNG")
        else:
            assert b"<svg" in head


# A control in an ARIA snapshot with no name after its role: '- button' or '- textbox [disabled]'.
UNNAMED = re.compile(
    r"^\s*- (button|textbox|combobox|tab|radio|checkbox|slider|spinbutton|switch)\s*(\[.*\])?:?$"
)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_control_has_a_name_and_the_keyboard_reaches_and_works_them(browser, server, lang):
    url = f"{server}/?lang={lang}&view=lessons"
    with opened_app(browser, url, {"width": 1400, "height": 1000}) as page:
        snapshot = page.locator("body").aria_snapshot()
        unnamed = [line for line in snapshot.splitlines() if UNNAMED.match(line)]
        assert unnamed == [], f"controls without a name: {unnamed}"
        # Tab from the top of the page reaches the sequence box.
        box = page.locator(".st-key-sequence input")
        page.locator("body").focus()
        for _ in range(80):
            page.keyboard.press("Tab")
            if box.evaluate("el => el === document.activeElement"):
                break
        else:
            raise AssertionError("Tab never reached the sequence box")
        # The tabs: arrow keys move between them and open the one reached.
        lessons = page.get_by_role("tab", name=translate(lang, "app.view.lessons"), exact=True)
        lessons.focus()
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("Enter")
        experiment = page.get_by_role("tab", name=translate(lang, "app.view.experiment"))
        page.wait_for_function(
            "el => el.getAttribute('aria-selected') === 'true'", arg=experiment.element_handle()
        )
        quiet(page)
        assert address_query(page)["view"] == "experiment"
