"""Browser test of a model from the server's folder ($TFVIZ_PRETRAINED_DIR, issue 19): pick a tiny
BERT built with transformers, see its attention drawn and its fill-in-the-mask answers, then
switch W_o off and see the switched answers beside the learned ones, equal to hf.fill_mask's.

The browser, page and waiting helpers are tests/browser/test_browser.py's (so the test is skipped
without
Chromium except under CI=true); the server is this module's own, started with the models folder
in its environment.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    assert_charts_drawn,
    assert_no_exception,
    rerun,
    screenshot,
)
from tests.conftest import opened_app, resized
from tests.hf.test_hf_encoders import _build  # skips this module without transformers (fails in CI)
from tfviz import hf, settings
from tfviz.core.interventions import Interventions
from tfviz.ui.i18n import translate
from tfviz.ui.masked import shown_word

pytestmark = pytest.mark.browser
app_exists, browser, page = shared.app_exists, shared.browser, shared.page

FILL_MASK = '.st-key-fill_mask [data-testid="stCode"]'  # st.container(key="fill_mask")


FAMILIES = {"bert": "BERT", "roberta": "RoBERTa", "distilbert": "DistilBERT"}


@pytest.fixture(scope="module")
def model_root(tmp_path_factory):
    """The server's folder: one tiny model of each family (issue 19's "done when")."""
    root = tmp_path_factory.mktemp("pretrained_dir")
    for kind in FAMILIES:
        _build(kind, root / kind)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_root):
    """`streamlit run app.py` with $TFVIZ_PRETRAINED_DIR set (found by shared.page by name)."""
    yield from shared.app_server(tmp_path_factory, {settings.PRETRAINED_DIR_ENV: str(model_root)})


def blocks(n: int) -> str:
    """A JS predicate: the fill-in-the-mask area shows n code blocks."""
    return f"() => document.querySelectorAll('{FILL_MASK}').length === {n}"


def shown_answers(page) -> list[list[str]]:
    codes = page.locator(FILL_MASK)
    return [
        [line.split()[1] for line in codes.nth(i).inner_text().strip().splitlines()]
        for i in range(codes.count())
    ]


def pick(page, kind: str) -> None:
    """Pick the folder's model of this family and wait for its fill-in-the-mask answers."""
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    picker.click()
    option = page.get_by_role("option", name=f"{kind} ({FAMILIES[kind]})", exact=True)
    rerun(page, option.click, blocks(1))


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_each_familys_model_opens_in_every_view(page, kind):
    pick(page, kind)
    tabs = page.get_by_role("tab").all_inner_texts()
    assert len(tabs) == 8, tabs
    for label in tabs[1:] + tabs[:1]:  # Attention last, to see its charts drawn
        shared.open_tab(page, label)
        assert_no_exception(page)
        panel = page.locator('[role="tabpanel"]:not([hidden])')
        assert panel.locator('[data-testid="stElementContainer"]').count() > 0, label
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # its attention, drawn


def test_a_bert_from_the_models_folder_shows_attention_and_fill_mask_answers(page, model_root):
    pick(page, "bert")
    box_a = page.get_by_role("textbox", name=translate("en", "minilm.sentence_a"))
    text = box_a.input_value()
    assert "[MASK]" in text
    loaded = hf.open_folder(model_root / "bert")
    learned = hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, text)
    assert shown_answers(page) == [[shown_word(g) for g in learned.learned]]
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # layer 0's four heads

    radio = page.locator('[data-testid="stSidebar"] [data-testid="stRadio"]').filter(has_text="W_o")
    identity = translate("en", "common.w_o.identity")
    rerun(page, lambda: radio.get_by_text(identity, exact=True).click(), blocks(2))
    want = hf.fill_mask(
        loaded.model, loaded.head, loaded.tokenizer, text, Interventions(w_o="identity")
    )
    shown = shown_answers(page)
    assert shown == [[shown_word(g) for g in want.learned], [shown_word(g) for g in want.switched]]
    assert shown[0] != shown[1], "switching W_o off changed none of the guesses"
    assert_charts_drawn(page, at_least=1, heatmaps=True)
    assert_no_exception(page)
    screenshot(page, "browser_folder_bert_fill_mask.png")


# A Chinese sentence through RoBERTa's byte-level BPE: each Han character is three byte pieces,
# which the charts once labelled with Latin-1 look-alikes ("æĪ", "ä¸"). The screenshot
# set has this model on a desktop, a projector and a phone, in Chinese.
CHINESE = "我爱北京<mask>。"
SCREENS = {
    "desktop": {"width": 1600, "height": 1000},
    "projector": {"width": 1280, "height": 720},
    "phone": {"width": 390, "height": 844},
}
# The canvas charts' key names (the figures' x categories, the hover's) and the texts they drew
# (thinned to what fits: standalone.js notes each text it draws).
LABELS_JS = """() => [...document.querySelectorAll('.tfviz-chart[data-drawn]')]
    .flatMap((div) => div.__figure.data[0].x || [])"""
DRAWN_TEXTS_JS = """() => [...document.querySelectorAll('.tfviz-chart[data-drawn]')]
    .flatMap((div) => (div.__texts || []).map((t) => t.text))"""
BYTE_LOOK_ALIKES = re.compile(r"[\u00a0-\u017f]")  # byte-level BPE's stand-ins for bytes


def test_a_roberta_shows_chinese_as_characters_on_every_screen(browser, server):
    query = urlencode(
        {"model": "folder:roberta", "sequence": CHINESE, "lang": "zh", "view": "attention"}
    )
    first = next(iter(SCREENS.values()))
    with opened_app(browser, f"{server}/?{query}", first, first=FILL_MASK) as page:
        for screen, viewport in SCREENS.items():
            resized(page, viewport)  # one page, checked on each screen (tests.conftest)
            assert_charts_drawn(page, at_least=1, heatmaps=True)
            labels = " ".join(page.evaluate(LABELS_JS))
            for character in "我爱北京":  # each once, as the text its three byte pieces stand for
                assert character in labels, (screen, character, labels)
            drawn = " ".join(page.evaluate(DRAWN_TEXTS_JS))
            # Thinned to fit, the labels keep the characters, not the continuation marks.
            missing = [character for character in "我爱北京" if character not in drawn]
            assert len(missing) <= 1, (screen, drawn)  # one may give way to its neighbour <s>
            assert not missing or "…" not in drawn, (screen, drawn)
            # The exact pieces stay in the hover's names ("我 [æ]"), never on the chart itself.
            assert BYTE_LOOK_ALIKES.findall(drawn) == [], (screen, drawn)
            screenshot(page, f"readable_roberta_attention_zh_{screen}.png")
