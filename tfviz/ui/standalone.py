"""The "Download this view as a web page" button: the view's charts as one self-contained HTML file
(tfviz.plots.standalone), for a class that opens a prepared view from a USB stick or a file host.

The page is built on click only: st.download_button takes a callable as its data, so a rerun (a
keystroke in the sequence box) costs nothing here (a page is ~0.1 MB: the charts' data). Whatever
needs the session (the language, the catalogue's words, the switches in words) is read while the
script runs; the callable, which Streamlit may call outside the script, only draws and writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import streamlit as st

from tfviz.core.interventions import head_name
from tfviz.plots import standalone
from tfviz.ui.i18n import current, t
from tfviz.ui.labels import describe
from tfviz.ui.view import View
from tfviz.ui.widgets import chart_file_name

if TYPE_CHECKING:
    import plotly.graph_objects as go

Figures = Sequence[tuple[str, "go.Figure"]]
MARKDOWN_EMPHASIS = re.compile(r"\*\*|`")  # what the catalogue's captions use; HTML shows it raw


def facts(view: View) -> dict[str, str]:
    """What the page states above its charts, in the page's language: model, sequence, switches,
    prediction and right answer (each left out where the view has none)."""
    iv = view.interventions
    zeroed = ", ".join(head_name(layer, h) for layer, h in iv.ablate_heads)
    out = {
        t("standalone.fact.model"): view.entry.name,
        t("standalone.fact.sequence"): view.text if view.text is not None else "",
        t("standalone.fact.w_o"): describe(iv),
        t("standalone.fact.zeroed"): zeroed or t("standalone.fact.none"),
    }
    if view.text_b is not None:
        out[t("standalone.fact.sequence") + " B"] = view.text_b
    trace = view.trace
    if trace is not None and trace.prediction:
        out[t("standalone.fact.prediction")] = " ".join(trace.prediction)
        out[t("standalone.fact.answer")] = " ".join(trace.answer)
    return {name: value for name, value in out.items() if value}  # an invalid sequence: none


def build_page(title: str, figures: Callable[[], Figures] | Figures, page_facts, lang: str) -> str:
    """The HTML page. figures: the figures a view drew, or a callable that draws them anew from
    tfviz.plots; either way in lang already (the view passed words=plot_words(), bound to the
    language while the script ran)."""
    if callable(figures):
        figures = figures()
    shown = [(MARKDOWN_EMPHASIS.sub("", caption), figure) for caption, figure in figures]
    return standalone.page(title, shown, page_facts, lang=lang)


def download_button(
    view: View, title: str, figures: Callable[[], Figures] | Figures, key: str
) -> None:
    """The download button for one view: title (plain text), figures as (caption, plotly figure)
    pairs already drawn by chart(), or a callable that draws them on click (so that a rerun
    does not); key: the button's key and the file's name."""
    lang = current()
    page_facts = facts(view)

    def data() -> str:
        return build_page(title, figures, page_facts, lang)

    st.download_button(
        t("standalone.button"),
        data,  # called on click only
        file_name=chart_file_name(key, view.entry.key) + ".html",
        mime="text/html",
        key=f"standalone_{key}",
        help=t("standalone.help"),
        on_click="ignore",
    )
