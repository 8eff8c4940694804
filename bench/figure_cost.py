"""What tfviz's attention figures cost the browser, against a plain heatmap of the same cells.

A keystroke redraws the Attention view's charts; how long plotly.js takes to draw one is set by
what the figure carries (category axes, tick labels, block titles, hover templates, the colour
axis), not only by how many cells it has. This bench isolates that cost from Streamlit and the
server: one page in headless Chromium (Debian's /usr/bin/chromium) loads the installed plotly
package's own plotly.js from a local file, and times Plotly.react of each figure to the
`plotly_afterplot` event, again and again, with the values
changed slightly each time (every draw recomputes the colours, as a new sequence does). A draw
is timed to `plotly_afterplot` (plotly.js's work; the paint that follows is the same compositing
for both), then two animation frames pass before the next one.

Compared in one run, alternating: tfviz's figure as the view draws it (tfviz.plots, in English;
another language changes only its words) and the floor: one go.Heatmap of the same z array (the
same cells, gaps included) with plotly's defaults, at the same height. tfviz's figure carries
its block titles as one text trace (tfviz.plots.mosaic._block_titles), as the view draws it.
Configurations: the toy model `reverse` (T = 16, 2 layers x 4 heads and their mean:
plots.attention_grid) and all-MiniLM-L6-v2 at 32 word-pieces (one layer's 12 heads and their
mean as one column of blocks, plots.attention_column, which the app draws a chart per block).
Prints median and p95 draw times and the ratio of medians; target <= 1.2 (issue 18). Exit 0.
--before also times, in the same rounds, the same figure with its block titles as one
annotation each (as tfviz drew them until issue 18: annotations_of), for a before/after read
off one run.

--rounds: how many interleaved rounds the draws are split into (each starts with --warmup
draws that are not counted); on a loaded machine more, shorter rounds spread its noise more
evenly over the figures compared.

Usage: python -m bench.figure_cost [--draws 40] [--warmup 5] [--rounds 4] [--before]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline
import torch

from bench.harness import CHROMIUM, percentile
from tfviz import plots
from tfviz.core.tasks import get_task
from tfviz.core.trace import run_trace
from tfviz.hf import pretrained as P
from tfviz.training.checkpoint import load_checkpoint
from tfviz.ui import heads

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.2
SENTENCE = (
    "Attention lets every word look at every other word, and the output projection mixes "
    "what the heads found before it goes back into the residual stream of the model."
)

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<script src="plotly.js"></script></head><body style="width:1200px">
<div id="chart"></div>
<script>
const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
// Draw a figure n times, its z scaled a little each time, and return each draw's milliseconds.
window.timeDraws = async (figure, n) => {
  const div = document.getElementById("chart");
  Plotly.purge(div);
  const z0 = figure.data.map(t => t.z);
  const times = [];
  for (let i = 0; i < n; i++) {
    const f = i % 2 ? 0.98 : 1.0;
    const data = figure.data.map((t, k) =>
      z0[k] ? {...t, z: z0[k].map(row => row.map(v => v === null ? null : v * f))} : t);
    const done = new Promise(r => div.once ? div.once("plotly_afterplot", r) : r());
    const t0 = performance.now();
    await Plotly.react(div, data, figure.layout, figure.config || {});
    await done;
    times.push(performance.now() - t0);
    await frames();  // painted before the next draw starts
  }
  return times;
};
</script></body></html>"""


def toy_figures() -> list[go.Figure]:
    model, meta = load_checkpoint(ROOT / "models" / "reverse.safetensors")
    model.eval()
    task = get_task(meta.task)
    tr = run_trace(model, task, max(task.examples, key=len))
    return [plots.attention_grid(tr.attn, tr.labels, list(range(tr.n_layers)), with_mean=True)]


def minilm_figures() -> list[go.Figure]:
    model, tok = P.load_minilm("cpu")
    pieces = tok.encode(SENTENCE)
    ids = torch.tensor([[*pieces.ids[:31], tok.sep_id]])
    labels = P.unique_labels(tuple([*pieces.pieces[:31], "[SEP]"]))
    with torch.no_grad():
        out = model(ids, trace=True)
    attn = out.trace.layers[0].attn[0].numpy()  # (H, T, T)
    return heads.attention_columns(attn, labels, 0)  # as the Attention view draws layer 0


def floor_of(figure: go.Figure) -> go.Figure:
    """One plain heatmap of the same cells, at the same height: the cheapest honest drawing."""
    (trace,) = [t for t in figure.data if t.type == "heatmap"]
    return go.Figure(go.Heatmap(z=trace.z), layout=dict(height=figure.layout.height))


def as_json(figure: go.Figure) -> dict:
    """The figure as plotly.js takes it, each heatmap's z as nested lists (NaN: null), so the
    page can scale it; both figures of a comparison get the same encoding."""
    out = json.loads(pio.to_json(figure))
    for trace, data in zip(figure.data, out["data"], strict=True):
        if trace.type == "heatmap":
            z = np.asarray(trace.z, dtype=np.float64)
            data["z"] = [[None if np.isnan(v) else float(v) for v in row] for row in z]
    return out


def annotations_of(figure: dict) -> dict:
    """A figure (as_json's) with its block titles as one annotation each instead of one text
    trace: tfviz's figure before issue 18, at the same places (the text trace's hidden axes
    count cells as the heatmap's category axes do, which annotations take as numbers)."""
    out = json.loads(json.dumps(figure))
    (titles,) = [t for t in out["data"] if t.get("meta") == plots.TITLES_META]
    out["data"].remove(titles)
    for axis in ("xaxis2", "yaxis2"):
        out["layout"].pop(axis)
    out["layout"]["annotations"] = [
        dict(
            text=text,
            x=x,
            y=y,
            xref="x",
            yref="y",
            yanchor="bottom",
            showarrow=False,
            font=titles["textfont"],
        )
        for text, x, y in zip(titles["text"], titles["x"], titles["y"], strict=True)
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--draws", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--before", action="store_true", help="also time titles as annotations")
    args = p.parse_args(argv)
    configs = {"reverse T=16": toy_figures(), "MiniLM T=32": minilm_figures()}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        Path(tmp, "plotly.js").write_text(plotly.offline.get_plotlyjs())
        Path(tmp, "page.html").write_text(PAGE)
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(Path(tmp, "page.html").as_uri())
        worst = 0.0
        for name, figures in configs.items():
            ours = [as_json(f) for f in figures]
            floors = [as_json(floor_of(f)) for f in figures]
            kinds = {"tfviz": ours, "floor": floors}
            if args.before:
                kinds["annotations"] = [annotations_of(f) for f in ours]
            got: dict[str, list[float]] = {which: [] for which in kinds}
            per_round = max(1, args.draws // args.rounds)
            for _ in range(args.rounds):  # interleaved: the machine's noise falls on all alike
                for which, figs in kinds.items():
                    for fig in figs:
                        times = page.evaluate(
                            "([f, n]) => timeDraws(f, n)", [fig, args.warmup + per_round]
                        )
                        got[which] += times[args.warmup :]
            med = {k: statistics.median(v) for k, v in got.items()}
            p95 = {k: percentile(v, 95) for k, v in got.items()}
            ratio = med["tfviz"] / med["floor"]
            worst = max(worst, ratio)
            cells = sum(np.asarray(f["data"][0]["z"], dtype=object).size for f in floors)
            print(
                f"{name}: {len(figures)} chart(s), {cells} cells; draw median (p95): "
                f"tfviz {med['tfviz']:.1f} ms ({p95['tfviz']:.1f}), plain heatmap "
                f"{med['floor']:.1f} ms ({p95['floor']:.1f}); ratio {ratio:.2f} "
                f"({'met' if ratio <= TARGET else 'NOT met'}, target <= {TARGET})"
            )
            if args.before:
                print(
                    f"  before (titles as annotations): {med['annotations']:.1f} ms "
                    f"({p95['annotations']:.1f}); ratio {med['annotations'] / med['floor']:.2f}"
                )
        browser.close()
    print(f"worst ratio {worst:.2f} (target <= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
