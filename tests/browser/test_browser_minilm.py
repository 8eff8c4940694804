"""Browser test of the pretrained all-MiniLM-L6-v2: pick it, type a sentence, switch W_o off.

The server, browser and page fixtures and the waiting helpers are tests/browser/test_browser.py's
(imported, so every browser test starts and drives the app the same way; like there, the test is
skipped without Chromium except under CI=true). What is checked is what a student sees: sentence
A's word-pieces, the similarity of A and B, and that number changing when W_o is switched off,
to the value tfviz.hf.pretrained computes for the same sentences.
"""

from __future__ import annotations

import json

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import (
    ALERT,
    assert_charts_drawn,
    assert_no_exception,
    rerun,
    screenshot,
)
from tests.support import en
from tfviz.core.interventions import switches
from tfviz.hf import pretrained

pytestmark = pytest.mark.browser
# test_browser.py's fixtures, found by pytest under these names in this module: the test
# process's server and browser, a fresh session (page) per test.
app_exists, browser, server, page = shared.app_exists, shared.browser, shared.server, shared.page

SIMILARITY = ".st-key-similarity"  # st.container(key="similarity") above the tabs
PIECES = '.st-key-pieces [data-testid="stCode"]'  # sentence A's word-pieces
SENTENCE = "A woman is playing the violin on the stage."


def similarity_values(page) -> dict[str, str]:
    """The similarity metrics above the tabs, {label: value}."""
    metrics = page.locator(f'{SIMILARITY} [data-testid="stMetric"]')
    values = {}
    for i in range(metrics.count()):
        metric = metrics.nth(i)
        label = metric.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        values[label] = metric.locator('[data-testid="stMetricValue"]').inner_text().strip()
    return values


def shows_metric(label: str) -> str:
    """A JS predicate: the similarity container shows a metric with this label."""
    return f"""() => {{
        const box = document.querySelector('{SIMILARITY}');
        return box !== null && box.innerText.includes({json.dumps(label)});
    }}"""


def test_minilm_sentence_and_w_o_off_change_the_similarity(page):
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    # Pick MiniLM in the sidebar's model picker.
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    option = page.get_by_role("option", name=f"{pretrained.NAME} (pretrained)")
    picker.click()
    rerun(page, option.click, shows_metric(en("minilm.similarity")))
    box_a = page.get_by_role("textbox", name=en("minilm.sentence_a"))
    assert box_a.input_value() == pretrained.PARAPHRASE_PAIR[0]

    # Type sentence A: its word-pieces and the similarity follow.
    box_a.fill(SENTENCE)
    outcome = f"""() => {{
        const code = document.querySelector('{PIECES}');
        return code !== null && code.textContent.includes('violin');
    }}"""
    rerun(page, lambda: box_a.press("Enter"), outcome)
    pieces = page.locator(PIECES).inner_text().split()
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and "violin" in pieces
    learned = similarity_values(page)[en("minilm.similarity")]
    model, tokenizer = pretrained.load_minilm()
    task = pretrained.SentenceTask(tokenizer)
    want = pretrained.compare_similarity(
        model, task, SENTENCE, pretrained.PARAPHRASE_PAIR[1], switches("identity")
    )
    assert float(learned) == pytest.approx(want.learned, abs=5e-4)
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # layer 0's twelve heads
    assert page.locator(ALERT).count() == 0
    assert_hover_names_a_cell(page, model, task)
    assert_a_column_saves_as_png(page)

    # W_o off (identity) in every layer: the switched similarity is shown beside the learned one.
    radio = page.locator('[data-testid="stSidebar"] [data-testid="stRadio"]').filter(has_text="W_o")
    switched_label = en("minilm.similarity_switched")
    rerun(
        page,
        lambda: radio.get_by_text(en("common.w_o.identity"), exact=True).click(),
        shows_metric(switched_label),
    )
    values = similarity_values(page)
    assert float(values[en("minilm.similarity_learned")]) == float(learned)
    switched = float(values[switched_label].split()[0])
    assert switched == pytest.approx(want.switched, abs=5e-4)
    assert f"{switched:.3f}" != learned, "switching W_o off did not change the similarity"
    assert_charts_drawn(page, at_least=1, heatmaps=True)
    assert_no_exception(page)
    screenshot(page, "browser_minilm_w_o_off.png")


def assert_hover_names_a_cell(page, model, task) -> None:
    """Layer 0's heads are canvas charts (tfviz.ui.widgets.canvas_charts): a real mouse over
    head 1's cell (query 3, key 5) shows its word-pieces and its weight from the trace."""
    from tfviz.core.trace import run_trace

    tr = run_trace(model, task, SENTENCE)
    column = page.locator('.tfviz-chart[data-block="L0 H1"]')  # a chart per head, in a grid
    column.scroll_into_view_if_needed()
    x, y = column.evaluate("div => tfvizChart.cellAt(div, 0, 3, 5)")
    box = column.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)
    hover = column.locator(".tfviz-hover")
    hover.wait_for(state="visible")
    # Each on a line of its own (issue 31: the head's name shared the query's line).
    assert hover.inner_text().splitlines() == [
        "head L0 H1",
        f"query {tr.labels[3]}",
        f"key {tr.labels[5]}",
        f"weight {tr.attn[0, 1, 3, 5]:.3f}",
    ]


def assert_a_column_saves_as_png(page) -> None:
    """A canvas chart's PNG button saves it, named as chart() names a chart's file and drawn at
    twice its size (as plotly's camera, scale 2)."""
    import struct

    column = page.locator(".tfviz-chart").first
    button = column.locator(".tfviz-save")
    assert button.get_attribute("aria-label") == en("common.save_png")
    with page.expect_download() as download:
        button.click()
    assert download.value.suggested_filename == "tfviz_all-MiniLM-L6-v2_attention_grid_0.png"
    png = download.value.path().read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    css = column.locator("canvas").evaluate("c => [c.clientWidth, c.clientHeight]")
    assert (width, height) == (2 * css[0], 2 * css[1])
