"""The language catalogue: both languages complete and consistent, and nothing bypassing it.

The catalogues must have the same keys and, in every string, the same {placeholders}; every key
the Lessons view names must exist; and no Streamlit call in tfviz/ui/views/lessons/ may show a
string literal of its own (found by reading its modules' syntax trees), so switching to Chinese
leaves no English sentence behind.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tfviz.ui import i18n

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "tfviz" / "ui" / "views" / "lessons"  # the view's package: a module per part
# Every module that draws: app.py and the views. None is exempt from the bypass check.
UI_MODULES = sorted([ROOT / "app.py", *(ROOT / "tfviz" / "ui").rglob("*.py")])
# Keyword arguments of Streamlit elements that a student reads.
SHOWN_KEYWORDS = {
    "label",
    "help",
    "placeholder",
    "text",
    "body",
    "caption",
    "title",
    "value",
    "head_label",
    "output_label",
    "value_label",
}
HAN = re.compile(r"[\u4e00-\u9fff]")


def load(lang: str) -> dict[str, str]:
    return json.loads((i18n.LOCALES / f"{lang}.json").read_text(encoding="utf-8"))


def test_every_key_is_in_every_language_with_the_same_placeholders():
    catalogues = {lang: load(lang) for lang in i18n.LANGUAGES}
    en = catalogues["en"]
    assert en, "the English catalogue is empty"
    for lang, cat in catalogues.items():
        assert set(cat) == set(en), f"{lang}: keys differ: {sorted(set(cat) ^ set(en))}"
        for key, text in cat.items():
            assert isinstance(text, str) and text.strip(), f"{lang}: {key} is empty"
            assert "lang" not in i18n.placeholders(text), f"{lang}: {key}: 'lang' is t's own"
            assert i18n.placeholders(text) == i18n.placeholders(en[key]), (
                f"{lang}: {key} has placeholders {sorted(i18n.placeholders(text))}, "
                f"English has {sorted(i18n.placeholders(en[key]))}"
            )


def test_the_chinese_catalogue_is_chinese_and_keeps_technical_names():
    zh, en = load("zh"), load("en")
    # Every sentence is translated (a string with words has Han characters); short labels that
    # are only technical names, numbers or symbols may stay as they are.
    for key, text in zh.items():
        words = re.sub(r"\{[^}]*\}|W_o|W_q|W_k|W_v|d_k|d_model|concat|[^A-Za-z]", " ", text)
        if len(words.split()) > 1:
            assert HAN.search(text), f"zh: {key} looks untranslated: {text!r}"
    for name in ("W_o", "W_q", "concat"):
        for key, text in en.items():
            if re.search(rf"\b{name}\b", text):  # concat, not "concatenation"
                assert name in zh[key], f"zh: {key} drops the technical name {name}"


def test_t_translates_fills_placeholders_and_marks_a_missing_key():
    assert i18n.translate("en", "lessons.step_option", n=2, title="X") == "2. X"
    assert i18n.translate("zh", "lessons.prev") == "← 上一步"
    assert i18n.translate("en", "no.such.key") == i18n.missing("no.such.key") == "⟦no.such.key⟧"
    with pytest.raises(ValueError, match="unknown language"):
        i18n.catalogue("fr")
    with pytest.raises(KeyError):  # a placeholder left unfilled is a bug, not a blank
        i18n.translate("en", "lessons.step_option", n=2)


def lessons_tree() -> ast.Module:
    """The lessons view's modules as one tree."""
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(LESSONS.glob("*.py"))]
    return ast.Module(body=[node for tree in trees for node in tree.body], type_ignores=[])


def test_every_key_the_lessons_name_exists():
    en = load("en")
    named = {
        node.value
        for node in ast.walk(lessons_tree())
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("lessons.")
    }
    assert len(named) > 50, "the lessons name fewer keys than expected: is the scan broken?"
    assert not named - set(en), f"keys used but not in the catalogue: {sorted(named - set(en))}"


def is_t_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t"


def shown_literals(node: ast.AST) -> list[str]:
    """String literals with letters in an argument's subtree, except keys given to t()."""
    found = []
    if is_t_call(node):
        # t's first argument is a key; its keyword values are shown, so scan them.
        for kw in node.keywords:
            found += shown_literals(kw.value)
        return found
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if re.search(r"[^\W\d_]", node.value) else []
    if isinstance(node, ast.FormattedValue):
        return shown_literals(node.value)  # the format spec (".3g") is not text
    if isinstance(node, ast.Subscript):
        return shown_literals(node.value)  # sizes["d_model"]: a key, not text
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
    ):
        return shown_literals(node.func.value)  # settings.get("steps"): a key, not text
    if isinstance(node, ast.Lambda):
        return []  # format_func bodies are checked by walking the tree once more below
    for child in ast.iter_child_nodes(node):
        found += shown_literals(child)
    return found


def streamlit_calls(tree: ast.Module) -> list[ast.Call]:
    """Calls of Streamlit elements, whatever they are called on (st.x, col.x, st.column_config.X),
    and of the figure functions (plots.x), whose titles and axis labels are shown too."""
    import streamlit as st

    names = {n for n in dir(st) + dir(st.column_config) if not n.startswith("_")}
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if node.func.attr in names or (isinstance(base, ast.Name) and base.id == "plots"):
                calls.append(node)
    return calls


def offending(tree: ast.Module) -> list[str]:
    problems = []
    for call in streamlit_calls(tree):
        args = list(call.args) + [kw.value for kw in call.keywords if kw.arg in SHOWN_KEYWORDS]
        for arg in args:
            for text in shown_literals(arg):
                problems.append(f"line {call.lineno}: {ast.unparse(call.func)}(... {text!r} ...)")
    # format_func lambdas draw option labels: they too may only use t() or symbols.
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "format_func":
            for text in shown_literals(getattr(node.value, "body", node.value)):
                if text not in ("L",):  # "L0", "L1": the app's technical name of a layer
                    problems.append(f"line {node.value.lineno}: format_func shows {text!r}")
    return problems


@pytest.mark.parametrize("path", UI_MODULES, ids=lambda p: p.name)
def test_no_view_shows_a_string_that_bypasses_t(path):
    problems = offending(ast.parse(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.name}: user-visible literals outside t():\n" + "\n".join(problems)


def test_the_bypass_check_reads_app_py_and_every_tab_s_module():
    """The scan above is only as good as its list: the eight tabs' modules (attention, w_o,
    w_o_off, parts, train, analysis, experiment, lessons: tfviz.ui.router's VIEWS), app.py and
    the sidebar must be in it."""
    router = ast.parse((ROOT / "tfviz" / "ui" / "router.py").read_text(encoding="utf-8"))
    views = next(
        ast.literal_eval(node.value)
        for node in ast.walk(router)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "VIEWS"
    )
    modules = [view for view, _ in views]
    assert modules == [
        "attention", "w_o", "w_o_off", "parts", "train", "analysis", "experiment", "lessons",
    ]  # fmt: skip
    scanned = set(UI_MODULES)
    assert {ROOT / "app.py", ROOT / "tfviz" / "ui" / "sidebar.py"} <= scanned
    views = ROOT / "tfviz" / "ui" / "views"
    for module in modules:  # a view is a module, or a package whose parts are all scanned
        assert {views / f"{module}.py", views / module / "__init__.py"} & scanned, module


def test_the_literal_scan_catches_a_bypass():
    """The scan itself must fail on the mistakes it is there to catch."""
    bad = ast.parse(
        "st.button('Start')\n"
        "st.markdown(f'Step {n} done')\n"
        "left.number_input(label='Steps', key='k')\n"
        "st.error(t('lessons.x', why='oops'))\n"
        "st.caption(md_escape('Not translated') + d['key'])\n"
        "st.selectbox(t('a'), [1], format_func=lambda n: 'Layer ' + str(n))\n"
    )
    found = offending(bad)
    for text in ("'Start'", "'Step '", "'Steps'", "'oops'", "'Layer '", "'Not translated'"):
        assert any(text in line for line in found), (text, found)
    good = ast.parse("st.button(t('lessons.prev'), key='lesson_prev', type='primary')\n")
    assert offending(good) == []
    assert not any("'key'" in line for line in found)  # a dict key is not shown text


def picker_page():
    import streamlit as st

    from tfviz.ui import router
    from tfviz.ui.i18n import language_picker, t

    router.read_address()  # as app.py does first: the run's one read of the address
    chosen = language_picker()
    st.markdown(f"{chosen}: {t('lessons.prev')}")


def test_the_language_picker_switches_t_and_starts_from_the_address():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(picker_page)
    at.run()
    assert not at.exception and at.markdown[0].value == "en: ← Previous"
    at.session_state["lang"] = "zh"  # what choosing 中文 in the picker stores
    at.run()
    assert at.markdown[0].value == "zh: ← 上一步"
    linked = AppTest.from_function(picker_page)
    linked.query_params["lang"] = "zh"  # a link carrying ?lang=zh
    linked.run()
    assert not linked.exception and linked.markdown[0].value == "zh: ← 上一步"
