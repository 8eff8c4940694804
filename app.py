"""tfviz web app: pick a model, type a sequence, and see inside multi-head attention and W_o.

Run with `streamlit run app.py`. This file is the entry point only: page setup, the sidebar,
the sequence and prediction, and which view is open. Each view is a module of tfviz/ui with a
render(view) function (README.md, "Layout", lists what lives where); numbers come from
tfviz.snapshot and tfviz.analysis, figures from tfviz.plots, training from tfviz.jobs. No torch
code here.

Each checkpoint (and the pretrained all-MiniLM-L6-v2, once picked) is loaded once per process and
shared by every browser session, so it is never changed: the W_o switch and head ablation are
forward arguments. Traces are cached per (model digest, sequence, switches) and hold numpy only.
An uploaded checkpoint is validated before use and kept in its session only; training and
experiment reruns run in worker threads under one server-wide cap (tfviz.jobs).

The tabs are lazy: only the open one runs, and a view's module (with the library modules only it
needs) is imported the first time it is opened, so the first page does not wait for them. A new
view is one module with a render(view) function, added to VIEWS.
"""

from __future__ import annotations

import gc
import importlib
from dataclasses import replace

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

# (tab label, module in tfviz.ui with render(view), needs a valid sequence)
VIEWS: list[tuple[str, str, bool]] = [
    ("Attention", "attention", True),
    ("Before/after W_o", "w_o", True),
    ("W_o off: compare", "w_o_off", True),
    ("Train", "train", False),
    ("Analysis", "analysis", False),
    ("Does W_o matter?", "experiment", False),
    ("Lessons", "lessons", False),
]
WARMED = "_browser_warmed"  # session_state: this session's browser has its chart code


def first_paint() -> DeltaGenerator | None:
    """The page's title, and on a session's first run a warm-up for the browser.

    This runs before tfviz is imported: on a fresh server that import (torch) takes about 2 s,
    and the browser would sit idle through it, then fetch and compile its chart and code-block
    components (4.7 MB of plotly.js) only once the data arrived. A tiny chart and code block,
    sent now and removed once the imports are done, make it do that work meanwhile: the first
    complete page came about 1.5 s sooner (bench/ui_latency.py --compare-app). Returns the
    slot to clear once the imports are done, or None when there is nothing to clear.
    """
    st.header("Inside multi-head attention: what W_o does")
    st.caption(
        "Concatenating the heads is not integrating them: the output projection W_o mixes every "
        "head into every output dimension. Type a sequence and look."
    )
    slot = st.empty()  # always there, so the elements after it keep their places
    if st.session_state.get(WARMED):
        return None
    st.session_state[WARMED] = True
    with slot.container():
        st.caption("Loading the models…")
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
        st.code(" ", language=None)
    return slot


st.set_page_config(page_title="tfviz: inside multi-head attention", layout="wide")
warm_up = first_paint()

# The heavy imports (torch, through tfviz) come after the first paint on purpose: see above.
from tfviz import jobs  # noqa: E402
from tfviz.interventions import NONE  # noqa: E402
from tfviz.trainer import resolve_device  # noqa: E402
from tfviz.ui import sequence, sidebar  # noqa: E402
from tfviz.ui.common import View, trace_for  # noqa: E402

if warm_up is not None:
    warm_up.empty()


@st.cache_resource(show_spinner=False)
def setup_process() -> str:
    """Once per process: torch threads, and the device every model is loaded onto."""
    # torch's thread count is process-wide, so it is set here once, not in the training thread.
    # These models are tiny and run fastest on one thread; then each training job and each page
    # request takes about one core, which is what the jobs-per-core cap assumes.
    jobs.limit_torch_threads(1)
    device = str(resolve_device("auto"))
    # Streamlit runs a full gc.collect() after every script run; with torch and plotly imported
    # that walk took ~90 ms of each keystroke (bench/README.md). Freezing what exists now (the
    # libraries, never garbage) leaves only each run's own objects for it to scan. No collect
    # first: it cost ~170 ms of the first page, the imports leave no cyclic garbage to speak
    # of, and Streamlit's own collect after this run clears what the run leaves.
    gc.freeze()
    return device


def main() -> None:
    device = setup_process()
    with st.sidebar:
        st.title("tfviz")
        picked = sidebar.pick_model(device)
        if picked is None:
            return
        entry, model, meta, task = picked
        sidebar.on_model_change(entry, task)
        sidebar.model_info(meta, task, device)
        iv = sidebar.switch_controls(meta)
    main_area(View(entry=entry, model=model, meta=meta, task=task, interventions=iv))


@st.fragment
def main_area(view: View) -> None:
    """The sequence (two sentences for a sentence model), the prediction and the open view.

    A fragment: typing a sequence or using a tab reruns only this part, so the sidebar is neither
    recomputed nor redrawn on each keystroke (bench/ui_latency.py). The sidebar's widgets still
    rerun the whole page.
    """
    text, text_b = sequence.sequence_input(view.task)
    if text is not None:
        trace = trace_for(view, text, view.interventions)
        base = trace if view.interventions.is_default else trace_for(view, text, NONE)
        view = replace(view, text=text, text_b=text_b, trace=trace, base=base)
        sequence.show_prediction(view)

    tabs = st.tabs([label for label, _, _ in VIEWS], key="view", on_change="rerun")
    for tab, (_, module, needs_trace) in zip(tabs, VIEWS, strict=True):
        if not tab.open:
            continue
        with tab:
            if needs_trace and view.trace is None:
                st.info("Type a valid sequence above to see this view.")
            else:
                importlib.import_module(f"tfviz.ui.{module}").render(view)


main()
