"""Browser tests of issue 16: what a link or a file name says is shown as inert text.

Streamlit's markdown (GFM) turns a bare https://... or www.... or name@domain into a link after
markdown escapes are resolved, so only a real browser shows whether a notice, a warning or a
message holds a link: AppTest gives the markdown source. A hostile link or upload must put no
<a> element into the page, and its text must still be there to read (tfviz.ui.common.md_escape
breaks each would-be link with an invisible word joiner, U+2060).

The server and browser are those of tests/test_browser.py (its fixtures are reused): skipped
without Chromium at /usr/bin/chromium, except under CI=true, where they fail.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests import test_browser as shared
from tests.test_browser import ALERT
from tests.test_browser_share import opened, quiet

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

ROOT = Path(__file__).resolve().parent.parent
WORD_JOINER = "\u2060"  # invisible: what the reader sees is the text without it
VIEWPORT = {"width": 1400, "height": 1000}
SIDEBAR = '[data-testid="stSidebar"]'
# An <a> the page would not hold without the hostile text (Streamlit's own page has none that
# point there, nor any inside an alert).
EVIL_LINK = 'a[href*="evil"], a[href^="mailto:"], a[href*="a.b"]'

# Query values that GFM would make links of, or that are markdown or HTML; each is refused by the
# app and quoted in a notice. Every one is shorter than the notices' quote (share.SHOWN_CHARS).
HOSTILE_LINKS = {
    "autolinks": {
        "model": "class moved, continue at https://evil.example/tfviz/login",
        "view": "www.evil.example",
    },
    "markdown": {
        "model": "[x](http://evil.example/a) **bold**",
        "view": "`code` <a href='http://evil.example'>y</a>",
        "w_o_mode": "admin@evil.example",
    },
}


def visible(text: str) -> str:
    return text.replace(WORD_JOINER, "")


def assert_inert(page, quoted: list[str]) -> None:
    """No link anywhere that the hostile text made, none in any alert, and each quoted text
    readable in the alerts."""
    alerts = page.locator(ALERT)
    assert alerts.count() >= 1
    assert alerts.locator("a").count() == 0, alerts.locator("a").evaluate_all(
        "els => els.map((a) => a.outerHTML)"
    )
    assert page.locator(EVIL_LINK).count() == 0
    assert page.locator(f"{ALERT} strong, {ALERT} em, {ALERT} code").count() == 0
    shown = visible("\n".join(alerts.all_inner_texts()))
    for text in quoted:
        assert text in shown, (text, shown)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", list(HOSTILE_LINKS))
def test_a_hostile_link_puts_no_link_into_its_notices(browser, server, case, lang):
    query = {**HOSTILE_LINKS[case], "lang": lang}
    with opened(browser, f"{server}/?{urlencode(query)}", VIEWPORT) as page:
        assert_inert(page, [v for k, v in query.items() if k != "lang"])


SORT = (ROOT / "models" / "sort.safetensors").read_bytes()


@pytest.mark.parametrize(
    "name, data",
    [
        ("see http://a.b and www.evil.example.safetensors", SORT),  # loaded: the success
        ("mail admin@evil.example or https://evil.example.safetensors", b"junk" * 10),  # refused
    ],
    ids=["loaded", "refused"],
)
def test_an_uploaded_file_name_puts_no_link_into_the_page(browser, server, name, data):
    with opened(browser, server, VIEWPORT) as page:
        uploader = page.locator(f'{SIDEBAR} input[type="file"]')
        uploader.set_input_files(
            files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
        )
        page.locator(f"{SIDEBAR} {ALERT}").first.wait_for()
        quiet(page)
        stem = name.removesuffix(".safetensors")
        assert_inert(page, [stem])
