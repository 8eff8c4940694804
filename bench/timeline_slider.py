"""Training timeline slider in a real Chromium: a slider move -> every chart of the step painted.

What a student feels when scrubbing through training. The script trains a bundled-size model
(the largest bundled model's task and sizes) for --steps steps with its timeline (about 24 kept
steps), saves both into a fresh server's user models folder, opens the app on that model, goes to
Train -> "Training timeline" and moves the slider one kept step at a time with the arrow keys:
first from the last step down to step 0 (each step replayed for the first time: a model built
from the snapshot, its trace and head importance computed), then back up (each step now cached).

A move is timed in the page, with performance.now(), from the arrow keydown to: the app idle
again, every plotly chart on the page redrawn after the keydown and painted (two animation frames
later), and nothing redrawn for QUIET_MS. Chart redraws are observed by bench/pages.py's page
harness; the server and the percentile are bench/harness.py's.

Then the floor: the same moves on bench/floor_app.py's timeline page, a slider and the same two
charts with nothing else (data of the same shapes), so that what Streamlit and plotly.js take on
the machine at hand is told apart from what the app adds.

Target (2 CPU cores): p95 under 300 ms, first visits and revisits alike. Met / not met is printed;
the exit status is 0 either way unless nothing could be measured.

Usage: python -m bench.timeline_slider [--steps 480] [--rounds 1] [--json out.json] [--no-floor]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.harness import (
    CHROMIUM,
    MODELS,
    TARGET_P95_MS,
    VIEWPORT,
    Server,
    largest_bundled,
    launch_chromium,
    median,
    percentile,
    verdict,
)
from bench.pages import EDIT_TIMEOUT_MS, HARNESS_JS, QUIET_MS, floor_page, open_page, wait_quiet

NAME = "grown"  # the trained model's name in the picker: "grown (yours)"

# Resolves with the milliseconds from the keydown (tf.t0) to the last chart painted, once the app
# is idle, every chart has been redrawn after the keydown and painted, and QUIET_MS have passed.
WAIT_MOVE_JS = """
([quietMs, timeoutMs]) => new Promise((resolve, reject) => {
  const tf = window.__tfviz, began = performance.now();
  const check = () => {
    tf.hook();
    const t0 = tf.t0;
    const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
    const app = document.querySelector('[data-testid="stApp"]');
    const idle = app && app.getAttribute('data-test-script-state') === 'notRunning';
    const drawn = plots.length > 0 && plots.every((gd) => (gd.__tfLast || -1) > t0
        && (gd.__tfPainted || -1) > gd.__tfLast);
    const now = performance.now();
    if (idle && drawn) {
      const end = Math.max(...plots.map((gd) => gd.__tfPainted));
      if (now - Math.max(...plots.map((gd) => gd.__tfLast)) >= quietMs) {
        resolve({total: end - t0, plots: plots.length});
        return;
      }
    }
    if (now - began > timeoutMs) {
      reject(new Error(`move not drawn in ${timeoutMs} ms (idle ${idle}, drawn ${drawn})`));
      return;
    }
    setTimeout(check, 5);
  };
  check();
})
"""


def train_with_timeline(folder: Path, steps: int) -> tuple[str, int]:
    """A model of the largest bundled model's task and sizes, trained with its timeline and saved
    as folder/NAME.safetensors; returns (task, kept steps)."""
    import torch

    from tfviz import get_task, load_checkpoint
    from tfviz.training.checkpoint import save_checkpoint
    from tfviz.training.evaluate import evaluate
    from tfviz.training.timeline import MAX_SNAPSHOTS, Timeline, save_timeline, timeline_path
    from tfviz.training.train import train

    torch.set_num_threads(1)
    bundled, meta = load_checkpoint(MODELS / f"{largest_bundled()}.safetensors")
    task = get_task(meta.task)
    timeline = Timeline(every=max(1, steps // MAX_SNAPSHOTS))  # as the app's training jobs keep
    model, history = train(
        task, bundled.config, steps=steps, lr=3e-3, device="cpu", timeline=timeline
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.safetensors"
    save_checkpoint(path, model, task.name, history, evaluate(model, task, n=200))
    save_timeline(timeline_path(path), timeline)
    return task.name, len(timeline.steps)


def open_timeline(page) -> None:
    """Pick the trained model, open Train -> Training timeline, wait for its charts."""
    picker = page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Model")
    picker.click()
    page.get_by_role("option", name=f"{NAME} (yours)", exact=True).click()
    wait_quiet(page)
    page.get_by_role("tab", name="Train").click()
    wait_quiet(page)
    page.get_by_role("radio", name="Training timeline").click()
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2",
        timeout=EDIT_TIMEOUT_MS,
    )
    wait_quiet(page)


def move(page, key: str) -> dict:
    """Press key on the slider's thumb and time it until every chart is painted."""
    thumb = page.get_by_role("slider")
    thumb.focus()
    page.evaluate("() => { window.__tfviz.t0 = performance.now(); }")
    thumb.press(key)
    return page.evaluate(WAIT_MOVE_JS, [QUIET_MS, EDIT_TIMEOUT_MS])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=480, help="training steps of the model")
    p.add_argument("--rounds", type=int, default=1, help="down-and-up sweeps (first is uncached)")
    p.add_argument("--json", type=Path, help="also write every figure here")
    p.add_argument("--no-floor", action="store_true", help="skip the bare page (floor_app.py)")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    first, again, floor = [], [], []
    with tempfile.TemporaryDirectory(prefix="tfviz_timeline_") as tmp, sync_playwright() as pw:
        workdir = Path(tmp)
        server = Server(workdir)
        try:
            began = time.perf_counter()
            task, kept = train_with_timeline(workdir / f"user_models_{server.port}", args.steps)
            print(
                f"trained {NAME} ({task}, {args.steps} steps, {kept} kept) in "
                f"{time.perf_counter() - began:.1f} s; chromium {CHROMIUM}",
                flush=True,
            )
            server.wait_healthy()
            browser = launch_chromium(pw.chromium)
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(HARNESS_JS)
            page = open_page(context, server.url)
            open_timeline(page)
            for sweep in range(args.rounds):
                down = [move(page, "ArrowLeft")["total"] for _ in range(kept - 1)]
                (first if sweep == 0 else again).extend(down)
                again.extend(move(page, "ArrowRight")["total"] for _ in range(kept - 1))
            context.close()
            server.stop()
            if not args.no_floor:  # the same moves on a page with only the two charts
                with floor_page(browser, workdir, "max_position", "timeline", 2) as bare:
                    for _ in range(args.rounds):
                        floor.extend(move(bare, "ArrowLeft")["total"] for _ in range(kept - 1))
                        floor.extend(move(bare, "ArrowRight")["total"] for _ in range(kept - 1))
            browser.close()
        finally:
            server.stop()
    if not first:
        print("nothing measured")
        return 1
    print(f"\nslider move -> charts painted (ms), {kept} kept steps")
    for name, values in (("first visit (replayed)", first), ("revisit (cached)", again)):
        print(
            f"  {name:<24} n={len(values):3d}  median {median(values):5.0f}  "
            f"p95 {percentile(values, 95):5.0f}  max {max(values, default=float('nan')):5.0f}"
        )
    every = first + again
    p95 = percentile(every, 95)
    if floor:
        print(
            f"  {'floor (bare page)':<24} n={len(floor):3d}  median {median(floor):5.0f}  "
            f"p95 {percentile(floor, 95):5.0f}  max {max(floor):5.0f}"
        )
        print(
            f"  app / floor: median {median(every) / median(floor):.2f}, "
            f"p95 {p95 / percentile(floor, 95):.2f} (floor: the same moves on bench/floor_app.py,"
            " a page\n  with only the two charts, made-up data of the same shapes)"
        )
    print(
        f"  all moves p95 {p95:.0f} ms: target p95 < {TARGET_P95_MS:.0f} ms "
        f"{verdict(p95 < TARGET_P95_MS)}"
    )
    if args.json:
        every_figure = {"first": first, "again": again, "floor": floor}
        args.json.write_text(json.dumps(every_figure, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
