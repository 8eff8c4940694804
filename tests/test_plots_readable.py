"""Charts a teacher can project (issue 31, "Charts"): figure-level checks of what the browser
test (tests/test_browser_readable.py) sees drawn."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfviz import plots

NAMES = {"learned": "L", "block_diagonal": "B", "identity": "I", "zero": "Z", "rank": "R"}


# ---- the W_o modes chart ------------------------------------------------------------------------


def test_the_mode_sweep_log_axis_labels_decades_and_the_top_rank_only():
    ranks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]
    fig = plots.mode_sweep_plot(ranks, np.linspace(0, 1, len(ranks)), {"learned": 1.0}, NAMES)
    axis = fig.layout.xaxis
    assert axis.type == "log" and axis.tickmode == "array"
    assert list(axis.tickvals) == [1, 10, 100, 384]
    assert list(axis.ticktext) == ["1", "10", "100", "384"]
    # Every label is a decade or the largest rank: no "2" or "5" between decades.
    for value in axis.tickvals[:-1]:
        assert math.log10(value) == int(math.log10(value))


def test_the_mode_sweep_top_rank_gets_no_label_of_its_own_next_to_a_decade():
    ranks = [1, 2, 4, 8, 16, 32, 64, 128]
    fig = plots.mode_sweep_plot(ranks, np.linspace(0, 1, len(ranks)), {"learned": 1.0}, NAMES)
    assert list(fig.layout.xaxis.tickvals) == [1, 10, 100]  # 128 would touch 100's label


def test_a_short_mode_sweep_keeps_its_linear_axis():
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], {"learned": 1.0}, NAMES)
    assert fig.layout.xaxis.type == "linear" and fig.layout.xaxis.tickvals is None


def test_reference_lines_on_the_same_value_are_drawn_as_bands_around_each_other():
    # A model that needs W_o: W_o off and W_o zeroed both fall to 0.
    whole = {"learned": 1.0, "block_diagonal": 0.5, "identity": 0.0, "zero": 0.0}
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES)
    width = {tr.name.split(":")[0]: tr.line.width for tr in fig.data if tr.name and ":" in tr.name}
    order = [tr.name.split(":")[0] for tr in fig.data if tr.name and ":" in tr.name]
    assert order.index("I") < order.index("Z")  # zero is drawn over identity...
    assert width["I"] > width["Z"]  # ...so identity is wider and shows around it
    assert width["L"] == width["B"] == width["Z"]  # lines alone on their values stay as they were
    dashes = {tr.name.split(":")[0]: tr.line.dash for tr in fig.data if tr.name and ":" in tr.name}
    assert dashes["I"] != dashes["Z"]


def test_reference_lines_apart_keep_one_width():
    whole = {"learned": 1.0, "block_diagonal": 0.5, "identity": 0.2, "zero": 0.0}
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES)
    widths = {tr.line.width for tr in fig.data if tr.name and ":" in tr.name}
    assert len(widths) == 1


