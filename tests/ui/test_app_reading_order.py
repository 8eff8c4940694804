"""Browser test of issue 44, item 4: the charts read in the order people read.

A grid of heads reads row by row: a toy model's every layer (the bundled reverse model: 2 layers
of 4 heads and their mean) as "L0 H0, L0 H1, L0 H2" then "L0 H3, L0 mean", then layer 1 on a row
of its own; a decoder of the server's folder with too many heads for one grid (GPT-2, 3 layers
of 12, built here with transformers) one layer's heads and their mean, three to a row. On a
phone's width the same cells stand one under the other, in the same order. The cells are the
canvas charts' (tfviz.ui.widgets.canvas_charts, standalone.js's grid), each named in
data-block; their reading order is read from where the browser put them (rows by their foot,
the cells of a row aligned there, then left to right).

W_o's orientation is said in one line where it is drawn: under Before/after W_o's heatmap (rows
= concat dims, as lesson 1's table) and under lesson 1's maps (whose rows are output dims).

In English and Chinese, at 390 and 1400 px; the screenshots (artifacts/, or
$TFVIZ_SCREENSHOTS) are reading_order_<what>_<lang>_<width>.png. The browser and its skip rules
are tests/browser/test_browser.py's; the server is this module's own, with the decoder's folder in
its
environment.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.browser import test_browser as shared
from tests.browser.test_browser import assert_no_exception, screenshots
from tests.conftest import go_to, opened_app, quiet, resized
from tests.hf.test_hf_decoders import _tokenizer  # skips this module without transformers
from tfviz import settings
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.browser
app_exists, browser = shared.app_exists, shared.browser

WIDE = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
DECODER = "gpt2-wide"  # 3 layers x 12 heads: more than one grid shows (tfviz.ui.heads)
LAYERS, HEADS = 3, 12
TOY_LAYERS, TOY_HEADS = 2, 4  # the bundled reverse model

# The grid's cells as the browser placed them: [name, left, bottom] of each, in the DOM's order.
CELLS_JS = """
(key) => [...document.querySelectorAll(`.st-key-${key} .tfviz-chart[data-block]`)].map((div) => {
  const box = div.getBoundingClientRect();
  return [div.dataset.block, box.left, box.bottom, div.hasAttribute('data-drawn')];
})
"""


@pytest.fixture(scope="module")
def model_root(tmp_path_factory):
    import transformers as T

    root = tmp_path_factory.mktemp("reading_order_models")
    folder = root / DECODER
    folder.mkdir()
    V = _tokenizer(folder, ["<|endoftext|>"])
    cfg = T.GPT2Config(
        vocab_size=V, n_embd=48, n_layer=LAYERS, n_head=HEADS, n_positions=64,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    T.GPT2LMHeadModel(cfg).eval().save_pretrained(folder, safe_serialization=True)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_root):
    yield from shared.app_server(tmp_path_factory, {settings.PRETRAINED_DIR_ENV: str(model_root)})


def rows_read(page, key: str) -> list[list[str]]:
    """The grid's cells in reading order: rows (cells whose feet line up) top to bottom, each
    left to right."""
    page.wait_for_function(f"() => ({CELLS_JS})({json.dumps(key)}).every((c) => c[3])", polling=100)
    cells = page.evaluate(CELLS_JS, key)
    assert cells, f"no cell of {key} is drawn"
    rows: list[list] = []
    for name, left, bottom, _ in sorted(cells, key=lambda c: (round(c[2]), c[1])):
        if rows and abs(rows[-1][0] - bottom) <= 2:
            rows[-1][1].append((left, name))
        else:
            rows.append([bottom, [(left, name)]])
    return [[name for _, name in sorted(row)] for _, row in rows]


def by_threes(names: list[str]) -> list[list[str]]:
    return [names[i : i + 3] for i in range(0, len(names), 3)]


def layer_cells(layer: int, heads: int, lang: str) -> list[str]:
    return [f"L{layer} H{h}" for h in range(heads)] + [
        f"L{layer} {translate(lang, 'chart.block.mean')}"
    ]


def shot(page, locator, name: str) -> None:
    """A screenshot of one part of the page (the main area scrolls inside itself: the viewport
    is grown to the page's height first, as tests/browser/test_browser.py's screenshot does),
    when screenshots are wanted (shared.screenshots)."""
    folder = screenshots()
    if folder is None:
        return
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": min(max(height, 600), 8000)})
    try:
        quiet(page)  # the canvases redraw at the new size
        locator.screenshot(path=folder / name)
    finally:
        page.set_viewport_size(size)
        quiet(page)


def catalogue_text(markdown: str) -> str:
    """A catalogue line as the page shows its text: code spans' backticks gone, spaces one."""
    return re.sub(r"\s+", " ", markdown.replace("`", "")).strip()


def shown_line(page, text: str) -> None:
    """The caption that reads `text` is on the page."""
    want = catalogue_text(text)
    page.wait_for_function(
        """(want) => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
            .some((c) => c.innerText.replace(/\\s+/g, ' ').trim() === want)""",
        arg=want,
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_grids_of_heads_read_row_by_row_and_w_o_says_which_way_it_reads(browser, server, lang):
    base = f"{server}/?lang={lang}"
    toy = [c for layer in range(TOY_LAYERS) for c in layer_cells(layer, TOY_HEADS, lang)]
    toy_rows = [
        row for layer in range(TOY_LAYERS) for row in by_threes(layer_cells(layer, TOY_HEADS, lang))
    ]
    with opened_app(browser, f"{base}&view=attention", WIDE) as page:
        # A toy model's every layer: row by row, each layer opening a row.
        for size in (WIDE, PHONE):
            resized(page, size)
            read = rows_read(page, "attention_grid")
            assert read == (toy_rows if size is WIDE else [[c] for c in toy]), read
            grid = page.locator(".st-key-attention_grid")
            shot(page, grid, f"reading_order_toy_grid_{lang}_{size['width']}.png")

        # A decoder with too many heads for one grid: one layer, its heads three to a row.
        go_to(page, f"{base}&view=attention&model=folder:{DECODER}")
        cells = layer_cells(0, HEADS, lang)
        for size in (PHONE, WIDE):
            resized(page, size)
            read = rows_read(page, "attention_grid")
            assert read == (by_threes(cells) if size is WIDE else [[c] for c in cells]), read
            grid = page.locator(".st-key-attention_grid")
            shot(page, grid, f"reading_order_decoder_grid_{lang}_{size['width']}.png")
        assert_no_exception(page)

        # W_o's heatmap says which way it reads: rows = concat dims, as lesson 1's table.
        go_to(page, f"{base}&view=w_o")
        shown_line(page, translate(lang, "w_o.matrix_axes"))
        w_o = page.locator(".st-key-w_o").locator("xpath=..")
        for size in (WIDE, PHONE):
            resized(page, size)
            shot(page, w_o, f"reading_order_w_o_{lang}_{size['width']}.png")

        # Lesson 1 shows W_o's table (rows = concat dims) and maps whose rows are outputs.
        go_to(page, f"{base}&view=lessons&step=1")
        shown_line(page, translate(lang, "lessons.s1.maps_axes"))
        maps = page.locator(".st-key-lesson_maps").locator("xpath=..")
        for size in (PHONE, WIDE):
            resized(page, size)
            shot(page, maps, f"reading_order_lesson1_{lang}_{size['width']}.png")
        assert_no_exception(page)
