"""Every word a user reads comes from the catalogue (tfviz.words): no view or app.py hands a
Streamlit element a sentence of its own. Read from the syntax tree: a string literal (or the
literal parts of an f-string) given to a Streamlit call that shows text, holding a word of
three or more Latin letters, is English outside the catalogue, and fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORD = re.compile(r"[A-Za-z]{3,}")
# Written the same in every language (tfviz.words' rule), and markup that is not text.
KEPT = {"W_o", "MiniLM", "BERT", "RoBERTa", "DistilBERT", "CSV", "HTML", "PNG", "SVG", "JSON"}
SHOWN_BY = {
    "markdown", "caption", "write", "text", "title", "header", "subheader", "error", "warning",
    "info", "success", "toast", "button", "download_button", "link_button", "checkbox", "toggle",
    "radio", "selectbox", "multiselect", "slider", "select_slider", "number_input", "text_input",
    "text_area", "file_uploader", "segmented_control", "pills", "tabs", "expander", "popover",
    "metric", "progress", "spinner", "status", "form_submit_button", "code", "latex",
}  # fmt: skip


def literal_text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(literal_text(v) for v in node.values)
    return ""


def english_shown(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in SHOWN_BY:
            continue
        args = list(node.args) + [k.value for k in node.keywords if k.arg in ("label", "body")]
        for arg in args:
            text = literal_text(arg)
            if text.lstrip().startswith("<"):  # HTML or CSS markup, its texts come from t()
                continue
            words = [w for w in WORD.findall(text) if w not in KEPT]
            if words:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.func.attr}: {text!r}")
    return found


def test_no_view_shows_english_of_its_own():
    paths = [ROOT / "app.py", *sorted((ROOT / "tfviz" / "ui").rglob("*.py"))]
    found = [line for path in paths for line in english_shown(path)]
    assert not found, "\n".join(found)


def test_the_check_finds_english_where_there_is_some(tmp_path):
    view = tmp_path / "view.py"
    view.write_text(
        "import streamlit as st\n"
        'st.caption(f"Loss after {n} steps")\n'
        'st.error("W_o")\n'
        'st.button(t("x"), label="Go further")\n'
    )
    found = english_shown(view, tmp_path)
    assert [line.split(" ", 1)[0] for line in found] == ["view.py:2", "view.py:4"], found


# Views that show a caught error's own words, and why they may: no student's input or file
# reaches these with an English sentence.
OWN_WORDS = {
    (
        "tfviz/ui/views/parts/diff.py",
        "diff_section",
    ): "the pair is checked above; a program error",
}


def own_words_shown(path: Path, root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, function) of each str(e) of an exception a handler caught: the library's English
    on the page, where tfviz.ui.i18n.why words it by its code."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for handler in ast.walk(function):
            if not (isinstance(handler, ast.ExceptHandler) and handler.name):
                continue
            for node in ast.walk(handler):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "str"
                    and [ast.unparse(a) for a in node.args] == [handler.name]
                ):
                    found.add((path.relative_to(root).as_posix(), function.name))
    return found


def test_a_caught_error_reaches_the_page_in_its_language():
    found = set()
    for path in [ROOT / "app.py", *sorted((ROOT / "tfviz" / "ui").rglob("*.py"))]:
        found |= own_words_shown(path)
    assert found <= set(OWN_WORDS), sorted(found - set(OWN_WORDS))
    assert set(OWN_WORDS) <= found, "a stale entry: " + str(sorted(set(OWN_WORDS) - found))


def test_the_caught_error_check_finds_one(tmp_path):
    sample = tmp_path / "view.py"
    sample.write_text("def render():\n    try:\n        go()\n    except OSError as e:\n"
                      "        show(str(e))\n")  # fmt: skip
    assert own_words_shown(sample, tmp_path) == {("view.py", "render")}
