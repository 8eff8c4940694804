"""Browser test of decoders from the server's folder ($TFVIZ_PRETRAINED_DIR, issue 32): one tiny
GPT-2, Llama (grouped-query attention) and Qwen2 built with transformers; each is offered in the
picker, opens in every view with its heatmaps drawn, shows its next tokens, and with W_o switched
off shows the switched next tokens beside the learned ones and continues the text in both.

The browser, page and waiting helpers are tests/browser/test_browser.py's (so the test is skipped
without
Chromium except under CI=true); the server is this module's own, started with the models folder
in its environment.
"""

from __future__ import annotations

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import assert_charts_drawn, assert_no_exception, rerun, screenshot
from tests.conftest import CODE, opened_app, resized
from tests.hf.test_hf_decoders import build  # skips this module without transformers (fails in CI)
from tests.support import link
from tfviz import hf, settings
from tfviz.core.interventions import Interventions
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser, page = shared.app_exists, shared.browser, shared.page

FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2"}
DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
CONTINUED = '[data-testid="stCode"]:has-text("▶")'  # a continuation's code block (Playwright)
# Both continuations written and the run over (the button's run writes them token by token).
BOTH_CONTINUED = """() => [...document.querySelectorAll('[data-testid="stCode"]')]
    .filter((c) => c.innerText.includes('▶')).length === 2
  && document.querySelector('[data-testid="stApp"]')
    .getAttribute('data-test-script-state') === 'notRunning'"""


@pytest.fixture(scope="module")
def model_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders_dir")
    for kind in FAMILIES:
        build(kind, root / kind)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_root):
    """`streamlit run app.py` with $TFVIZ_PRETRAINED_DIR set (found by shared.page by name)."""
    yield from shared.app_server(tmp_path_factory, {settings.PRETRAINED_DIR_ENV: str(model_root)})


def test_the_picker_offers_each_decoder_with_its_family(page):
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    picker.click()
    for kind, family in FAMILIES.items():
        option = page.get_by_role("option", name=f"{kind} ({family})", exact=True)
        assert option.count() == 1, kind
    page.keyboard.press("Escape")


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_each_decoder_opens_in_every_view(browser, server, kind):
    with opened_app(browser, link(server, model=f"folder:{kind}"), DESKTOP) as page:
        assert translate("en", "next.col.learned") in page.locator(CODE).first.inner_text()
        tabs = page.get_by_role("tab").all_inner_texts()
        assert len(tabs) == 8, tabs
        for label in tabs[1:] + tabs[:1]:  # Attention last, to see its charts drawn
            shared.open_tab(page, label)
            assert_no_exception(page)
            panel = page.locator('[role="tabpanel"]:not([hidden])')
            assert panel.locator('[data-testid="stElementContainer"]').count() > 0, label
        assert_charts_drawn(page, at_least=1, heatmaps=True)


def test_w_o_off_changes_the_next_tokens_and_the_continuation(browser, server, model_root):
    with opened_app(browser, link(server, model="folder:gpt2"), DESKTOP) as page:
        radio = page.locator('[data-testid="stSidebar"] [data-testid="stRadio"]')
        radio = radio.filter(has_text="W_o")
        identity = translate("en", "common.w_o.identity")
        switched_col = translate("en", "next.col.switched")
        rerun(
            page,
            lambda: radio.get_by_text(identity, exact=True).click(),
            f"() => document.querySelector('{CODE}')?.innerText.includes('{switched_col}')",
        )
        button = page.get_by_role("button", name=translate("en", "next.continue", n=20))
        rerun(page, button.click, BOTH_CONTINUED)
        shown = [c.inner_text().strip() for c in page.locator(CONTINUED).all()]
        loaded = hf.open_folder(model_root / "gpt2")
        text = page.get_by_role("textbox", name=translate("en", "next.box")).input_value()
        ids = list(loaded.tokenizer.encode(text).ids)
        stop = (loaded.tokenizer.sep_id,)
        for iv, got in zip((None, Interventions(w_o="identity")), shown, strict=True):
            tokens = hf.greedy_continuation(loaded.model, ids, hf.MAX_NEW_TOKENS, iv, stop)
            assert got == f"{text} ▶ {loaded.tokenizer.decode_ids(tokens)}".strip()
        assert_no_exception(page)
        screenshot(page, "browser_decoder_gpt2_w_o_off.png")


def test_a_decoder_reads_in_chinese_on_a_desktop_and_a_phone(browser, server):
    query = link(server, model="folder:llama", lang="zh", view="attention")
    with opened_app(browser, query, DESKTOP) as page:
        for screen, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            resized(page, viewport)  # one page, checked on each screen (tests.conftest)
            assert translate("zh", "next.col.learned") in page.locator(CODE).first.inner_text()
            assert_charts_drawn(page, at_least=1, heatmaps=True)
            body = page.locator("body").inner_text()
            assert translate("zh", "attention.causal") in body, screen
            screenshot(page, f"browser_decoder_llama_zh_{screen}.png")
