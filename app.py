"""tfviz web app: pick a model, type a sequence, and see inside multi-head attention and W_o.

Run with `streamlit run app.py`. This file is the entry point only: page setup, the sidebar,
the sequence and prediction, and the open view, which tfviz.ui.router picks (it owns the tabs
and the address). Each view is a module of tfviz/ui/views with a render(view) function
(README.md, "Layout", lists what lives where); numbers come from tfviz.core.trace and
tfviz.analysis, figures from tfviz.plots, training from tfviz.serve.jobs. No torch code here.

Each checkpoint (and the pretrained all-MiniLM-L6-v2, once picked) is loaded once per process and
shared by every browser session, so it is never changed: the W_o switch and head ablation are
forward arguments. Traces are cached per (model digest, sequence, switches) and hold numpy only;
a task's accuracy under switches is cached per model for every session (tfviz.core.dissect.
MeasureCache), which "Take W_o apart" fills ahead for the layer scopes not yet shown.
An uploaded checkpoint is validated before use and kept in its session only; training and
experiment reruns run in worker threads under one server-wide cap (tfviz.serve.jobs).

Every string shown comes from the language catalogue (tfviz.ui.i18n; the picker tops the
sidebar), and what is on screen (model, sequence, switches, tab, lesson step, language) is kept
in the address's query string, so a link opens the same view (tfviz.ui.share words and checks
links; tfviz.ui.router reads the address once a run and writes it at most once).

The tabs are lazy: only the open one runs, and a view's module (with the library modules only it
needs) is imported the first time it is opened, so the first page does not wait for them. A new
view is one module with a render(view) function, added to tfviz.ui.router.VIEWS.
"""

from __future__ import annotations

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

from tfviz.ui import router, state  # no torch in either (import tfviz loads none)

# Phones: the tab strip wraps onto a second line instead of scrolling sideways (at 390 px the
# eight tabs need about three screen widths; checked at 390 x 844 by
# tests/browser/test_browser_share.py).
# (The toy grid's key labels were hidden here too: one mosaic left them 6 px each. Its heads are
# now columns of squares, each the phone's width: tests/browser/test_browser_readable.py.)
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
    with slot.container():
        st.caption("…")  # something moves; the words come with the catalogue
        st.code(" ", language=None)  # the prediction's code block, on every view
        # The tab a link opens (tfviz.ui.share reads the rest later), else the first one.
        if router.opened_first() in router.CANVAS_VIEWS:
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
router.read_address()  # the one read of the URL this run; fragment runs use what it read
heading, warm_up = first_paint()

# The heavy imports (torch, through tfviz) come after the first paint on purpose: see above.
from tfviz.core.interventions import NONE  # noqa: E402
from tfviz.serve import heap  # noqa: E402
from tfviz.ui import i18n, kinds, share, sidebar, switches  # noqa: E402
from tfviz.ui.compute import trace_for  # noqa: E402
from tfviz.ui.i18n import t  # noqa: E402
from tfviz.ui.jobs import resume, training_in_progress  # noqa: E402
from tfviz.ui.models import setup_process  # noqa: E402
from tfviz.ui.text import md_escape  # noqa: E402
from tfviz.ui.view import View  # noqa: E402

if warm_up is not None:
    warm_up.empty()
with heading.container():
    st.header(t("app.title"))
    st.caption(t("app.subtitle"))


def main() -> None:
    device = setup_process()
    with st.sidebar:
        # A shared link, on the session's first run; before the language picker, which takes
        # the link's language from session_state (a widget's value can be set only before it).
        share.read_link(router.address(), router.labels())
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
    kind = kinds.kind_of(task)
    main_area(View(entry=entry, model=model, meta=meta, task=task, interventions=iv, kind=kind))


@st.fragment
def main_area(view: View) -> None:
    """The sequence (two sentences for a sentence model), the prediction and the open view.

    A fragment: typing a sequence or using a tab reruns only this part, so the sidebar is neither
    recomputed nor redrawn on each keystroke (bench/ui_latency.py). The sidebar's widgets still
    rerun the whole page.

    Every run writes what is shown into the address's query string (tfviz.ui.router), and a
    fragment run does too: a keystroke, a tab or a lesson step changes the link.
    """
    share.show_notices(md_escape)  # what a shared link asked for and did not get
    text, text_b = view.kind.sequence_input(view.task)  # each checked once, here
    if text is not None:
        trace = trace_for(view, text, view.interventions)
        base = trace if view.interventions.is_default else trace_for(view, text, NONE)
        view = replace(view, text=text, text_b=text_b, trace=trace, base=base)
        view.kind.show_prediction(view)
    else:
        view = replace(view, text_b=text_b)

    labels = router.labels()
    shown = router.open_view(labels)
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
    router.write_address(query)
    if view.text is not None:  # a refused sequence has no view to link to; its error shows
        share.link_box(query)
    router.draw_tabs(labels, view)
    # A view opened for the first time, or a model loaded, may have imported modules: their
    # objects are frozen, so that the collection after every later run does not walk them.
    heap.freeze_new_imports()



main()
