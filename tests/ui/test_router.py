"""One router (tfviz.ui.router): it alone reads and writes the address, reads it once per run
and writes it at most once, and it owns the tabs (one name per tab: link, catalogue, module).

The runtime half wraps Streamlit's QueryParams for the length of a test and records every call
made from outside Streamlit's own code (which module, which function) and every message that
changes the browser's address; then it drives the app with AppTest as a student would.
"""

from __future__ import annotations

import ast
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from streamlit.runtime.state.query_params import QueryParams
from streamlit.runtime.state.query_params_proxy import QueryParamsProxy
from streamlit.testing.v1 import AppTest

from tests.conftest import APP, ROOT
from tfviz.ui import router
from tfviz.ui.i18n import LANGUAGES, catalogue, translate

# st.query_params is a QueryParamsProxy: every read or write of the app goes through these.
QUERY_METHODS = ("__getitem__", "__setitem__", "__delitem__", "__iter__", "__len__", "__contains__")
QUERY_METHODS += ("get", "get_all")
QUERY_METHODS += ("from_dict", "update", "clear", "to_dict")


@pytest.fixture
def address_calls(monkeypatch):
    """(calls, messages): calls counts (module, function) of each QueryParams call made from
    outside streamlit; messages counts the address changes sent to the browser."""
    calls: Counter = Counter()
    messages: list[str] = []

    def wrap(name):
        original = getattr(QueryParamsProxy, name)

        def wrapper(self, *args, **kwargs):
            frame = sys._getframe(1)
            module = frame.f_globals.get("__name__", "")
            if not module.startswith(("streamlit", "_collections_abc", "collections")):
                calls[(module, frame.f_code.co_name, name)] += 1
            return original(self, *args, **kwargs)

        monkeypatch.setattr(QueryParamsProxy, name, wrapper)

    for name in QUERY_METHODS:
        wrap(name)
    send = QueryParams._send_query_param_msg

    def counted_send(self):
        messages.append("sent")
        return send(self)

    monkeypatch.setattr(QueryParams, "_send_query_param_msg", counted_send)
    return calls, messages


def callers(calls: Counter) -> set[str]:
    return {module for module, _, _ in calls}


def reads(calls: Counter) -> int:
    """Whole reads of the address: each starts by listing its keys."""
    return sum(n for (_, _, method), n in calls.items() if method == "__iter__")


@pytest.mark.usefixtures("fresh_app")
def test_a_run_reads_the_address_once_and_writes_it_at_most_once(address_calls):
    calls, messages = address_calls
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["view"] = "w_o"
    at.query_params["utm_source"] = "chat"  # a key no link can set: it leaves with the write
    at.run()
    assert not at.exception, at.exception
    assert callers(calls) == {"tfviz.ui.router"}, calls
    assert reads(calls) == 1 and len(messages) == 1  # the first run's one write
    assert "utm_source" not in at.query_params and at.query_params["view"] == "w_o"

    for text in ("jjiihh", "abcabc"):  # keystrokes: one read and one write each
        calls.clear()
        messages.clear()
        at.text_input(key="sequence").set_value(text).run()
        assert not at.exception, at.exception
        assert callers(calls) == {"tfviz.ui.router"}
        assert reads(calls) == 1 and len(messages) == 1
        assert at.query_params["sequence"] == text

    calls.clear()
    messages.clear()
    at.run()  # nothing changed: the address already is the view's
    assert not at.exception, at.exception
    assert reads(calls) == 1 and messages == []


def test_only_the_router_touches_the_address():
    """Statically too: no other module of the app names st.query_params."""
    sources = [ROOT / "app.py", *sorted((ROOT / "tfviz").rglob("*.py"))]
    naming = {
        path.relative_to(ROOT).as_posix()
        for path in sources
        if "query_params" in path.read_text(encoding="utf-8")
    }
    assert naming == {"tfviz/ui/router.py"}


def test_each_tab_has_one_name_in_links_the_catalogue_and_code():
    ids = [view for view, _ in router.VIEWS]
    assert len(set(ids)) == len(ids) == 8 and router.FIRST == ids[0]
    for lang in LANGUAGES:
        labels = [translate(lang, router.label_key(view)) for view in ids]
        assert len(set(labels)) == len(labels), lang  # a label names one tab
    for view in ids:
        assert router.label_key(view) in catalogue("en")
    assert router.OWN_FRAGMENT <= set(ids) and router.CANVAS_VIEWS <= set(ids)
    views = ROOT / "tfviz" / "ui" / "views"
    for view in ids:  # the module that draws it has the same name
        assert (views / f"{view}.py").exists() or (views / view / "__init__.py").exists()
        assert any(key.startswith(f"{view}.") for key in catalogue("en")), view  # its words


def test_the_views_are_listed_once():
    """app.py keeps no table of views of its own: the router's is the one."""
    tree = ast.parse(Path(APP).read_text(encoding="utf-8"))
    names = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert not names & {"VIEWS", "OWN_FRAGMENT", "CANVAS_VIEWS"}


@pytest.mark.usefixtures("fresh_app")
def test_a_keystroke_checks_its_text_once(monkeypatch):
    """The box checks the typed text (the task's rules, once); the trace and the encoding that
    follow take the task's Accepted text without checking it again."""
    from tfviz.core.tasks import Task

    checked: list[str] = []
    rules = Task.check_rules

    def counted(self, text):
        checked.append(str(text))
        return rules(self, text)

    monkeypatch.setattr(Task, "check_rules", counted)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    checked.clear()
    at.text_input(key="sequence").set_value("hhggff").run()  # a text not traced before
    assert not at.exception, at.exception
    assert checked.count("hhggff") == 1, checked


# ---- a keystroke's route (docs/architecture.md draws it) ----------------------------------------

MAX_HOPS = 8


def deepest_route(at: AppTest, text: str) -> tuple[list[tuple[str, str]], set[str]]:
    """The deepest stack of app.py and tfviz calls while text is typed, from main_area on, as
    (module, function), and every module called on the way: profiled on every thread while the
    run lasts."""
    deepest: list[tuple[str, str]] = []
    called: set[str] = set()

    def module_of(frame) -> str | None:
        if frame.f_code.co_filename == APP:
            return "app"
        name = frame.f_globals.get("__name__", "")
        return name if name.startswith("tfviz") else None

    def profile(frame, event, arg) -> None:
        nonlocal deepest
        if event != "call" or module_of(frame) is None:
            return
        stack = []
        while frame is not None:
            if (module := module_of(frame)) is not None:
                stack.append((module, frame.f_code.co_name))
            frame = frame.f_back
        stack.reverse()
        if ("app", "main_area") in stack:
            stack = stack[stack.index(("app", "main_area")) :]
            called.update(f"{module}.{function}" for module, function in stack)
            if hops(stack) > hops(deepest):
                deepest = stack

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        at.text_input(key="sequence").set_value(text).run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert not at.exception, at.exception
    return deepest, called


def hops(stack: list[tuple[str, str]]) -> int:
    """Calls from one module into another along a stack."""
    return sum(a[0] != b[0] for a, b in zip(stack, stack[1:], strict=False))


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("model", ["bundled:reverse", "bundled-lm:shakespeare-char"])
def test_a_keystroke_crosses_at_most_8_modules_deep(model):
    """From the fragment that reruns on a keystroke to the deepest call it makes (the model's
    forward pass and what it asks of the switches; the view's figures), the route changes module
    at most MAX_HOPS times."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.selectbox(key="model").set_value(model).run()
    assert not at.exception, at.exception
    text = "hhggff" if model.endswith("reverse") else "the king is here"
    stack, called = deepest_route(at, text)
    # The text is new: the route ran the model and drew the open view.
    assert {"tfviz.core.model.forward", "tfviz.ui.views.attention.render"} <= called
    route = "\n".join(f"{module}.{function}" for module, function in stack)
    print(f"{model}: {hops(stack)} hops\n{route}")
    assert hops(stack) <= MAX_HOPS, f"{hops(stack)} hops:\n{route}"
