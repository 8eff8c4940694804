"""Browser test of the W_o atlas (issue 29): a fresh server opens "Does W_o matter?" on the
bundled atlas, its grid and a cell's curves drawn, and a student opens another cell; the language
atlas's grid below it is drawn within the page's width; in English and Chinese, on a desktop and a
phone's width, with screenshots in artifacts/ (the page, and the language atlas's grid alone).

The browser, server and waiting helpers are tests/browser/test_browser.py's (so the test is
skipped without Chromium except under CI=true); one page a language serves both widths.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    assert_charts_drawn,
    assert_no_exception,
    screenshot,
    shot_of,
)
from tests.conftest import opened_app, quiet, resized
from tfviz.experiments import atlas_stats
from tfviz.experiments.atlas_cells import LANGUAGE_FORMAT
from tfviz.experiments.atlas_store import BUNDLED, LANGUAGE, read_rows
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

TITLE_JS = """key => Array.from(document.querySelectorAll(`.st-key-${key} .gtitle`))
                       .map((t) => t.textContent).join(' ')"""
# The rerun a pick starts is over once the curves carry a new title naming the picked cell's task
# (the picker itself shows the name at once, so the page's text cannot tell). Compared without
# spaces: a wrapped title's lines are tspans, read back without the space the wrap took.
NEW_CURVES_JS = """([before, task]) => {
  const squeeze = (s) => s.replace(/[\\s\\u00a0]+/g, '');
  const now = squeeze(Array.from(document.querySelectorAll('.st-key-atlas_cell_curves .gtitle'))
                        .map((t) => t.textContent).join(' '));
  return now !== squeeze(before) && now.includes(squeeze(task));
}"""
PICK_TIMEOUT_MS = 90_000  # a rerun that draws the curves again, on 2 cores shared with a worker


def squeezed(text: str) -> str:
    """text without its spaces, as NEW_CURVES_JS compares titles (a wrap drops its space)."""
    return "".join(text.split())


def curves_title(page) -> str:
    return page.evaluate(TITLE_JS, "atlas_cell_curves")


@pytest.fixture(scope="module", params=["en", "zh"])
def page_in(request, browser, server):
    """One session a language, opened on its address (?lang=zh) at a desktop's size: (page,
    language). Its tests take it in turn, each at its own width, each opening another cell: a
    page load and the view's first drawing cost the browser more than a pick does."""
    lang = request.param
    url = server if lang == "en" else f"{server}/?lang={lang}"
    desktop = {"width": 1400, "height": 1000}
    with opened_app(browser, url, desktop, settle=False, no_exception=False) as page:
        yield page, lang


@pytest.mark.parametrize("width", [1400, 390])
def test_the_atlas_opens_and_a_cell_opens_its_curves(page_in, width):
    page, lang = page_in
    rows = read_rows(BUNDLED)
    results = atlas_stats.analyse(rows)
    resized(page, {"width": width, "height": 900})  # the first test's width, then the next's
    shared.open_tab(page, translate(lang, "app.view.experiment"))
    assert_no_exception(page)
    panel = page.locator('[role="tabpanel"]:not([hidden])')
    panel.locator(".st-key-atlas_grid").first.wait_for()
    assert_charts_drawn(page, at_least=3)  # the grid, a cell's curves, the task's own experiment
    grid_title = page.evaluate(TITLE_JS, "atlas_grid")
    # A title's lines are tspans, read back without the space a wrap took: compare without any.
    want = translate(lang, "atlas.grid.title", other=translate(lang, "atlas.versus.identity"))
    assert want.replace(" ", "") in grid_title.replace("\xa0", "").replace(" ", "")
    intro = translate(lang, "atlas.intro", runs=f"{len(rows):,}", cells=len(results), seeds=5)
    assert intro.split("。")[0].split(".")[0][:30] in panel.inner_text()

    # Open the last cell of the picker: its curves are drawn under its own title.
    combo = panel.locator(".st-key-atlas_cell [role=combobox]")
    before = curves_title(page)
    combo.scroll_into_view_if_needed()  # the main area scrolls inside itself
    combo.click()
    options = page.get_by_role("option")
    # The list opens a moment after the click: count() does not wait, and read none now and then.
    options.first.wait_for()
    # Not the cell open now (picking it again would start no rerun): the one its curves' title
    # names. (The picker's own text read back empty now and then: a session can open on the
    # cell the previous test picked, and the old check then picked it again.)
    names = [options.nth(i).inner_text() for i in range(options.count())]
    name = next(n for n in reversed(names) if squeezed(n) not in squeezed(before))
    task = name.split(" · ")[0]
    # Typed, not clicked: on a phone the list scrolls under the pointer, and a click picked a
    # neighbouring cell now and then. The picker filters by what is typed; Enter takes the match.
    page.keyboard.type(name)
    page.keyboard.press("Enter")
    try:
        page.wait_for_function(NEW_CURVES_JS, arg=[before, task], timeout=PICK_TIMEOUT_MS)
    except Exception as e:  # say what the page showed instead
        picked = combo.inner_text()
        raise AssertionError(
            f"picked {name!r}, the picker shows {picked!r}; curves titled "
            f"{curves_title(page)!r} (before: {before!r})"
        ) from e
    quiet(page)
    assert_no_exception(page)
    after = curves_title(page)
    assert after != before and task.replace(" ", "") in after.replace(" ", "")  # its task named
    assert panel.locator("[data-testid=stDataFrame]").count() >= 1  # the cell's numbers
    language_grid(page, panel, lang, width)
    screenshot(page, f"browser_atlas_{lang}_{width}.png")


def language_grid(page, panel, lang: str, width: int) -> None:
    """The language atlas's grid, scrolled to: drawn under its title, no wider than the page, and
    kept as a screenshot of its own; without rows, the message that says how to make them."""
    if not read_rows(LANGUAGE, LANGUAGE_FORMAT):
        empty = translate(lang, "latlas.empty")
        assert squeezed(empty.split("`")[0]) in squeezed(panel.inner_text())
        return
    grid = panel.locator(".st-key-latlas_grid").first
    grid.scroll_into_view_if_needed()  # the main area scrolls inside itself
    grid.locator(".main-svg").first.wait_for()
    measure = translate(lang, f"atlas.measure.{atlas_stats.LANGUAGE_HEADLINE}")
    want = translate(lang, "latlas.grid.title", what=measure)
    assert squeezed(want) in squeezed(page.evaluate(TITLE_JS, "latlas_grid"))
    box = grid.bounding_box()
    assert box is not None and box["width"] <= width, box
    shot_of(grid, f"browser_language_atlas_{lang}_{width}.png")
