"""Which view is open, and the address bar: the one module that reads and writes the URL.

A view is a tab; each has one name, its id, used in the link (?view=), its label's catalogue key
(app.view.<id>) and the module of tfviz.ui.views that draws it (tfviz.ui.views.<id>). The tabs'
widget holds the open tab's label, which the other language does not know; open_view translates
it before the tabs are drawn, so a language switch keeps the tab.

The address is read once per whole-page run (read_address: a snapshot in the session) and
written at most once per run (write_address: one message to the browser, only when the link
changed). A fragment run (a keystroke, a tab) reads the snapshot, which is what the browser holds:
the address changes only by this module's writes, or by the browser loading a new page, which is a
new session.

This module imports no torch: app.py draws its first paint with it before the heavy imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import streamlit as st

from tfviz.ui import state
from tfviz.ui.i18n import LANGUAGES, t, translate

# (id, needs a valid sequence). The id is the tab's one name: in links (?view=), in the
# catalogue (app.view.<id>, and <id>.* for the view's own words) and in code (the module
# tfviz.ui.views.<id> that draws it, with render(view)).
VIEWS: list[tuple[str, bool]] = [
    ("attention", True),
    ("w_o", True),
    ("w_o_off", True),
    ("parts", False),  # says itself which of its parts need a sequence
    ("train", False),
    ("analysis", False),
    ("experiment", False),
    ("lessons", False),
]
FIRST = VIEWS[0][0]
# Views whose widgets change nothing outside them: each runs as a fragment of its own, so a
# widget of the view (a layer picker, a head, a section) reruns and redraws that view alone, not
# the sequence, the prediction and the link above it. Train, "Does W_o matter?" and Lessons are
# left in the main area's run: their buttons change the link (a training in progress, the lesson
# step), which only a main-area run writes, and they poll with fragments of their own.
OWN_FRAGMENT = frozenset({"attention", "w_o", "w_o_off", "parts", "analysis"})
# Views whose first look draws no plotly chart, only canvas charts (widgets.canvas_charts): a
# page opening on one is not sent app.first_paint's plotly warm-up.
CANVAS_VIEWS = frozenset({"attention"})

Address = dict[str, list[str]]  # query key -> every value the address gives it


def label_key(view: str) -> str:
    """The catalogue key of a tab's label."""
    return f"app.view.{view}"


def labels() -> dict[str, str]:
    """Tab id -> its label in the current language, in the tabs' order."""
    return {view: t(label_key(view)) for view, _ in VIEWS}


# ---- the address -------------------------------------------------------------------------------


def read_address() -> Address:
    """The address's query, read from the browser once per whole-page run and kept in the
    session for the fragment runs that follow it."""
    address = {key: st.query_params.get_all(key) for key in st.query_params}
    state.ADDRESS.set(address)
    return address


def address() -> Address:
    """The address as last read or written this session (empty before the first read)."""
    return state.ADDRESS.get() or {}


def asked(key: str) -> str | None:
    """The address's first value of key, or None."""
    values = address().get(key)
    return values[0] if values else None


def write_address(query: Mapping[str, str]) -> None:
    """Make the address's query exactly query (one value a key): one message to the browser,
    none when it already is. Keys not in query (a link's typo, a refused value) leave it."""
    want = {key: [value] for key, value in query.items()}
    if want == address():
        return
    st.query_params.from_dict(query)
    state.ADDRESS.set(want)


# ---- the open view -----------------------------------------------------------------------------


def opened_first() -> str:
    """The view a session's first paint is for: the link's, else the first (before the catalogue
    is loaded: no label needed)."""
    view = asked(state.VIEW.name)
    return view if any(view == v for v, _ in VIEWS) else FIRST


def open_view(shown: Mapping[str, str]) -> str:
    """The id of the tab to open, the tabs' state carried over a language switch.

    shown: labels(). The tabs' value is the open tab's label, translated here into the current
    language when it is another's, before the tabs are drawn: else the page would fall back to
    the first tab.
    """
    value = state.VIEW.get()
    for view, _ in VIEWS:
        if any(value == translate(lang, label_key(view)) for lang in LANGUAGES):
            if value != shown[view]:
                state.VIEW.set(shown[view])
            return view
    return FIRST


def open_by_link(view: str, shown: Mapping[str, str]) -> None:
    """Open view (an id a link named) on the next drawing of the tabs."""
    state.VIEW.set(shown[view])


def draw_tabs(shown: Mapping[str, str], view) -> None:
    """The tab strip; only the open tab's view runs, inside its tab (a view that needs a
    sequence says so while the typed one is refused)."""
    tabs = st.tabs(list(shown.values()), key=state.VIEW.name, on_change="rerun")
    for tab, (view_id, needs_trace) in zip(tabs, VIEWS, strict=True):
        if not tab.open:
            continue
        with tab:
            if needs_trace and view.trace is None:
                st.info(t("app.needs_sequence"))
            elif view_id in OWN_FRAGMENT:
                view_fragment(view_id, view)
            else:
                render_view(view_id, view)


def render_view(view_id: str, view) -> None:
    """Draw a view: its module is imported the first time it is opened."""
    importlib.import_module(f"tfviz.ui.views.{view_id}").render(view)


# Nested in the main area's run: a main-area run (a keystroke, a tab) runs it too, with the new
# view; its own widgets rerun it alone, with the view of the last main-area run, still current.
view_fragment = st.fragment(render_view)
