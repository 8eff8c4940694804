"""How every view draws a chart (in the student's words, with the camera's format), a table of
numbers, an index picker and a folded explanation."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import streamlit as st

from tfviz import plots
from tfviz.plots import standalone
from tfviz.ui import state
from tfviz.ui.downloads import FILE_NAME_UNSAFE
from tfviz.ui.help import HELP
from tfviz.ui.i18n import current, t, translate
from tfviz.ui.text import md_escape

CHART_FORMATS = ("png", "svg")


def chart_file_name(key: str, model_key: str | None) -> str:
    """A download's file name without extension: tfviz_<model>_<chart key>, letters, digits,
    '_' and '-' only (a trained model's name may hold anything), at most 80 characters."""
    model = (model_key or "").split(":", 1)[-1]
    name = "_".join(part for part in ("tfviz", model[:40], key) if part)
    return FILE_NAME_UNSAFE.sub("_", name)[:80]


def plot_words(lang: str | None = None) -> plots.Words:
    """The words tfviz.plots writes into a figure itself (axis titles, block names, hover
    labels...), in lang (default: the current language), for a figure function's `words`:
    tfviz.ui.i18n.translate of the catalogue's chart.* keys. Bound to the language now, so a
    figure drawn later, outside the script (a download's callable), keeps it."""
    return functools.partial(translate, current() if lang is None else lang)


def chart(figure, key: str) -> None:
    """A plotly figure, full width, without Streamlit's theme, downloadable from its toolbar.

    Its words are already the student's: the view built it with words=plot_words().

    Applying the theme in the browser cost a noticeable part of every keystroke on the Attention
    tab (three charts; bench/README.md); the figures set their own colours, so it adds nothing
    needed.

    The toolbar's camera saves the chart as PNG or SVG (the sidebar's choice, CHART_FORMAT),
    named after the model and the chart. plotly.js draws the file itself, from the plotly.js
    that Streamlit bundles, so it works offline. One camera button with a chosen format, not two
    buttons: an added toolbar button needs a JavaScript click handler, which a chart's config,
    sent as JSON, cannot carry.
    """
    fmt = state.CHART_FORMAT.get()
    config = {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": fmt if fmt in CHART_FORMATS else CHART_FORMATS[0],
            "filename": chart_file_name(key, state.MODEL.get()),
            "scale": 2,  # a sharp PNG for slides; SVG ignores it
        },
    }
    st.plotly_chart(figure, key=key, theme=None, config=config)


# A many-headed layer's heads (MiniLM's 12 and their mean) are redrawn on every keystroke:
# plotly.js took several times as long to redraw them as three charts as one plain heatmap of the
# same cells (bench/ui_latency.py --floor), and a keystroke cost more than the floor page's. They
# are drawn instead by tfviz's standalone.js, the exported web page's drawing
# (tfviz/plots/standalone.py), from the same plotly figures, all in one element: its script
# arrives once per run, not once per chart. It lays them out in a grid, `columns` to a row and
# one under the other below Streamlit's own breakpoint for st.columns (640 px), a column of
# heads a chart per head, row by row (standalone.js's grid). The toy models' Attention grid is
# drawn so too: a page of canvas charts alone fetches no plotly.js (Streamlit's 4.7 MB chunk;
# bench/README.md).
CANVAS_JS = (
    standalone.chart_js_compact()
    + """
export default function ({ parentElement, data }) {
  let grid = parentElement.querySelector(".tfviz-charts");
  if (!grid) grid = parentElement.appendChild(document.createElement("div"));
  // A column of heads is a cell per head, row by row (standalone.js's grid).
  const save = (i) => ({ file: data.files[i], label: data.save, reset: data.reset });
  window.tfvizChart.grid(grid, data.figures, data.columns, save);
}
"""
)
CANVAS_CSS = standalone.CHART_CSS + standalone.GRID_CSS
CANVAS_NAME = "tfviz_canvas_charts"
_canvas_charts = st.components.v2.component(
    CANVAS_NAME, js=CANVAS_JS, css=CANVAS_CSS, isolate_styles=False
)


def cell_count(data: dict) -> int:
    """How many charts CANVAS_JS draws a figure (its figure_data) as: one per block of a column
    of heads (tfviz.plots' columns: layout.meta[plots.BLOCKS_META]), else one."""
    if isinstance((data["layout"].get("meta") or {}).get(plots.BLOCKS_META), dict):
        return max(1, len(plots.block_titles(data)))
    return 1


def canvas_charts(figures: Sequence, key: str, columns: int) -> None:
    """figures (plotly figures that standalone.js draws: tfviz.plots' grids and columns of
    squares) in a grid `columns` to a row, drawn on canvases with their hover, in one element
    (see CANVAS_JS): a column of heads (tfviz.plots.attention_column) a chart per head, row by
    row. Each chart has a button that saves it as a PNG named as chart() names its files
    (key_0, key_1..., one per chart drawn; PNG whatever the sidebar's format: a canvas has no
    SVG). A figure standalone.js does not draw sends them all to plotly, in st.columns."""
    shown = [standalone.figure_data(figure) for figure in figures]
    if any(standalone.unsupported(data) for data in shown):
        slots = st.columns(min(columns, len(figures)))  # one figure: the whole width
        for c, figure in enumerate(figures):
            with slots[c % len(slots)]:
                chart(figure, key=f"{key}_{c}")
        return
    model = state.MODEL.get()
    cells = sum(cell_count(data) for data in shown)
    files = [chart_file_name(f"{key}_{c}", model) for c in range(cells)]
    data = {
        "columns": columns,
        "figures": shown,
        "files": files,
        "save": t("common.save_png"),
        "reset": t("common.show_whole"),  # a zoomed map's button (tfviz.plots.attention_map)
    }
    _canvas_charts(data=data, key=key)


def number_table(rows: list[dict], key: str) -> None:
    """Rows of a table, floats shown to 4 significant digits (gradient scores are ~1e-4)."""
    floats = [name for name, value in rows[0].items() if isinstance(value, float)] if rows else []
    config = {name: st.column_config.NumberColumn(format="%.4g") for name in floats}
    st.dataframe(rows, hide_index=True, key=key, column_config=config)


def drop_stale_index(key: str, n: int) -> None:
    """Forget a widget's choice of positions (one, or a range's two ends) that are not all in
    0..n-1 any more (another model, a shorter input), before the widget is drawn: Streamlit would
    refuse a value its options lack."""
    chosen = state.widget_value(key)
    ends = chosen if isinstance(chosen, (tuple, list)) else (chosen,)
    if chosen is not None and not all(i in range(n) for i in ends):
        state.forget(key)


def index_picker(label: str, n: int, key: str, prefix: str, **kwargs) -> int:
    """A selectbox over 0..n-1 shown as prefix + number; a stale choice (other model) is dropped."""
    drop_stale_index(key, n)
    return st.selectbox(
        label, range(n), format_func=lambda x: f"{prefix}{x}", key=key, width=200, **kwargs
    )


def what_is_this(*keys: str) -> None:
    """The method's citation and explanation (tfviz.ui.help), folded away."""
    with st.expander(t("common.what_is_this")):
        for key in keys:
            st.markdown(md_escape(HELP[key]))
