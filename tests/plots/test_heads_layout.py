"""How a grid of heads is laid out (tfviz.ui.heads, issue 44): row by row.

The views send one figure, a column of blocks in reading order ("L0 H0", "L0 H1", ..., "L0 mean",
"L1 H0", ...), that says which blocks open a row of the grid (each layer's first); standalone.js
(tfvizChart.grid) draws a chart per block and lets CSS grid place them, HEAD_COLUMNS to a row on
a wide screen and one under the other on a phone. placed() below is CSS grid's placement of
those cells (auto-placed, a row-opening cell at column 1), so the reading order is checked here
without a browser; tests/ui/test_app_reading_order.py checks it in one.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfviz import plots
from tfviz.plots import standalone
from tfviz.ui import heads
from tfviz.ui.widgets import cell_count


def attention(L: int, H: int, T: int = 5) -> np.ndarray:
    return np.random.default_rng(0).dirichlet(np.ones(T), size=(L, H, T)).astype(np.float32)


def placed(n: int, starts: list[int], columns: int) -> list[tuple[int, int]]:
    """(row, column) of n cells in a grid of `columns` columns, auto-placed in order, a cell in
    starts put at column 0 of the next row (CSS grid-column-start: 1)."""
    out, row, col = [], 0, 0
    for i in range(n):
        if i in starts and col > 0:
            row, col = row + 1, 0
        out.append((row, col))
        col += 1
        if col == columns:
            row, col = row + 1, 0
    return out


def reading_order(figure, columns: int) -> list[list[str]]:
    """The block titles of a column of heads as the grid shows them: its rows, left to right."""
    titles = plots.block_titles(figure)
    starts = figure.layout.meta[plots.BLOCKS_META]["starts"]
    rows: dict[int, list[str]] = {}
    for title, (row, _) in zip(titles, placed(len(titles), starts, columns), strict=True):
        rows.setdefault(row, []).append(title)
    return [rows[r] for r in sorted(rows)]


def test_a_toy_model_s_grid_reads_row_by_row_a_layer_at_a_time():
    (figure,) = heads.grid_figures(attention(2, 4), list("abcde"), [0, 1])
    assert reading_order(figure, heads.HEAD_COLUMNS) == [
        ["L0 H0", "L0 H1", "L0 H2"],
        ["L0 H3", "L0 mean"],
        ["L1 H0", "L1 H1", "L1 H2"],
        ["L1 H3", "L1 mean"],
    ]
    # Read on a phone (one column): the same order, one under the other.
    assert sum(reading_order(figure, 1), []) == plots.block_titles(figure)


def test_a_many_headed_layer_reads_row_by_row():
    (figure,) = heads.attention_columns(attention(1, 12)[0], list("abcde"), 3)
    rows = reading_order(figure, heads.HEAD_COLUMNS)
    assert rows[0] == ["L3 H0", "L3 H1", "L3 H2"]  # not H0, H5, H9 (a chart per column)
    assert rows[-1] == ["L3 mean"]
    assert sum(rows, []) == [f"L3 H{h}" for h in range(12)] + ["L3 mean"]
    assert [len(row) for row in rows] == [3, 3, 3, 3, 1]


def test_the_later_layers_of_w_o_off_start_a_row_each():
    (figure,) = heads.grid_figures(attention(2, 2), list("abcde"), [1, 3])
    assert reading_order(figure, heads.HEAD_COLUMNS) == [
        ["L1 H0", "L1 H1", "L1 mean"],
        ["L3 H0", "L3 H1", "L3 mean"],
    ]


@pytest.mark.parametrize("L, H", [(2, 4), (1, 12), (3, 2)])
def test_a_column_of_heads_is_a_chart_per_block(L, H):
    (figure,) = heads.grid_figures(attention(L, H), list("abcde"), list(range(L)))
    data = standalone.figure_data(figure)
    meta = data["layout"]["meta"][plots.BLOCKS_META]
    assert meta == {"rows": 5, "gap": 2, "starts": [i * (H + 1) for i in range(L)]}
    assert cell_count(data) == L * (H + 1)
    # The blocks stack T rows and gap empty rows apart, as standalone.js's blocks() cuts them.
    z = np.asarray(figure.data[0].z)
    assert z.shape[0] == L * (H + 1) * (5 + 2) - 2
    assert standalone.unsupported(data) == []  # drawn by standalone.js, on canvases
    one_head = plots.attention_map(attention(1, 1)[0, 0], list("abcde"))
    assert cell_count(standalone.figure_data(one_head)) == 1  # any other figure: one chart
