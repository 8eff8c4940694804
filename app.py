"""tfviz web app: pick a model, type a sequence, and see inside multi-head attention and W_o.

Run with `streamlit run app.py`. This file is the entry point only: page setup, the sidebar,
the sequence and prediction, and which view is open. Each view is a module of tfviz/ui/views with a
render(view) function (README.md, "Layout", lists what lives where); numbers come from
tfviz.core.trace and tfviz.analysis, figures from tfviz.plots, training from tfviz.serve.jobs. No
torch code here.

Each checkpoint (and the pretrained all-MiniLM-L6-v2, once picked) is loaded once per process and
shared by every browser session, so it is never changed: the W_o switch and head ablation are
forward arguments. Traces are cached per (model digest, sequence, switches) and hold numpy only;
a task's accuracy under switches is cached per model for every session (tfviz.core.dissect.
MeasureCache), which "Take W_o apart" fills ahead for the layer scopes not yet shown.
An uploaded checkpoint is validated before use and kept in its session only; training and
experiment reruns run in worker threads under one server-wide cap (tfviz.serve.jobs).

Every string shown comes from the language catalogue (tfviz.ui.i18n; the picker tops the
sidebar), and what is on screen (model, sequence, switches, tab, lesson step, language) is kept
in the address's query string, so a link opens the same view (tfviz.ui.share).

The tabs are lazy: only the open one runs, and a view's module (with the library modules only it
needs) is imported the first time it is opened, so the first page does not wait for them. A new
view is one module with a render(view) function, added to VIEWS.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

# numpy and pandas first, whole, before any chart: plotly looks them up in sys.modules without
# importing them (is_homogeneous_array), so on a fresh server a session drawing its first chart
# while another session's thread was still importing numpy got the half-made module
# ("partially initialized module 'numpy' has no attribute 'ndarray'"). An import statement waits
# for an import in flight in another thread; this one is paid once per process.
import numpy  # noqa: F401
import pandas  # noqa: F401
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from tfviz.ui import state  # the session's keys: no torch (import tfviz loads none)

# (catalogue key of the tab's label, module in tfviz.ui.views with render(view), needs a valid
# sequence)
VIEWS: list[tuple[str, str, bool]] = [
    ("app.view.attention", "attention", True),
    ("app.view.w_o", "before_after", True),
    ("app.view.w_o_off", "w_o_off", True),
    ("app.view.parts", "dissect", False),  # says itself which of its parts need a sequence
    ("app.view.train", "train", False),
    ("app.view.analysis", "analysis", False),
    ("app.view.experiment", "does_w_o_matter", False),
    ("app.view.lessons", "lessons", False),
]
# Views whose widgets change nothing outside them: each runs as a fragment of its own, so a
# widget of the view (a layer picker, a head, a section) reruns and redraws that view alone, not
# the sequence, the prediction and the link above it. Train, "Does W_o matter?" and Lessons are
# left in the main area's run: their buttons change the link (a training in progress, the lesson
# step), which only a main-area run writes, and they poll with fragments of their own.
OWN_FRAGMENT = frozenset({"attention", "before_after", "w_o_off", "dissect", "analysis"})
# Views whose first look draws no plotly chart, only canvas charts (widgets.canvas_charts): a
# page opening on one is not sent first_paint's plotly warm-up, whose 4.7 MB chunk the browser
# would fetch and compile while it draws the view (tests/test_browser_pagespeed.py).
CANVAS_VIEWS = frozenset({"attention"})
# Phones: the tab strip wraps onto a second line instead of scrolling sideways (at 390 px the
# eight tabs need about three screen widths; checked at 390 x 844 by tests/test_browser_share.py).
# (The toy grid's key labels were hidden here too: one mosaic left them 6 px each. Its heads are
# now columns of squares, each the phone's width: tests/test_browser_readable.py.)
PHONE_CSS = '<style>[role="tablist"] { flex-wrap: wrap; row-gap: 0.25rem; }</style>'


def first_paint() -> tuple[DeltaGenerator, DeltaGenerator | None]:
    """The page title's place, and on a session's first run a warm-up for the browser.

    This runs before the views' imports: on a fresh server they (torch) take seconds,
    and the browser would sit idle through it, then fetch and compile its chart and code-block
    components (4.7 MB of plotly.js) only once the data arrived. A tiny chart and code block,
    sent now and removed once the imports are done, make it do that work meanwhile: the first
    complete page comes sooner (measured: bench/ui_latency.py --compare-app). The chart only
    for a view that draws plotly charts (CANVAS_VIEWS draw none). Returns the
    title's slot, written with the other imports (the page's language comes with the sidebar's
    modules), and the slot to clear once the imports are done, or None when there is nothing
    to clear.
    """
    heading = st.empty()
    slot = st.empty()  # always there, so the elements after it keep their places
    if state.BROWSER_WARMED.get():
        return heading, None
    state.BROWSER_WARMED.set(True)
    # The tab a link opens (tfviz.ui.share reads the rest later), else the first one.
    opened = st.query_params.get(state.VIEW.name, VIEWS[0][0].removeprefix("app.view."))
    with slot.container():
        st.caption("…")  # something moves; the words come with the catalogue
        st.code(" ", language=None)  # the prediction's code block, on every view
        if opened in CANVAS_VIEWS:
            return heading, slot
        # A transparent 10 x 10 px heatmap: drawn, but nothing to see.
        heatmap = {"type": "heatmap", "z": [[0]], "opacity": 0, "showscale": False}
        clear = "rgba(0,0,0,0)"
        tiny = {
            "height": 10,
            "width": 10,
            "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "paper_bgcolor": clear,
            "plot_bgcolor": clear,
        }
        figure = {"data": [heatmap], "layout": tiny}
        st.plotly_chart(
            figure, width="content", theme=None, config={"staticPlot": True}, key="warm_up_chart"
        )
    return heading, slot


# The browser tab's title is set before any language is known: it stays the project's name.
st.set_page_config(page_title="tfviz", layout="wide")
st.html(PHONE_CSS)  # style only: Streamlit adds it to the page without a visible element
heading, warm_up = first_paint()

# The heavy imports (torch, through tfviz) come after the first paint on purpose: see above.
from tfviz.core.interventions import NONE  # noqa: E402
from tfviz.serve import heap, jobs  # noqa: E402
from tfviz.training.train import resolve_device  # noqa: E402
from tfviz.ui import i18n, sequence, share, sidebar, switches  # noqa: E402
from tfviz.ui.i18n import t  # noqa: E402
from tfviz.ui.jobs import resume, training_in_progress  # noqa: E402
from tfviz.ui.text import md_escape  # noqa: E402
from tfviz.ui.view import View, trace_for  # noqa: E402

if warm_up is not None:
    warm_up.empty()
with heading.container():
    st.header(t("app.title"))
    st.caption(t("app.subtitle"))


@st.cache_resource(show_spinner=False)
def setup_process() -> str:
    """Once per process: torch threads, and the device every model is loaded onto."""
    # torch's thread count is process-wide, so it is set here once, not in the training thread.
    # These models are tiny and run fastest on one thread; then each training job and each page
    # request takes about one core, which is what the jobs-per-core cap assumes.
    jobs.limit_torch_threads(1)
    device = str(resolve_device("auto"))
    # Streamlit runs a full gc.collect() after every script run; with torch and plotly imported
    # that walk was a large share of each keystroke (measured: bench/README.md). Freezing what
    # exists now (the libraries, never garbage) leaves only each run's own objects for it to scan.
    # No collect first: it would delay the first page, the imports leave no cyclic garbage to speak
    # of, and Streamlit's own collect after this run clears what the run leaves. Later imports
    # are frozen at the end of the run that made them (main_area).
    heap.freeze_new_imports()
    return device


def tab_labels() -> dict[str, str]:
    """Tab id (its catalogue key's last part, which links name it by) -> its label in the
    current language."""
    return {view_id(key): t(key) for key, _, _ in VIEWS}


def view_id(key: str) -> str:
    """The id a link names a tab by: its catalogue key's last part (app.view.parts: parts)."""
    return key.removeprefix("app.view.")


def open_tab(labels: dict[str, str]) -> str:
    """The id of the tab to open, the tabs' state carried over a language switch.

    The tabs' value is the open tab's label, which the other language does not know: it is
    translated here, before the tabs are drawn, or the page would fall back to the first tab.
    """
    shown = state.VIEW.get()
    for lang in i18n.LANGUAGES:
        for key, _, _ in VIEWS:
            if shown == i18n.translate(lang, key):
                if shown != labels[view_id(key)]:
                    state.VIEW.set(labels[view_id(key)])
                return view_id(key)
    return view_id(VIEWS[0][0])


def main() -> None:
    device = setup_process()
    with st.sidebar:
        # A shared link, on the session's first run; before the language picker, which takes
        # the link's language from session_state (a widget's value can be set only before it).
        share.read_link(tab_labels())
        i18n.language_picker()
        # A reloaded page that was training: what became of it. Before the model picker, which
        # then lists a model finished meanwhile as this session's own.
        asked = share.training_asked()
        if asked is not None:
            resume(asked)
        st.title(t("sidebar.title"))
        picked = sidebar.pick_model(device)
        if picked is None:
            return
        entry, model, meta, task = picked
        sidebar.on_model_change(entry, task)
        sidebar.restore_link(meta, task)
        sidebar.model_info(meta, task, device)
        iv = switches.controls(meta.config).interventions
        sidebar.chart_format_picker()
    main_area(View(entry=entry, model=model, meta=meta, task=task, interventions=iv))


@st.fragment
def main_area(view: View) -> None:
    """The sequence (two sentences for a sentence model), the prediction and the open view.

    A fragment: typing a sequence or using a tab reruns only this part, so the sidebar is neither
    recomputed nor redrawn on each keystroke (bench/ui_latency.py). The sidebar's widgets still
    rerun the whole page.

    Every run writes what is shown into the address's query string (tfviz.ui.share), and a
    fragment run does too: a keystroke, a tab or a lesson step changes the link.
    """
    share.show_notices(md_escape)  # what a shared link asked for and did not get
    text, text_b = sequence.sequence_input(view.task)
    if text is not None:
        trace = trace_for(view, text, view.interventions)
        base = trace if view.interventions.is_default else trace_for(view, text, NONE)
        view = replace(view, text=text, text_b=text_b, trace=trace, base=base)
        sequence.show_prediction(view)
    else:
        view = replace(view, text_b=text_b)

    labels = tab_labels()
    shown = open_tab(labels)
    query = share.query_of(
        model=view.entry.key,
        sequence=view.text,
        sentence_b=view.text_b,
        interventions=view.interventions,
        view=shown,
        step=state.LESSON_STEP.get(),
        lang=i18n.current(),
        training=training_in_progress(),
    )
    share.sync(query)
    if view.text is not None:  # a refused sequence has no view to link to; its error shows
        share.link_box(query)

    tabs = st.tabs(list(labels.values()), key=state.VIEW.name, on_change="rerun")
    for tab, (_, module, needs_trace) in zip(tabs, VIEWS, strict=True):
        if not tab.open:
            continue
        with tab:
            if needs_trace and view.trace is None:
                st.info(t("app.needs_sequence"))
            elif module in OWN_FRAGMENT:
                view_fragment(module, view)
            else:
                render_view(module, view)
    # A view opened for the first time, or a model loaded, may have imported modules: their
    # objects are frozen, so that the collection after every later run does not walk them.
    heap.freeze_new_imports()


def render_view(module: str, view: View) -> None:
    importlib.import_module(f"tfviz.ui.views.{module}").render(view)


# Nested in main_area: a main-area run (a keystroke, a tab) runs it too, with the new view; its
# own widgets rerun it alone, with the view of the last main-area run, which is still current.
view_fragment = st.fragment(render_view)


main()
