"""The timing harness the latency benches put into their pages, and the pages they open with it.

HARNESS_JS is installed in a browser context before any page script runs (add_init_script). In
page time (performance.now()) it records the Enter keydown (t0), the app's script state changes
(stApp's data-test-script-state), the websocket's messages (time, bytes) and requests sent, the
main thread's long tasks, and for every chart (a plotly graph div, or a canvas chart of
tfviz.ui.widgets.canvas_charts, which says so itself) its redraws and the paint two animation
frames after its last one. Its waitEdit(expected, quietMs, timeoutMs, codeKey) resolves when the
edit started by the last Enter is done:

  start  the Enter keydown (a capture listener on the document, before Streamlit sees it);
  end    the script state went running -> notRunning after it (a fast run may never show
         "running": then the two next conditions stand for it), the code block keyed codeKey
         shows the new input, every chart on the page has re-rendered after the keydown
         (plotly_afterplot / plotly_react on each plotly graph div, tfviz:drawn on each canvas
         chart), nothing more was drawn for quietMs, and two animation frames have passed after
         the last redraw (it is painted).

SWITCH_JS adds a click's pointerdown as a start and waitDrawn(title, ...), done when the chart
of that title has been redrawn (bench/mode_switch.py, bench/timeline_slider.py). floor_page
serves and opens bench/floor_app.py's bare pages. WATCH times a page opened from file:// with no
server (bench/standalone.py's exported pages, bertviz's head_view page: bertviz_file).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path

from bench.harness import FLOOR_APP, VIEWPORT, Server, cut_network

QUIET_MS = 250  # no redraw for this long after the last one: the edit is done
EDIT_TIMEOUT_MS = 20_000

# Installed before any page script runs (add_init_script): it records, in page time,
#  - the Enter keydown (t0), the script state changes of stApp, websocket messages (time, bytes);
#  - for every plotly graph div, the time of its last redraw and of the paint after it.
HARNESS_JS = """
(() => {
  const tf = window.__tfviz = {
    t0: -1, states: [], ws: [], sent: [], draws: [], long: [], hooked: 0};
  // Main-thread tasks over 50 ms (what makes a page feel stuck), where the browser reports them.
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) tf.long.push([e.startTime, e.duration]);
      if (tf.long.length > 1000) tf.long.splice(0, 500);
    }).observe({type: 'longtask', buffered: false});
  } catch (e) { /* no longtask support: the column stays empty */ }
  const OrigWS = window.WebSocket;
  window.WebSocket = class extends OrigWS {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        const d = e.data;
        tf.ws.push([performance.now(), d.byteLength ?? d.size ?? d.length ?? 0]);
        if (tf.ws.length > 5000) tf.ws.splice(0, 2500);
      });
    }
    send(data) {  // when the browser hands the rerun request to the socket
      tf.sent.push(performance.now());
      if (tf.sent.length > 1000) tf.sent.splice(0, 500);
      return super.send(data);
    }
  };
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') tf.t0 = performance.now();
  }, true);
  tf.changed = performance.now();  // the last DOM change anywhere
  new MutationObserver((records) => {
    tf.changed = performance.now();
    for (const r of records) {
      if (r.type !== 'attributes' || r.attributeName !== 'data-test-script-state') continue;
      tf.states.push([performance.now(), r.target.getAttribute('data-test-script-state')]);
    }
    if (tf.states.length > 1000) tf.states.splice(0, 500);
  }).observe(document, {attributes: true, childList: true, characterData: true, subtree: true});
  const painted = (gd) => requestAnimationFrame(() => requestAnimationFrame(() => {
    gd.__tfPainted = performance.now();
  }));
  tf.hook = () => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (gd.__tfHooked || typeof gd.on !== 'function') continue;
      gd.__tfHooked = performance.now();
      tf.hooked++;
      if (gd.querySelector('.main-svg')) {  // drawn before we could listen: count it as drawn now
        gd.__tfLast = gd.__tfHooked;
        painted(gd);
      }
      gd.on('plotly_beforeplot', () => { gd.__tfBegin = performance.now(); });
      gd.on('plotly_afterplot', () => {
        const now = performance.now();
        if (gd.__tfBegin) tf.draws.push([gd.__tfBegin, now]);
        gd.__tfBegin = 0;
      });
      for (const ev of ['plotly_afterplot', 'plotly_react', 'plotly_redraw']) {
        gd.on(ev, () => { gd.__tfLast = performance.now(); painted(gd); });
      }
    }
  };
  // A chart drawn by tfviz's standalone.js on a canvas (widgets.canvas_charts) says so itself.
  document.addEventListener('tfviz:drawn', (e) => {
    const div = e.target, now = performance.now();
    tf.draws.push([e.detail.began, now]);
    div.__tfLast = now;
    painted(div);
  }, true);
  const start = () => {
    new MutationObserver(tf.hook).observe(document.body, {childList: true, subtree: true});
    tf.hook();
  };
  if (document.body) start(); else document.addEventListener('DOMContentLoaded', start);

  // Resolves when the edit started by the last Enter is fully drawn (see the module docstring).
  // codeKey: the container whose code block shows the typed input: "prediction" (a toy
  // model's input row), "pieces" (a sentence model's word-pieces, all of the block) or "next"
  // (a decoder's next-token table, in the prediction container: its token column).
  // changedOnly: wait only for the charts the edit redraws (a view whose other charts show the
  // weights alone, which Streamlit leaves as they are); the edit then ends at the last of them
  // painted, the run finished, or the input shown.
  tf.waitEdit = (expected, quietMs, timeoutMs, codeKey, changedOnly = false) =>
      new Promise((resolve, reject) => {
    const began = performance.now();
    let shownAt = null;
    const app = () => document.querySelector('[data-testid="stApp"]');
    const inputShown = () => {
      const box = codeKey === 'next' ? 'prediction' : codeKey;
      const code = document.querySelector(`.st-key-${box} [data-testid="stCode"]`);
      if (!code) return false;
      const lines = code.textContent.split('\\n');
      const shown = codeKey === 'prediction' ? lines[0].replace(/^input\\s+/, '')
          : codeKey === 'next'
          ? lines.slice(1).map((l) => l.trim().split(/\\s{2,}/)[1] || '').join('')
          : code.textContent;
      return shown.replace(/\\s+/g, '') === expected;
    };
    const check = () => {
      tf.hook();
      const t0 = tf.t0;
      // A fast run may never show "running" (React batches it away): then the new input on
      // the page and every chart redrawn after the keydown say that this run's output is in.
      const running = tf.states.find(([t, v]) => t >= t0 && v === 'running');
      const finished = running && tf.states.find(([t, v]) => t >= running[0] && v === 'notRunning');
      const all = Array.from(document.querySelectorAll('.js-plotly-plot, .tfviz-chart'));
      const plots = changedOnly ? all.filter((gd) => (gd.__tfLast || -1) > t0) : all;
      const drawn = (changedOnly || plots.length > 0) && plots.every((gd) =>
          (gd.__tfLast || -1) > t0 && (gd.__tfPainted || -1) > gd.__tfLast);
      const idle = app() && app().getAttribute('data-test-script-state') === 'notRunning';
      const now = performance.now();
      const shown = t0 >= 0 && inputShown();
      if (shown && shownAt === null) shownAt = now;
      if (t0 >= 0 && (finished || !running) && idle && drawn && shown) {
        const lastDraw = Math.max(0, ...plots.map((gd) => gd.__tfLast));
        const finishedAt = finished ? finished[0] : null;
        if (now - Math.max(lastDraw, finishedAt ?? 0, changedOnly ? shownAt : 0) >= quietMs) {
          const end = Math.max(finishedAt ?? 0, changedOnly ? shownAt : 0,
              ...plots.map((gd) => gd.__tfPainted));
          const msgs = tf.ws.filter(([t]) => t >= t0 && t <= end);
          const sent = tf.sent.find((t) => t >= t0);
          const reply = sent === undefined ? undefined : tf.ws.find(([t]) => t >= sent);
          const draws = tf.draws.filter(([b]) => b >= t0 && b <= end);
          const long = tf.long.filter(([b]) => b >= t0 && b <= end);
          tf.draws = tf.draws.filter(([b]) => b > end);
          tf.long = tf.long.filter(([b]) => b > end);
          resolve({
            total: end - t0,
            to_running: running ? running[0] - t0 : null,
            to_sent: sent === undefined ? null : sent - t0,
            to_reply: reply === undefined ? null : reply[0] - t0,
            running: finished ? finished[0] - running[0] : null,
            after_run: finished ? end - finished[0] : null,
            ws_bytes: msgs.reduce((s, [, b]) => s + b, 0),
            ws_last: msgs.length ? msgs[msgs.length - 1][0] - t0 : null,
            plots: all.length,
            draws: draws.length,
            draw_ms: draws.reduce((a, [b, e]) => a + e - b, 0),
            long_ms: long.reduce((a, [, d]) => a + d, 0),
          });
          return;
        }
      }
      if (now - began > timeoutMs) {
        reject(new Error(`edit not finished after ${timeoutMs} ms: ` + JSON.stringify({
          t0, running: !!running, finished: !!finished, idle, drawn, input: inputShown(),
          plots: plots.map((gd) => [gd.__tfLast, gd.__tfPainted]),
        })));
        return;
      }
      setTimeout(check, 5);
    };
    check();
  });
})();
"""

# True (as a page timestamp in epoch ms) once the first run has drawn the prediction (a sentence
# model: its word-pieces) and every chart it sent: the very first load may read notRunning before
# its run started, hence the code block.
FIRST_RENDER_JS = """
() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const code = '.st-key-prediction [data-testid="stCode"], .st-key-pieces [data-testid="stCode"]';
  if (!document.querySelector(code)) return false;
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]').length;
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  const canvases = Array.from(document.querySelectorAll('.tfviz-chart'));
  if (plots.length + canvases.length === 0 || plots.length < charts) return false;
  const drawn = plots.every((gd) => gd.querySelector('.main-svg')
      && (gd.querySelectorAll('g.hm image').length > 0 || gd.querySelector('g.trace')))
      && canvases.every((div) => div.hasAttribute('data-drawn'));
  return drawn ? performance.timeOrigin + performance.now() : false;
}
"""

# Added after HARNESS_JS: a click's pointerdown starts the clock too, and waitDrawn resolves once
# the run it started is drawn (bench/mode_switch.py's docstring says when).
SWITCH_JS = """
(() => {
  const tf = window.__tfviz;
  document.addEventListener('pointerdown', () => { tf.t0 = performance.now(); }, true);
  tf.waitDrawn = (title, quietMs, timeoutMs) => new Promise((resolve, reject) => {
    const began = performance.now();
    const check = () => {
      tf.hook();
      const t0 = tf.t0;
      const running = tf.states.find(([t, v]) => t >= t0 && v === 'running');
      const finished = running && tf.states.find(([t, v]) => t >= running[0] && v === 'notRunning');
      const app = document.querySelector('[data-testid="stApp"]');
      const idle = app && app.getAttribute('data-test-script-state') === 'notRunning';
      const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
      const named = (gd) => (gd.querySelector('.gtitle')?.textContent || '').includes(title);
      const redrawn = plots.filter((gd) => (gd.__tfLast || -1) > t0);
      const target = redrawn.find(named);
      const painted = redrawn.every((gd) => (gd.__tfPainted || -1) > gd.__tfLast);
      const now = performance.now();
      if (t0 >= 0 && (finished || !running) && idle && target && painted) {
        const lastDraw = Math.max(...redrawn.map((gd) => gd.__tfLast));
        const finishedAt = finished ? finished[0] : 0;
        if (now - Math.max(lastDraw, finishedAt) >= quietMs) {
          const end = Math.max(finishedAt, ...redrawn.map((gd) => gd.__tfPainted));
          const draws = tf.draws.filter(([b]) => b >= t0 && b <= end);
          tf.draws = tf.draws.filter(([b]) => b > end);
          resolve({total: end - t0, redrawn: redrawn.length, plots: plots.length,
                   run: finished ? finished[0] - running[0] : null,
                   to_running: running ? running[0] - t0 : null,
                   after_run: finished ? end - finished[0] : null,
                   draws: draws.map(([b, e]) => [b - t0, e - b])});
          return;
        }
      }
      if (now - began > timeoutMs) {
        reject(new Error(`not drawn after ${timeoutMs} ms: ` + JSON.stringify({
          t0, running: !!running, finished: !!finished, idle, target: !!target, painted,
          titles: plots.map((gd) => gd.querySelector('.gtitle')?.textContent),
        })));
        return;
      }
      setTimeout(check, 5);
    };
    check();
  });
})();
"""

# True once bench/floor_app.py's page has drawn its n plotly charts and the app is idle.
FLOOR_DRAWN_JS = """
(n) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  return plots.length === n && plots.every((gd) => gd.querySelector('.main-svg'));
}
"""

# Installed before any of the page's scripts: at the first animation frame after `done()` holds,
# window.__done = milliseconds since navigation started.
WATCH = """
(() => {
  const done = () => { %s };
  let seen = false;
  const check = () => {
    if (seen || !done()) return;
    seen = true;
    requestAnimationFrame(() => { window.__done = performance.now(); });
  };
  new MutationObserver(check).observe(document, {childList: true, subtree: true});
  document.addEventListener('DOMContentLoaded', check);
})();
"""


# ---- the app's pages ------------------------------------------------------------------------


def wait_quiet(page, quiet_ms: int = QUIET_MS, timeout_ms: int = EDIT_TIMEOUT_MS) -> None:
    """Wait until the app is idle and nothing on the page has changed for quiet_ms."""
    page.wait_for_function(
        """q => document.querySelector('[data-testid="stApp"]')
                  ?.getAttribute('data-test-script-state') === 'notRunning'
               && performance.now() - window.__tfviz.changed > q""",
        arg=quiet_ms,
        polling=50,
        timeout=timeout_ms,
    )


def harnessed_page(browser, url: str):
    """(a fresh browser context with the timing harness, its page on url, fully drawn)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(HARNESS_JS)
    return context, open_page(context, url)


def open_page(context, url: str):
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(FIRST_RENDER_JS, polling="raf", timeout=60_000)
    wait_quiet(page)
    return page


def pick_model(page, label: str, task_name: str) -> None:
    """Choose the model whose option is label in the sidebar's Model picker and wait for its run
    (the sidebar naming its task: "Task: task_name")."""
    picker = page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Model")
    if picker.input_value() == label:
        return
    picker.click()
    page.get_by_role("option", name=label, exact=True).click()
    page.wait_for_function(
        "name => document.querySelector('[data-testid=\"stSidebar\"]').innerText"
        ".includes('Task: ' + name)",
        arg=task_name,
        timeout=EDIT_TIMEOUT_MS,
    )
    wait_quiet(page)
    page.wait_for_function(FIRST_RENDER_JS, polling="raf", timeout=EDIT_TIMEOUT_MS)


@contextmanager
def floor_page(browser, workdir: Path, model: str, view: str, n_charts: int):
    """bench/floor_app.py's page for one view, served and drawn, in a fresh browser context."""
    # The server's environment is this process's.
    os.environ.update(TFVIZ_FLOOR_MODEL=model, TFVIZ_FLOOR_VIEW=view)
    server = Server(workdir, app=FLOOR_APP)
    try:
        server.wait_healthy()
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(HARNESS_JS)
        context.add_init_script(SWITCH_JS)
        page = context.new_page()
        page.goto(server.url)
        page.wait_for_function(FLOOR_DRAWN_JS, arg=n_charts, polling="raf", timeout=120_000)
        wait_quiet(page)
        yield page
        context.close()
    finally:
        server.stop()


# ---- pages opened from file:// --------------------------------------------------------------


def open_file_page(browser, url: str, done: str, outside: list[str] | None = None) -> float:
    """ms from navigation start to the first frame after done() holds (WATCH), in a fresh browser
    context with every request outside file:// aborted (and its URL noted in outside)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        cut_network(context, [] if outside is None else outside)
        context.add_init_script(WATCH % done)
        page = context.new_page()
        page.goto(url, wait_until="commit")
        page.wait_for_function("window.__done !== undefined", timeout=60_000)
        return page.evaluate("window.__done")
    finally:
        context.close()


# ---- bertviz's head_view page, its libraries from the npm registry ---------------------------

BERTVIZ_DONE = "return document.querySelectorAll('#attention line').length === %d;"

CACHE = Path.home() / ".cache" / "tfviz-bench" / "js"
# npm package, version, file inside its tarball, name bertviz's page asks require.js for.
LIBRARIES = [
    ("requirejs", "2.3.6", "package/require.js", "require.js"),
    ("d3", "5.7.0", "package/dist/d3.min.js", "d3.min.js"),
    ("jquery", "2.1.0", "package/dist/jquery.min.js", "jquery.min.js"),
]
REWRITES = {  # bertviz's CDN addresses -> the files beside the page
    "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js": "./require.js",
    "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min": "./d3.min",
    "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min": "./jquery.min",
}


def fetch_libraries() -> bool:
    """require.js, d3 and jQuery in CACHE, from the npm registry (once); False if npm fails."""
    CACHE.mkdir(parents=True, exist_ok=True)
    for package, version, member, name in LIBRARIES:
        if (CACHE / name).exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            run = subprocess.run(
                ["npm", "pack", f"{package}@{version}", "--silent"],
                cwd=tmp,
                capture_output=True,
                text=True,
            )
            if run.returncode != 0:
                print(f"npm pack {package}@{version} failed: {run.stderr.strip()[:300]}")
                return False
            (tarball,) = Path(tmp).glob("*.tgz")
            with tarfile.open(tarball) as tar:
                (CACHE / name).write_bytes(tar.extractfile(member).read())
    return True


def bertviz_page(trace) -> str | None:
    """bertviz's head_view page for trace's attention (all layers), loading its libraries from
    files beside it; None without bertviz."""
    try:
        import torch
        from bertviz import head_view
    except ImportError:
        return None
    layers = range(trace.attn.shape[0])
    attention_layers = tuple(torch.from_numpy(trace.attn[layer][None]) for layer in layers)
    html_text = head_view(attention_layers, list(trace.labels), html_action="return").data
    for url, local in REWRITES.items():
        assert url in html_text, f"bertviz's page no longer asks for {url}"
        html_text = html_text.replace(url, local)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{html_text}</body></html>'
    )


def bertviz_file(trace, folder: Path) -> tuple[Path, str] | None:
    """bertviz's head_view page for trace's attention written into folder with its libraries,
    and the condition that holds once every head is drawn; None without bertviz or npm."""
    html_text = bertviz_page(trace)
    if html_text is None or not fetch_libraries():
        return None
    for _, _, _, name in LIBRARIES:
        (folder / name).write_bytes((CACHE / name).read_bytes())
    path = folder / "bertviz_head_view.html"
    path.write_text(html_text, encoding="utf-8")
    H, T = trace.attn.shape[1], trace.attn.shape[2]
    return path, BERTVIZ_DONE % (H * T * T)
