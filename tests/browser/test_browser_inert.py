"""Browser tests of issue 16: what a user gives is shown as inert text, and never silently lost.

Streamlit's markdown (GFM) turns a bare https://... or www.... or name@domain into a link after
markdown escapes are resolved, so only a real browser shows whether a notice, a warning or a
message holds a link: AppTest gives the markdown source. A hostile link or upload must put no
<a> element into the page, and its text must still be there to read (tfviz.ui.text.md_escape
breaks each would-be link with an invisible word joiner, U+2060).

A text box with Streamlit's max_chars drops a longer paste in the browser without a word (the
box keeps its old text); AppTest cannot see that either. The boxes have none: a long paste is
refused with a message naming the limit. A link carries whatever a sentence box takes.

The server and browser are those of tests/browser/test_browser.py (its fixtures are reused): skipped
without Chromium at /usr/bin/chromium, except under CI=true, where they fail.
"""

from __future__ import annotations

import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    ALERT,
    rerun,
    shot_of,
)
from tests.conftest import opened_app, quiet
from tfviz.hf import pretrained
from tfviz.ui import share
from tfviz.ui.kinds import MAX_SENTENCE_CHARS

pytestmark = pytest.mark.browser
app_exists, browser, server = shared.app_exists, shared.browser, shared.server

ROOT = Path(__file__).resolve().parents[2]
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
        "see https://evil.example/login": "1",  # a key a link cannot set: quoted in its note
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
    # The catalogue's own markup may be drawn (a Chinese refusal's `config.json` in code); none
    # of it may hold what the hostile text brought.
    marked = page.locator(f"{ALERT} strong, {ALERT} em, {ALERT} code").all_inner_texts()
    assert not [m for m in marked if any(s in m for s in ("evil", "http", "@", "www", "*"))], marked
    shown = visible("\n".join(alerts.all_inner_texts()))
    for text in quoted:
        assert text in shown, (text, shown)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", list(HOSTILE_LINKS))
def test_a_hostile_link_puts_no_link_into_its_notices(browser, server, case, lang):
    query = {**HOSTILE_LINKS[case], "lang": lang}
    with opened_app(browser, f"{server}/?{urlencode(query)}", VIEWPORT) as page:
        # For a person to look at: the quotes read as written.
        shot_of(page.locator(ALERT).first, f"inert_link_{case}_{lang}.png")
        quoted = [v if k in share.KEYS else k for k, v in query.items() if k != "lang"]
        assert_inert(page, quoted)
        assert set(parse_qs(urlparse(page.url).query)) <= set(share.KEYS)  # dropped from it


SORT = (ROOT / "models" / "sort.safetensors").read_bytes()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(
    "name, data",
    [
        ("see http://a.b and www.evil.example.safetensors", SORT),  # loaded: the success
        ("mail admin@evil.example or https://evil.example.safetensors", b"junk" * 10),  # refused
    ],
    ids=["loaded", "refused"],
)
def test_an_uploaded_file_name_puts_no_link_into_the_page(browser, server, name, data, lang):
    with opened_app(browser, f"{server}/?lang={lang}", VIEWPORT) as page:
        uploader = page.locator(f'{SIDEBAR} input[type="file"]')
        uploader.set_input_files(
            files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
        )
        page.locator(f"{SIDEBAR} {ALERT}").first.wait_for()
        quiet(page)
        stem = name.removesuffix(".safetensors")
        assert_inert(page, [stem])
        if data is SORT:  # loaded: its name is an option of the model picker, shown as text
            page.locator(f'{SIDEBAR} [data-testid="stSelectbox"]').first.click()
            options = page.get_by_role("option")
            options.first.wait_for()
            texts = [visible(o) for o in options.all_inner_texts()]
            assert any(stem in o for o in texts), texts
            assert page.locator('[role="listbox"] a, [role="listbox"] strong').count() == 0
            assert page.locator(EVIL_LINK).count() == 0
            page.keyboard.press("Escape")


# ---- a long paste is refused with a message, never dropped ---------------------------------

ALERT_UP = f"() => document.querySelector('{ALERT}') !== null"


def paste(page, key: str, text: str) -> None:
    box = page.locator(f".st-key-{key} input")
    box.fill(text)
    rerun(page, lambda: box.press("Enter"), ALERT_UP)
    assert box.input_value() == text  # the box shows what was pasted, not its old text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_long_paste_into_the_sequence_box_is_refused_with_a_message(browser, server, lang):
    with opened_app(browser, f"{server}/?lang={lang}", VIEWPORT) as page:
        paste(page, "sequence", "abc" * 3334)  # 10,002 characters; the reverse task takes 16
        message = page.locator(ALERT).first.inner_text()
        assert "10002" in message and "16" in message, message


MINILM = "pretrained:all-MiniLM-L6-v2"
PIECES = '.st-key-pieces [data-testid="stCode"]'  # the sentence model's word-pieces


@contextmanager
def opened_minilm_link(browser, query: dict[str, str]):
    """tests.conftest.opened_app for the sentence model, which shows word-pieces instead of
    a prediction; skipped where the model's package is not installed (and only there)."""
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    url = f"{browser.tfviz_server}/?{urlencode({'model': MINILM, **query})}"
    with opened_app(browser, url, VIEWPORT, first=f"{PIECES}, {ALERT}") as page:
        assert page.locator(".st-key-sentence_b input").count() == 1, "the link did not open it"
        yield page


def test_a_sentence_box_refuses_past_its_limit_and_a_link_carries_up_to_it(browser, server):
    limit = MAX_SENTENCE_CHARS
    browser.tfviz_server = server
    with opened_minilm_link(browser, {}) as page:
        paste(page, "sequence", "a" * (limit + 1))
        message = page.locator(ALERT).first.inner_text()
        assert f"{limit + 1:,}" in message and f"{limit:,}" in message, message
        # Chinese: nine characters of a link each (percent-encoded UTF-8).
        longest = "猫坐在垫子上。" * (limit // 7) + "猫" * (limit % 7)
        assert len(longest) == limit
        box = page.locator(".st-key-sequence input")
        box.fill(longest)
        wanted = f"() => new URLSearchParams(location.search).get('sequence')?.length === {limit}"
        rerun(page, lambda: box.press("Enter"), wanted)
        link = parse_qs(urlparse(page.url).query)
        notes = page.locator(ALERT).all_inner_texts()  # where the model cut the text
    assert link["sequence"] == [longest]
    with opened_minilm_link(browser, {k: v[0] for k, v in link.items()}) as page:
        assert page.locator(".st-key-sequence input").input_value() == longest
        assert page.locator(ALERT).all_inner_texts() == notes  # and no notice about the link


def test_the_longest_link_the_boxes_make_is_one_the_server_takes(server):
    worst = "😀" * MAX_SENTENCE_CHARS  # four bytes, twelve characters once percent-encoded
    query = urlencode({"model": MINILM, "sequence": worst, "sentence_b": worst, "view": "w_o_off"})
    with urllib.request.urlopen(f"{server}/?{query}", timeout=30) as reply:
        assert reply.status == 200
