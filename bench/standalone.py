"""How fast the exported web page (tfviz.plots.standalone) opens, against bertviz's head_view page.

In one run, with headless Chromium opening each page from file:// (no server), interleaved:

- tfviz's Attention page for the bundled reverse model (the grid of every layer and head),
- tfviz's Attention page for MiniLM at ~32 word-pieces (one layer's heads in columns, as the
  view shows a many-headed model), as the app writes it: drawn by tfviz's standalone.js,
- the same MiniLM page drawn by plotly.js inlined (the installed package's full bundle: what
  the app wrote before standalone.js, and still writes for a figure standalone.js does not draw),
- the same with plotly.js's cartesian partial bundle (plotly.js-cartesian-dist-min
  of the installed plotly.js version, from the npm registry; heatmaps and bars are all these
  pages draw) in place of the full bundle: what a smaller plotly.js would buy,
- bertviz's head_view page for the same MiniLM attention (all layers; it shows layer 0 with
  every head), computed by tfviz's own trace so that both pages show the same numbers.

The time measured is from navigation start to every head visible: for tfviz, every chart is
drawn (a standalone.js chart marked data-drawn, or a plotly graph div holding its svg); for
bertviz, its svg holds every head's attention lines (H * T * T of them). Each is read in the
page (performance.now(), whose origin is the navigation) at the first animation frame after the
condition holds. A fresh browser context per
open, N opens per page (default 10); median and p95 printed, and the ratio of the MiniLM medians
tfviz / bertviz against the target <= 1.5x. Exits 0 either way.

bertviz's page loads require.js, d3 and jQuery from CDNs. Nothing is fetched from a CDN here:
the same libraries are taken from the npm registry once (`npm pack`, into CACHE) and the page is
rewritten to load them from files beside it (d3 5.7.0, which head_view.js asks for; require.js
2.3.6, which head_view.py asks for, unminified as npm ships it; jQuery 2.1.0, the oldest 2.x on
npm, for the 2.0.0 on cdnjs). Every request outside file:// is aborted and counted.

Usage: python bench/standalone.py [--n 10]
Needs bertviz (requirements-dev.txt: pip install bertviz==1.4.1) and npm for the first run;
without bertviz, the tfviz pages are measured and "bertviz not installed" is said.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import launch_chromium, median, percentile  # noqa: E402
from bench.pages import CACHE, bertviz_file, open_file_page  # noqa: E402
from tfviz import get_task, load_checkpoint  # noqa: E402
from tfviz.core.trace import run_trace  # noqa: E402
from tfviz.hf import pretrained  # noqa: E402
from tfviz.plots import standalone  # noqa: E402
from tfviz.ui.views import attention  # noqa: E402

# ~32 word-pieces with [CLS] and [SEP].
SENTENCE = (
    "The students opened the exported page from a USB stick and compared every attention "
    "head of the small model with the same heads in the other viewer, without any network."
)
TOY_SEQUENCE = "abcdef"

# Every chart drawn: a plotly graph div holding its svg, or a standalone.js chart marked drawn.
# Drawn: every plotly chart has its svg and every canvas chart says it is drawn, and there are at
# least as many as the page's figures (standalone.js cuts a grid figure into a canvas per head).
TFVIZ_DONE = (
    "const g = [...document.querySelectorAll('.js-plotly-plot')];"
    " const c = [...document.querySelectorAll('.tfviz-chart')];"
    " return g.length + c.length >= %d && c.every(d => d.hasAttribute('data-drawn'))"
    " && g.every(d => d.querySelector('.main-svg'));"
)


def plotly_version() -> str:
    """The version of the plotly.js the installed plotly package inlines."""
    import re

    import plotly.offline

    return re.search(r"plotly\.js v([0-9.]+)", plotly.offline.get_plotlyjs()[:2000]).group(1)


def cartesian_bundle() -> str | None:
    """plotly.js's cartesian partial bundle, of the installed version, from the npm registry
    (once, into CACHE); None if npm fails."""
    version = plotly_version()
    path = CACHE / f"plotly-cartesian-{version}.min.js"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        package = f"plotly.js-cartesian-dist-min@{version}"
        with tempfile.TemporaryDirectory() as tmp:
            run = subprocess.run(["npm", "pack", package, "--silent"], cwd=tmp, capture_output=True)
            if run.returncode != 0:
                print(f"npm pack {package} failed: the cartesian bundle is not measured")
                return None
            (tarball,) = Path(tmp).glob("*.tgz")
            with tarfile.open(tarball) as tar:
                path.write_bytes(tar.extractfile("package/plotly-cartesian.min.js").read())
    return path.read_text(encoding="utf-8")


def tfviz_pages() -> tuple[dict[str, tuple[str, int]], object]:
    """name -> (html, number of charts) for tfviz's pages; and MiniLM's trace."""
    model, meta = load_checkpoint(ROOT / "models" / "reverse.safetensors")
    toy = run_trace(model, get_task(meta.task), TOY_SEQUENCE)
    toy_figures = attention.exported_figures(toy, None, None, caption="Attention")
    minilm, tokenizer = pretrained.load_minilm("cpu")
    sentence = run_trace(minilm, pretrained.SentenceTask(tokenizer), SENTENCE)
    minilm_figures = attention.exported_figures(sentence, 0, None, caption="L0")
    facts = {"Model": pretrained.NAME, "Sequence": SENTENCE}
    assert not any(standalone.unsupported(f) for _, f in toy_figures + minilm_figures)
    pages = {
        "tfviz reverse": (
            standalone.page("reverse", toy_figures, {"Sequence": TOY_SEQUENCE}),
            len(toy_figures),
        ),
        "tfviz MiniLM": (standalone.page("MiniLM", minilm_figures, facts), len(minilm_figures)),
        "tfviz MiniLM plotly": (
            standalone.page("MiniLM", minilm_figures, facts, use_plotly=True),
            len(minilm_figures),
        ),
    }
    cartesian = cartesian_bundle()
    if cartesian is not None:
        pages["tfviz MiniLM cart"] = (
            standalone.page(
                "MiniLM", minilm_figures, facts, plotly_bundle=cartesian, use_plotly=True
            ),
            len(minilm_figures),
        )
    return pages, sentence


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="opens per page")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    tfviz, trace = tfviz_pages()
    folder = Path(tempfile.mkdtemp(prefix="tfviz_standalone_"))
    pages: dict[str, tuple[Path, str]] = {}
    for name, (html_text, n_charts) in tfviz.items():
        path = folder / (name.replace(" ", "_") + ".html")
        path.write_text(html_text, encoding="utf-8")
        pages[name] = (path, TFVIZ_DONE % n_charts)
    bertviz = bertviz_file(trace, folder)
    if bertviz is None:
        print(
            "bertviz (pip install bertviz==1.4.1) or its libraries from the npm registry are "
            "missing: tfviz's pages only"
        )
    else:
        pages["bertviz MiniLM"] = bertviz
    T = len(trace.labels)
    print(f"MiniLM at {T} word-pieces; {args.n} opens per page, interleaved, from file://")
    for name, (path, _) in pages.items():
        print(f"  {name}: {path.stat().st_size / 1e6:.2f} MB")

    times: dict[str, list[float]] = {name: [] for name in pages}
    outside: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw.chromium)
        for name, (path, done) in pages.items():  # one unmeasured open each: disk cache warm
            times[name].append(open_once(browser, path, done, outside))
            times[name].clear()
        for _ in range(args.n):
            order = list(pages)
            random.shuffle(order)
            for name in order:
                path, done = pages[name]
                times[name].append(open_once(browser, path, done, outside))
        browser.close()

    print(f"{'page':<20} {'median ms':>10} {'p95 ms':>8}")
    for name, values in times.items():
        print(f"{name:<20} {median(values):>10.0f} {percentile(values, 95):>8.0f}")
    if "bertviz MiniLM" in times:
        for name in ("tfviz MiniLM", "tfviz MiniLM plotly", "tfviz MiniLM cart"):
            if name not in times:
                continue
            ratio = median(times[name]) / median(times["bertviz MiniLM"])
            verdict = "met" if ratio <= 1.5 else "NOT met"
            print(f"ratio {name} / bertviz (medians): {ratio:.2f}x (target <= 1.5x: {verdict})")
    print(f"requests outside file:// (aborted): {len(outside)}")
    print(json.dumps({name: [round(v) for v in values] for name, values in times.items()}))


def open_once(browser, path: Path, done: str, outside: list[str]) -> float:
    """Milliseconds from navigation start to done() in a fresh context, the network cut."""
    return open_file_page(browser, path.as_uri(), done, outside)


if __name__ == "__main__":
    main()
