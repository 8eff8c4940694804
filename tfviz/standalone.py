"""One view as one self-contained web page: its charts with hover, the facts behind them.

The page needs no server and no network: plotly.js (from the installed plotly package) is inlined
once, before every figure, so a page of several charts costs one copy (~4.5 MB minified) and
opens from a USB stick, a static file host or file://. Nothing in the page is fetched: no CDN,
no MathJax, no font. Text a user typed (the sequence, an uploaded model's name) is HTML-escaped
before it goes into the page; in a figure, plotly itself draws text as text.

Parsing plotly.js dominates the time to first paint (bench/standalone.py), so the figures carry
only what they need: each figure's JSON is written compactly by plotly.io.to_html and the page
adds no script of its own besides plotly.js.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Responsive: the charts follow a resized window or a phone's width; no logo link, since a
# click on it would leave the page for plotly's site, which an offline class cannot reach.
CONFIG = {"responsive": True, "displaylogo": False}

STYLE = """
body{font-family:system-ui,sans-serif;margin:1rem auto;max-width:1200px;padding:0 1rem;color:#222}
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{font-weight:600}dd{margin:0;white-space:pre-wrap;font-family:ui-monospace,monospace}
figure{margin:1.5rem 0}figcaption{color:#555;margin-bottom:.3rem}
"""


def plotly_js(bundle: str | None = None) -> str:
    """bundle, or the installed plotly package's minified plotly.js, as inline script text."""
    if bundle is None:
        import plotly.offline

        bundle = plotly.offline.get_plotlyjs()
    # "</script" inside a script element would end it early; plotly.js holds none today, but
    # the escape costs nothing and keeps the page well-formed whatever bundle is given.
    return bundle.replace("</script", "<\\/script")


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
) -> str:
    """One HTML page: title, facts (name -> value, e.g. model, sequence, W_o mode, zeroed heads,
    prediction) and each (caption, figure) with its caption above it, plotly.js inlined once.

    Every string given is escaped here: a caller passes plain text, never HTML. plotly_bundle:
    another plotly.js build's text (e.g. the cartesian partial bundle of the same version, a
    third of the size; bench/standalone.py measures it), else the installed package's own.
    """
    charts = "".join(
        f"<figure><figcaption>{html.escape(caption)}</figcaption>"
        f"{figure_div(figure, f'tfviz-chart-{i}')}</figure>"
        for i, (caption, figure) in enumerate(figures)
    )
    return (
        f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f'<script type="text/javascript">{plotly_js(plotly_bundle)}</script></head>'
        f"<body><h1>{html.escape(title)}</h1>{facts_list(facts)}{charts}</body></html>"
    )
