"""Every word a user reads comes from the catalogue (tfviz.words): no view or app.py hands a
Streamlit element a sentence of its own. Read from the syntax tree: a string literal (or the
literal parts of an f-string) given to a Streamlit call that shows text, holding a word of
three or more Latin letters, is English outside the catalogue, and fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
