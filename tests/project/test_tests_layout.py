"""tests/ mirrors tfviz/: a folder per package of the library, and a few for what crosses them
(the app, the browser, the bench scripts, deployment, the project's own rules). README.md's
layout says the same."""

from __future__ import annotations

from tests.conftest import ROOT

TESTS = ROOT / "tests"
# Folders for what no single package owns.
ACROSS = {"ui", "browser", "bench", "deploy", "project"}


def packages() -> set[str]:
    return {p.parent.name for p in (ROOT / "tfviz").glob("*/__init__.py")}


def test_every_test_file_sits_in_a_folder_named_for_what_it_tests():
    assert not sorted(p.name for p in TESTS.glob("test_*.py")), "a test file at tests/'s root"
    folders = {p.parent.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
    assert folders <= packages() | ACROSS, folders - packages() - ACROSS
    # The library's packages with tests of their own each have their folder; ui's are the app's.
    assert {"core", "hf", "training", "experiments", "analysis", "plots", "serve"} <= folders


def test_the_readme_names_the_folders():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("tests/        pytest") :].split("\nbench/")[0]
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert all(f"{folder}/" in layout for folder in folders), folders
