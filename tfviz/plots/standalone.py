"""One view as one self-contained web page: its charts with hover, the facts behind them.

The page needs no server and no network: nothing in it is fetched (no CDN, no MathJax, no font),
so it opens from a USB stick, a static file host or file://. Text a user typed (the sequence, an
uploaded model's name) is HTML-escaped before it goes into the page; in a figure it is drawn as
text.

Two ways to draw the charts, chosen per page:

- tfviz's own drawing (standalone.js, small, inlined): for figures made only of what it
  draws (LITE_TRACES, LITE_LAYOUT: heatmaps, bars, text and rings, one colour bar: every chart
  the exported views draw today). It opens faster than bertviz's head_view page
  (bench/standalone.py).
- plotly.js inlined once (the installed plotly package's, ~4.8 MB), for any other figure:
  parsing it dominates the time to the first chart, slower than bertviz's page
  (bench/standalone.py).

Both take the figure's plotly JSON as tfviz.plots built it, so a chart has one definition.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Responsive: the charts follow a resized window or a phone's width; no logo link, since a
# click on it would leave the page for plotly's site, which an offline class cannot reach.
CONFIG = {"responsive": True, "displaylogo": False}

# A standalone.js chart and its hover box (here and in the app's canvas charts).
CHART_CSS = """
.tfviz-chart{position:relative;width:100%}.tfviz-chart canvas{display:block}
.tfviz-hover{display:none;position:absolute;pointer-events:none;white-space:pre;z-index:1;
color:#222;background:#fff;border:1px solid #888;border-radius:3px;padding:.25rem .4rem;
font:12px system-ui,sans-serif}
.tfviz-save{position:absolute;top:2px;right:2px;opacity:.4;font:11px system-ui,sans-serif;
color:#2a3f5f;background:#fff;border:1px solid #bbb;border-radius:3px;padding:1px 5px;
cursor:pointer}.tfviz-chart:hover .tfviz-save,.tfviz-save:focus{opacity:1}
.tfviz-zoombox{display:none;position:absolute;pointer-events:none;z-index:1;
border:1px dashed #2a3f5f;background:rgba(42,63,95,.08)}
.tfviz-reset{display:none;position:absolute;top:2px;right:3.2rem;font:13px system-ui,sans-serif;
color:#2a3f5f;background:#fff;border:1px solid #bbb;border-radius:3px;padding:0 5px;cursor:pointer}
"""
# The cells of standalone.js's grid (tfvizChart.grid: the app's canvas charts, and an exported
# column of heads): GRID_COLUMNS to a row, one under the other below 640 px (Streamlit's own
# breakpoint for st.columns). A row's cells are aligned at their feet: a column of heads' first
# cell is taller by its colour bar, and the others' squares line up with its squares.
GRID_COLUMNS = 3
GRID_CSS = (
    ".tfviz-charts{display:grid;gap:1rem;align-items:end;"
    "grid-template-columns:repeat(var(--tfviz-columns,1),minmax(0,1fr))}"
    "@media (max-width:640px){.tfviz-charts{grid-template-columns:minmax(0,1fr)}}"
)
STYLE = (
    """
body{font-family:system-ui,sans-serif;margin:1rem auto;max-width:1200px;padding:0 1rem;color:#222}
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{font-weight:600}dd{margin:0;white-space:pre-wrap;font-family:ui-monospace,monospace}
figure{margin:1.5rem 0}figcaption{color:#555;margin-bottom:.3rem}
"""
    + CHART_CSS
    + GRID_CSS
)


def plotly_js(bundle: str | None = None) -> str:
    """bundle, or the installed plotly package's minified plotly.js, as inline script text."""
    if bundle is None:
        import plotly.offline

        bundle = plotly.offline.get_plotlyjs()
    # "</script" inside a script element would end it early; plotly.js holds none today, but
    # the escape costs nothing and keeps the page well-formed whatever bundle is given.
    return bundle.replace("</script", "<\\/script")


# What standalone.js draws: per trace type, the keys it reads (or may ignore: showlegend, name,
# cliponaxis, meta); per layout part, the same. A figure with any other key, or a value outside
# LITE_VALUES, goes to plotly.js instead, so a chart is never drawn half right.
LITE_TRACES = {
    "heatmap": {
        "type",
        "x",
        "y",
        "z",
        "coloraxis",
        "colorscale",
        "zmin",
        "zmax",
        "hovertemplate",
        "hoverongaps",
        "customdata",
        "text",  # a cell's own words (the logit lens's tokens), for texttemplate and hover
        "texttemplate",
        "textfont",
        "xaxis",
        "yaxis",
        "name",
    },
    "bar": {
        "type",
        "x",
        "y",
        "marker",
        "hovertemplate",
        "text",
        "textposition",
        "textfont",
        "xaxis",
        "yaxis",
        "name",
        "showlegend",
    },
    "scatter": {
        "type",
        "x",
        "y",
        "mode",
        "text",
        "textposition",
        "textfont",
        "marker",
        "customdata",
        "hovertemplate",
        "hoverinfo",
        "xaxis",
        "yaxis",
        "meta",
        "cliponaxis",
        "showlegend",
    },
}
LITE_LAYOUT = {
    "dragmode",  # "zoom": a map standalone.js lets a reader zoom into (with meta's labels)
    "meta",
    "title",
    "height",
    "margin",
    "coloraxis",
    "plot_bgcolor",
    "template",
    "shapes",
    "annotations",
}
LITE_AXIS = {
    "type",
    "tickvals",
    "ticktext",
    "autorange",
    "range",
    "title",
    "domain",
    "anchor",
    "overlaying",
    "visible",
    "side",
    "showgrid",
    "automargin",
    "tickfont",
    "tickangle",
    "showticklabels",
    "zeroline",
}
LITE_PARTS = {
    "coloraxis": {"colorscale", "cmin", "cmax", "showscale", "colorbar"},
    "colorbar": {
        "title",
        "tickvals",
        "ticktext",
        "orientation",
        "x",
        "y",
        "xanchor",
        "yanchor",
        "yref",
        "ypad",
        "thickness",
        "len",
        "ticklabelposition",
    },
    "shape": {"type", "x0", "x1", "y0", "y1", "xref", "yref", "line"},
    "annotation": {
        "text",
        "x",
        "y",
        "xref",
        "yref",
        "xanchor",
        "yanchor",
        "yshift",
        "showarrow",
        "font",
    },
    "marker": {"color", "symbol", "size", "line"},
}
LITE_VALUES = {  # (part, key) -> the values standalone.js knows
    ("scatter", "mode"): {"text", "markers"},
    ("marker", "symbol"): {"circle-open"},
    ("shape", "type"): {"line"},
    ("annotation", "showarrow"): {False},
    ("axis", "type"): {"category", "linear", "-"},
    ("axis", "autorange"): {"reversed", True},
    ("layout", "dragmode"): {"zoom"},
}
AXIS_NAME = re.compile(r"[xy]axis\d*")


def unsupported(figure: go.Figure | dict) -> list[str]:
    """What in figure standalone.js does not draw, as "part.key" names; empty when it draws it
    all."""
    data = figure.to_plotly_json() if hasattr(figure, "to_plotly_json") else figure
    out: list[str] = []

    def check(part: str, spec: dict, allowed: set[str]) -> None:
        for key, value in spec.items():
            if key not in allowed:
                out.append(f"{part}.{key}")
            elif (part, key) in LITE_VALUES and value not in LITE_VALUES[(part, key)]:
                out.append(f"{part}.{key}={value!r}")

    for trace in data.get("data", []):
        kind = trace.get("type", "scatter")
        if kind not in LITE_TRACES:
            out.append(f"trace.type={kind!r}")
            continue
        check(kind, trace, LITE_TRACES[kind])
        if isinstance(trace.get("marker"), dict):
            check("marker", {k: v for k, v in trace["marker"].items()}, LITE_PARTS["marker"])
    for key, value in data.get("layout", {}).items():
        if AXIS_NAME.fullmatch(key):
            check("axis", value, LITE_AXIS)
        elif key not in LITE_LAYOUT:
            out.append(f"layout.{key}")
        elif ("layout", key) in LITE_VALUES and value not in LITE_VALUES[("layout", key)]:
            out.append(f"layout.{key}={value!r}")
    layout = data.get("layout", {})
    if "coloraxis" in layout:
        check("coloraxis", layout["coloraxis"], LITE_PARTS["coloraxis"])
        check("colorbar", layout["coloraxis"].get("colorbar", {}), LITE_PARTS["colorbar"])
    for shape in layout.get("shapes", []):
        check("shape", shape, LITE_PARTS["shape"])
    for note in layout.get("annotations", []):
        check("annotation", note, LITE_PARTS["annotation"])
    return out


@cache
def chart_js() -> str:
    """standalone.js, tfviz's own chart drawing, as inline script text."""
    return (Path(__file__).with_name("standalone.js")).read_text(encoding="utf-8")


def figure_data(figure: go.Figure) -> dict:
    """figure's plotly JSON as plain data (lists, strings, numbers) for standalone.js: its
    arrays as plotly packs them (base64), without the theme (standalone.js draws its own). Made
    once per figure: unsupported() checks it and the page or the app sends it."""
    from plotly.utils import PlotlyJSONEncoder

    data = figure.to_plotly_json()
    data["layout"].pop("template", None)
    return json.loads(json.dumps(data, cls=PlotlyJSONEncoder))


def figure_json(figure: go.Figure | dict) -> str:
    """A figure (or its figure_data) as compact JSON safe inside a <script>: every "<" is
    written as its JSON escape, so no text in it can close the element."""
    data = figure if isinstance(figure, dict) else figure_data(figure)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c")


@cache
def chart_js_compact() -> str:
    """standalone.js without its comments and indentation, for a page that receives it with
    every chart (the app's canvas charts, tfviz.ui.widgets): about half the bytes. Only whole
    comment lines and leading spaces go, which no statement of it depends on."""
    kept = []
    in_block = False
    for line in chart_js().splitlines():
        text = line.strip()
        if in_block:
            in_block = "*/" not in text
            continue
        if text.startswith("/*"):
            in_block = "*/" not in text
            continue
        if text and not text.startswith("//"):
            kept.append(text)
    return "\n".join(kept)


def lite_div(figure: go.Figure | dict, div_id: str) -> str:
    """One figure (or its figure_data) as a <div> and the script that draws it with
    standalone.js. A column of heads (tfviz.plots.attention_column: layout.meta "blocks") is a
    grid of a chart per head, GRID_COLUMNS to a row, read row by row as the app shows it."""
    data = figure if isinstance(figure, dict) else figure_data(figure)
    if isinstance((data.get("layout", {}).get("meta") or {}).get("blocks"), dict):
        return (
            f'<div class="tfviz-charts" id="{div_id}"></div>'
            f"<script>tfvizChart.grid({json.dumps(div_id)},[{figure_json(data)}],"
            f"{GRID_COLUMNS})</script>"
        )
    return (
        f'<div class="tfviz-chart" id="{div_id}"></div>'
        f"<script>tfvizChart({json.dumps(div_id)},{figure_json(figure)})</script>"
    )


def figure_div(figure: go.Figure, div_id: str) -> str:
    """One figure as a <div> and the script that draws it, without plotly.js."""
    import plotly.io as pio

    return pio.to_html(
        figure,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        config=CONFIG,
        div_id=div_id,
        validate=False,  # tfviz.plots built them: checking every property again costs time
    )


def facts_list(facts: Mapping[str, str]) -> str:
    """facts as an HTML definition list, every name and value escaped."""
    rows = "".join(
        f"<dt>{html.escape(str(name))}</dt><dd>{html.escape(str(value))}</dd>"
        for name, value in facts.items()
    )
    return f"<dl>{rows}</dl>"


def page(
    title: str,
    figures: Sequence[tuple[str, go.Figure]],
    facts: Mapping[str, str],
    lang: str = "en",
    plotly_bundle: str | None = None,
    use_plotly: bool = False,
) -> str:
    """One HTML page: title, facts (name -> value, e.g. model, sequence, W_o mode, zeroed heads,
    prediction) and each (caption, figure) with its caption above it.

    The charts are drawn by standalone.js when every figure is made of what it draws
    (unsupported() is empty), else by plotly.js inlined once; use_plotly: plotly.js whatever
    the figures (bench/standalone.py compares the two). Every string given is escaped here: a
    caller passes plain text, never HTML. plotly_bundle: another plotly.js build's text (e.g.
    the cartesian partial bundle of the same version), else the installed package's own.
    """
    data = None if use_plotly else [figure_data(figure) for _, figure in figures]
    lite = data is not None and not any(unsupported(d) for d in data)
    drawn = [
        lite_div(data[i], f"tfviz-chart-{i}") if lite else figure_div(figure, f"tfviz-chart-{i}")
        for i, (_, figure) in enumerate(figures)
    ]
    charts = "".join(
        f"<figure><figcaption>{html.escape(caption)}</figcaption>{div}</figure>"
        for (caption, _), div in zip(figures, drawn, strict=True)
    )
    script = chart_js() if lite else plotly_js(plotly_bundle)
    return (
        f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f'<script type="text/javascript">{script}</script></head>'
        f"<body><h1>{html.escape(title)}</h1>{facts_list(facts)}{charts}</body></html>"
    )
