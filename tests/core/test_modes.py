"""The W_o modes are named once (tfviz.core.modes), and everything that must say something about
each mode does: its words in both catalogues, its colour and dash on a chart, the forward's
check. A new mode added to tfviz.core.modes fails here until every place has it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tfviz import words
from tfviz.core import modes
from tfviz.plots import MODE_COLOURS, MODE_DASHES
from tfviz.plots.atlas import ARM_COLOURS

ROOT = Path(__file__).resolve().parents[2]
NAMES = {modes.LEARNED, modes.IDENTITY, modes.ZERO, modes.BLOCK_DIAGONAL}

# catalogue key prefix -> the modes that prefix must word
WORDED = {
    "common.w_o": (*modes.SWITCH, *modes.TAKEN_APART),
    "experiment.condition": modes.CONDITIONS,
    "atlas.arm": modes.CONDITIONS,
    "experiment.against": modes.AGAINST,
    "experiment.versus": modes.AGAINST,
    "atlas.versus": modes.AGAINST,
    "experiment.intro": modes.AGAINST,
    "experiment.submit": modes.AGAINST,
}


@pytest.mark.parametrize("lang", sorted(words.LANGUAGES))
def test_every_mode_is_worded_wherever_modes_are_named(lang):
    catalogue = words.catalogue(lang)
    lacking = [
        f"{p}.{m}" for p, group in WORDED.items() for m in group if f"{p}.{m}" not in catalogue
    ]
    assert not lacking, lacking
    assert "{k}" in catalogue[modes.label_key(modes.rank(3))]


def test_every_mode_a_chart_draws_has_its_colour_and_dash():
    for mode in (*modes.SWITCH, *modes.TAKEN_APART):
        assert mode in MODE_COLOURS and mode in MODE_DASHES, mode
    assert len(set(MODE_COLOURS.values())) == len(MODE_COLOURS)  # told apart by colour too
    for arm in modes.CONDITIONS:
        assert arm in ARM_COLOURS, arm


def test_the_forward_takes_every_mode_and_refuses_others_by_name():
    for mode in (*modes.SWITCH, *modes.TAKEN_APART, modes.rank(1), modes.rank(64)):
        assert modes.check(mode) == mode
    for bad in ("off", "rank:0", "rank:x", "rank:", "Learned", 5, None):
        with pytest.raises(ValueError, match="w_o must be one of|rank-k W_o is written"):
            modes.check(bad)
    assert modes.rank_of("rank:12") == 12 and modes.rank_of("identity") is None
    assert set(modes.TRAINING) <= NAMES and set(modes.CONDITIONS) <= set(modes.TRAINING)


def mode_lists(tree: ast.AST):
    """Each tuple, list, set or dict literal that spells two or more mode names."""
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and items:
            named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES}
            if len(named) >= 2:
                yield node.lineno, sorted(named)


def test_no_module_but_tfviz_modes_lists_the_modes_itself():
    found = []
    for path in sorted([*(ROOT / "tfviz").rglob("*.py"), ROOT / "app.py"]):
        if path.name == "modes.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{line} {names}" for line, names in mode_lists(tree)]
    assert not found, "\n".join(found)
