"""Browser tests: the real app in a real Chromium, driven by Playwright.

One `streamlit run app.py` on a free loopback port and one Chromium serve every such module of a
test process; every test gets a fresh page (a new Streamlit session). What is
checked is what a student sees: the typed sequence's answer in the prediction block, heatmaps
drawn with real SVG and image content, the W_o switch changing the prediction and switching back
restoring it, a clear error for bad input, every tab opening without an exception element.
Full-page screenshots are kept in artifacts/ (git-ignored) for a human to look at.

Needs Debian's Chromium at /usr/bin/chromium, or its headless build (chromium-headless-shell), which
is used where installed (Playwright's own browser download is not used).
Without it, or when Playwright cannot launch it, the tests are skipped, except under CI=true,
where they fail: CI installs Chromium, so a skip there would hide a broken setup. Without app.py
they fail everywhere: a missing app is a defect, not a missing tool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# CHROMIUM_ARGS: the bench's flags (the background-networking ones matter: without them Chromium
# keeps dialling out, and on a closed network those refused connections slow it down).
from bench.harness import CHROMIUM_ARGS, free_port, healthy, streamlit_command
from tests.conftest import (  # noqa: F401  (re-exported: the other browser modules import them here)
    APP_IDLE,
    CHART_DRAWN,
    CODE,
    EXCEPTION,
    QUIET_MS,
    SERVERS,
    TIMEOUT_MS,
    WATCH_JS,
    WORKER,
    end_for_the_worker,
    for_the_worker,
    go_to,
    opened_app,
    quiet,
)

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # reported by the fixture: skip, or fail under CI
    sync_playwright = None
    PlaywrightError = Exception

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
ARTIFACTS = ROOT / "artifacts"
# Chromium's own headless build (Debian's chromium-headless-shell, what Playwright drives by
# default): the same engine without the browser's UI, 10-15% faster to draw a page here, which
# the browser tests' share of the suite's time feels. The full browser where it is not installed.
HEADLESS_SHELL = Path("/usr/lib/chromium/chromium-headless-shell")
CHROMIUM = HEADLESS_SHELL if HEADLESS_SHELL.exists() else Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
SERVER_START_S = 60

ALERT = '[data-testid="stAlert"]'
PLOT = ".js-plotly-plot"

# What each plotly chart on the page holds: SVG layers, heatmap images (data URLs) and traces.
# Every chart on the page, plotly's and the canvas charts' (tfviz.ui.widgets.canvas_charts), in
# one shape. For a canvas chart: traces and heatmaps from the figure it drew (once drawn), its
# heatmap "bytes" the inked pixels of a coarse sample (a blank canvas has none), its y tick
# labels the figure's (drawn as text on the canvas, not in the DOM).
PLOTS_JS = """
() => {
  const plotly = Array.from(document.querySelectorAll('.js-plotly-plot')).map((gd) => {
    const svg = gd.querySelector('.main-svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const images = Array.from(gd.querySelectorAll('g.hm image'));
    return {
      width: box.width,
      height: box.height,
      heatmaps: images.length,
      heatmap_bytes: Math.min(...images.map((im) => (im.getAttribute('href') || '').length), 1e9),
      traces: gd.querySelectorAll('g.trace, g.hm, g.heatmaplayer > g').length,
      yticks: Array.from(gd.querySelectorAll('.ytick text')).map((t) => t.textContent),
    };
  });
  const canvases = Array.from(document.querySelectorAll('.tfviz-chart')).map((div) => {
    const canvas = div.querySelector('canvas');
    const drawn = div.hasAttribute('data-drawn') && canvas;
    const box = drawn ? canvas.getBoundingClientRect() : {width: 0, height: 0};
    const data = drawn ? div.__figure.data : [];
    let inked = 0;
    if (drawn && canvas.width && canvas.height) {
      const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (let k = 0; k < pixels.length; k += 4 * 37) {
        if (pixels[k] < 250 || pixels[k + 1] < 250 || pixels[k + 2] < 250) inked++;
      }
    }
    const yaxis = drawn ? div.__figure.layout.yaxis || {} : {};
    return {
      width: box.width,
      height: box.height,
      heatmaps: data.filter((t) => t.type === 'heatmap').length,
      heatmap_bytes: inked,
      traces: data.length,
      yticks: (yaxis.ticktext || []).map(String),
    };
  });
  return plotly.concat(canvases);
}
"""

pytestmark = pytest.mark.browser


def unavailable(reason: str):
    """Skip: no browser here. Under CI=true, fail: CI installs Chromium, so it must be there."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the browser tests must run there)")
    pytest.skip(reason)


# ---- fixtures: one server, one browser, a fresh session per test -------------------------------


@pytest.fixture(scope="module", autouse=True)
def app_exists():
    """A missing app is a defect, not a missing tool: fail, before any skip for the browser."""
    if not APP.is_file():
        pytest.fail(f"{APP} does not exist: there is no app to open")


@pytest.fixture(scope="module")
def browser(request):
    """The test process's headless Chromium (for_the_worker), kept from one browser file to the
    next with its shared context's tab (tests.conftest.new_page): a new Chromium's first app page
    cost about three times a later one. Stopped before any other file's tests, which may call
    asyncio.run() (tests.conftest.BROWSER_FILES), and launched again where one is gone."""
    kept = WORKER.get("browser")
    if kept is not None and not kept.is_connected():
        end_for_the_worker("browser")
    return for_the_worker(request, "browser", launched)


def launched():
    """Playwright and Chromium, started; yields the browser, stops both after."""
    if sync_playwright is None:
        unavailable("the playwright package is not installed")
    if not CHROMIUM.exists():
        unavailable(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    pw = sync_playwright().start()
    try:
        try:
            chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        except PlaywrightError as e:
            unavailable(f"playwright cannot launch {CHROMIUM}: {' '.join(str(e).split())[:400]}")
        yield chromium
        chromium.close()
    finally:
        pw.stop()


# One plain app server per test process (an xdist worker; tests.conftest.for_the_worker), started
# by the first module that asks: each module used to start its own, whose first sessions paid the
# server's imports and model loads again. A module whose tests change what the server keeps for
# later sessions (a model saved to its user models folder) takes private_server instead; one that
# needs other settings starts its own with app_server.
@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """The test process's `streamlit run app.py` (for_the_worker) on a free loopback port, with a
    user models folder of its own that no test writes to."""
    return for_the_worker(request, "server", lambda: app_server(tmp_path_factory))


@pytest.fixture(scope="module")
def private_server(tmp_path_factory):
    """`streamlit run app.py` for one module, with a private user models folder: for tests that
    save models there."""
    yield from app_server(tmp_path_factory)


# `python -m streamlit`, able to write every thread's stack to its log on SIGUSR1
# (conftest.server_state): a stuck first page is then reported with what the server was doing.
DUMPABLE = (
    "import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, all_threads=True); "
    "from streamlit.web.cli import main; sys.argv[0] = 'streamlit'; sys.exit(main())"
)


def app_server(tmp_path_factory, environ: dict[str, str] | None = None):
    """The server fixture's body, with more environment for modules that need it: yields the
    address of a healthy server and stops it after."""
    tmp = tmp_path_factory.mktemp("browser_server")
    env = dict(os.environ, TFVIZ_USER_MODELS=str(tmp / "user_models"), **(environ or {}))
    log_path = tmp / "server.log"
    for attempt in range(3):
        # A free port may be taken between free_port and the server's bind (the other test
        # worker starts servers too): then the server exits, and a next port is tried.
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", DUMPABLE, *streamlit_command(APP, port)[3:]],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + SERVER_START_S
        while proc.poll() is None and not healthy(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        # Healthy only counts while this server runs: another's on a taken port answers too.
        if proc.poll() is None and healthy(url):
            break
        taken = "already in use" in log_path.read_text()
        stop(proc)
        if not taken or attempt == 2:
            pytest.fail(f"the server did not come up:\n{log_path.read_text()[-3000:]}")
    SERVERS[url] = (proc, log_path)
    try:
        yield url
    finally:
        del SERVERS[url]
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def page(browser, server):
    """A new session on the app's first page, fully rendered; collects uncaught page errors."""
    desktop = {"width": 1400, "height": 1000}
    # As it always was: no exception-element check on leaving, and no wait for quiet.
    with opened_app(browser, server, desktop, settle=False, no_exception=False) as page:
        yield page


# ---- helpers -------------------------------------------------------------------------------


def rerun(page: Page, action, outcome: str) -> None:
    """Do `action` (a click, a keystroke) and wait until the run it caused is drawn.

    outcome: a JS predicate that holds once the run's result is on the page; the wait ends when a
    run finished (or the outcome shows), the app is idle and the page has been quiet a moment, and
    the outcome holds then: a run counted may be an earlier one's end, and a page quiet for a
    moment may be one whose run has not started yet (a loaded machine), so the outcome, which
    only the new state shows, is what proves this run drawn.
    """
    before = page.evaluate("window.__tfvizRuns")
    action()
    page.wait_for_function(f"n => window.__tfvizRuns > n || ({outcome})()", arg=before)
    quiet(page)
    if not page.evaluate(f"({outcome})()"):
        page.wait_for_function(outcome)
        quiet(page)


def type_sequence(page: Page, text: str, valid: bool = True) -> None:
    box = page.get_by_role("textbox", name="Sequence")
    box.fill(text)
    if valid:  # the outcome: the prediction's input row shows the text
        outcome = f"""() => {{
            const code = document.querySelector('{CODE}');
            const first = code ? code.textContent.split('\\n')[0] : '';
            return first.replace(/^input\\s+/, '').replace(/\\s+/g, '') === {json.dumps(text)};
        }}"""
    else:  # the outcome: an error is up and the prediction is gone
        outcome = f"""() => document.querySelector('{ALERT}') !== null
                         && document.querySelector('{CODE}') === null"""
    rerun(page, lambda: box.press("Enter"), outcome)


def set_w_o(page: Page, label: str) -> None:
    # The radio's <input> is covered by its styled circle: click the label text instead.
    radio = page.locator('[data-testid="stSidebar"] [data-testid="stRadio"]').filter(has_text="W_o")
    switched = "true" if label != "learned" else "false"
    outcome = f"""() => {{
        const code = document.querySelector('{CODE}');
        return code !== null && code.textContent.includes('switched') === {switched};
    }}"""
    rerun(page, lambda: radio.get_by_text(label, exact=True).click(), outcome)


def open_tab(page: Page, label: str) -> None:
    """Click a tab; its panel is filled by the run the click starts (only the open tab runs)."""
    tab = page.get_by_role("tab", name=label, exact=True)
    if tab.get_attribute("aria-selected") == "true":
        return
    outcome = """() => {
        const panel = document.querySelector('[role="tabpanel"]:not([hidden])');
        return panel !== null && panel.querySelector('[data-testid="stElementContainer"]') !== null;
    }"""
    rerun(page, tab.click, outcome)
    expect(tab).to_have_attribute("aria-selected", "true")


def prediction(page: Page) -> dict[str, str]:
    """The prediction block as {row name: tokens}, e.g. {"input": "a b c", "model": "c b a"}."""
    text = page.locator(CODE).first.inner_text()
    rows = {}
    for line in text.splitlines():
        name, sep, tokens = line.partition("  ")  # the name column is padded with 2+ spaces
        if sep and name.strip():
            rows[name.strip()] = tokens.strip()
    return rows


def assert_no_exception(page: Page) -> None:
    shown = page.locator(EXCEPTION)
    assert shown.count() == 0, f"an exception is shown: {shown.first.inner_text()[:2000]}"


def assert_charts_drawn(page: Page, at_least: int = 1, heatmaps: bool = False) -> list[dict]:
    """Every chart on the page (PLOTS_JS) is sized with traces; heatmaps carry their image.

    Plotly draws after the script's elements arrive, so this polls (bounded) before asserting.
    """
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        plots = page.evaluate(PLOTS_JS)
        drawn = all(p["width"] > 100 and p["traces"] > 0 for p in plots)
        if heatmaps:
            drawn = drawn and all(p["heatmap_bytes"] > 100 for p in plots)
        if (len(plots) >= at_least and drawn) or time.monotonic() > deadline:
            break
        page.wait_for_timeout(100)
    assert len(plots) >= at_least, f"expected {at_least}+ charts, found {len(plots)}"
    for i, p in enumerate(plots):
        assert p["width"] > 100 and p["height"] > 100, f"chart {i} has no size: {p}"
        assert p["traces"] > 0, f"chart {i} draws no trace: {p}"
        if heatmaps:
            assert p["heatmaps"] > 0, f"chart {i} has no heatmap image: {p}"
            # A drawn heatmap is a PNG data URL of some length, not an empty href.
            assert p["heatmap_bytes"] > 100, f"chart {i} has an empty heatmap image: {p}"
    return plots


# Screenshots are for a person to look at: no check reads them. Each costs the browser a relayout
# at the page's whole height and a large PNG, and a CI=true run took about 180 that nobody saw:
# there they are taken only when $TFVIZ_SCREENSHOTS names a folder.
SCREENSHOTS_WANTED = bool(os.environ.get("TFVIZ_SCREENSHOTS")) or not IN_CI


def screenshots() -> Path | None:
    """Where the browser tests' screenshots go: $TFVIZ_SCREENSHOTS, else artifacts/; None under
    CI=true without $TFVIZ_SCREENSHOTS (SCREENSHOTS_WANTED)."""
    if not SCREENSHOTS_WANTED:
        return None
    folder = os.environ.get("TFVIZ_SCREENSHOTS")
    path = Path(folder) if folder else ARTIFACTS
    path.mkdir(parents=True, exist_ok=True)
    return path


def shot_of(target, name: str) -> None:
    """A PNG of target (a page, drawn to its viewport, or a locator: one element) in
    screenshots(), when screenshots are wanted."""
    folder = screenshots()
    if folder is not None:
        target.screenshot(path=folder / name)


def screenshot(page: Page, name: str) -> None:
    """A full-page PNG in screenshots(), when screenshots are wanted: the main area scrolls
    inside itself, so grow the viewport."""
    folder = screenshots()
    if folder is None:
        return
    height = page.evaluate(
        """() => Math.max(...['stMain', 'stSidebarContent'].map((id) => {
              const el = document.querySelector(`[data-testid="${id}"]`);
              return el ? el.scrollHeight : 0;
           }))"""
    )
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": min(max(height, 600), 8000)})
    try:
        page.wait_for_timeout(300)  # plotly relayouts on resize
        page.screenshot(path=folder / name, full_page=True)
    finally:
        page.set_viewport_size(size)


def spaced(text: str) -> str:
    return " ".join(text)


# ---- tests ---------------------------------------------------------------------------------

SEQUENCE = "jacebdi"  # reverse task (the default model): not one of its example buttons


def test_sequence_heatmaps_and_w_o_switch_round_trip(page):
    type_sequence(page, SEQUENCE)
    answer = spaced(SEQUENCE[::-1])
    expect(page.locator(CODE).first).to_contain_text(answer)
    rows = prediction(page)
    assert rows["input"] == spaced(SEQUENCE)
    assert rows["right answer"] == answer
    assert rows["model"] == answer, "the bundled reverse model gets this sequence right"

    plots = assert_charts_drawn(page, at_least=1, heatmaps=True)  # the grid: every layer x head
    # The attention grid is labelled with the typed tokens (BOS, then "j·1", "a·2", ...).
    tokens = [t.strip()[0] for t in plots[0]["yticks"] if t.strip() and t.strip() != "BOS"]
    assert "".join(tokens).startswith(SEQUENCE), plots[0]["yticks"]
    learned_text = page.locator(CODE).first.inner_text()
    assert_no_exception(page)

    set_w_o(page, "off (identity)")
    expect(page.locator(CODE).first).to_contain_text("switched")
    switched = prediction(page)
    assert page.locator(CODE).first.inner_text() != learned_text
    assert switched["input"] == spaced(SEQUENCE) and switched["right answer"] == answer
    assert switched["learned W_o"] == answer  # the learned row is still the learned model's
    assert "model" not in switched
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # the grid: every layer x head
    assert_no_exception(page)

    set_w_o(page, "learned")
    expect(page.locator(CODE).first).not_to_contain_text("switched")
    assert page.locator(CODE).first.inner_text() == learned_text
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # the grid: every layer x head
    assert_no_exception(page)
    screenshot(page, "browser_attention.png")


def test_bad_input_shows_a_clear_error_and_the_app_recovers(page):
    type_sequence(page, "xyz!", valid=False)
    alert = page.locator(ALERT).filter(has_text="not allowed")
    expect(alert).to_be_visible()
    message = alert.inner_text()
    assert "'x'" in message, message  # names the offending character...
    assert "abcdefghij" in message, message  # ...and what is allowed
    assert page.locator(CODE).count() == 0, "a stale prediction is shown for a bad sequence"
    assert page.locator(f"{PLOT}, .tfviz-chart").count() == 0, (
        "stale charts are shown for a bad sequence"
    )
    assert_no_exception(page)
    screenshot(page, "browser_bad_input.png")

    type_sequence(page, "abc")
    expect(page.locator(CODE).first).to_contain_text("c b a")
    assert page.locator(ALERT).filter(has_text="not allowed").count() == 0
    assert_charts_drawn(page, at_least=1, heatmaps=True)  # the grid: every layer x head
    assert_no_exception(page)


# What every tab shows with W_o switched off (so the compare tab draws): at least this many
# charts, and the element it is there for (a Streamlit key: class st-key-<key>), in its open
# panel. No tab may open empty. The counts are what each view draws for the bundled reverse
# model (tfviz/ui/<view>.py): e.g. Before/after W_o draws concat, attn_out, cosine, W_o and the
# per-head terms; the compare tab the two attention grids, the residual pair and the drift.
TAB_SHOWS = {
    "Attention": (1, "attention_grid"),
    "Before/after W_o": (5, "head_contributions"),
    "W_o off: compare": (4, "drift"),
    "Take W_o apart": (2, "parts_spectrum"),  # its first section: the modes sweep and spectrum
    "Train": (0, "train_submit"),  # a form to fill in; nothing to chart before a run
    "Analysis": (2, "norm_attention"),  # its first section: raw and norm-based attention
    "Does W_o matter?": (1, "experiment_curves"),  # the shipped experiment for reverse
    "Lessons": (1, "lesson_next"),  # step 1: the worked example's maps, and the way on
}


def sent_during(page: Page, action, outcome: str) -> str:
    """What the server sent (as text) for the run `action` starts (see WATCH_JS)."""
    page.evaluate("window.__tfvizSent = []")
    rerun(page, action, outcome)
    return "\n".join(page.evaluate("window.__tfvizSent.splice(0)"))


def test_a_views_own_widget_reruns_that_view_alone(page):
    """Issue 18: a view's widget (here "Enlarge one head" in Attention) reruns the view, not the
    sequence box, the prediction and the link above it: nothing of them is sent again."""
    box = page.get_by_role("textbox", name="Sequence")
    box.fill("hgfedcba")
    shown = f"""() => document.querySelector('{CODE}')?.textContent.includes('h g f e d c b a')"""
    typed = sent_during(page, lambda: box.press("Enter"), shown)
    assert "right answer" in typed and "sequence=hgfedcba" in typed  # a full main-area run
    big = ".st-key-attention_head .tfviz-chart[data-drawn]"
    enlarged = f"() => document.querySelector('{big}') !== null"
    toggle = page.get_by_text("Enlarge one head", exact=True)
    view_only = sent_during(page, toggle.click, enlarged)
    assert page.locator(big).count() == 1  # the enlarged head, a canvas chart as the grid is
    assert "L0 H0" in view_only  # the enlarged head's title: the view ran
    assert "right answer" not in view_only and "sequence=" not in view_only
    assert "hgfedcba" not in view_only
    assert_no_exception(page)


def test_every_tab_opens_without_an_exception(page):
    set_w_o(page, "off (identity)")
    expect(page.locator(CODE).first).to_contain_text("switched")
    labels = page.get_by_role("tab").all_inner_texts()
    assert sorted(labels) == sorted(TAB_SHOWS), labels
    for label in labels:
        open_tab(page, label)
        assert_no_exception(page)
        charts, key = TAB_SHOWS[label]
        panel = page.locator('[role="tabpanel"]:not([hidden])')
        expect(panel.locator(f".st-key-{key}").first).to_be_visible(timeout=TIMEOUT_MS)
        assert_charts_drawn(page, at_least=charts)
        assert panel.locator(f"{PLOT}, .tfviz-chart").count() >= charts, label
        slug = "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")
        screenshot(page, f"browser_tab_{slug}.png")


UPLOADER_TEXT_JS = """
() => {
  const zone = document.querySelector('[data-testid="stFileUploaderDropzone"]');
  const shown = (el) => {
    const after = getComputedStyle(el, '::after').content;
    return getComputedStyle(el).fontSize === '0px' ? after.replace(/^"|"$/g, '') : el.textContent;
  };
  return [shown(zone.querySelector('button [data-testid="stMarkdownContainer"] p')),
          shown(zone.querySelector('[data-testid="stFileUploaderDropzoneInstructions"] span'))];
}
"""


def test_the_uploaders_own_words_follow_the_language(page, server):
    """Issue 20: Streamlit writes its uploader's button and limit in English; a Chinese page
    shows them from the catalogue (tfviz.ui.uploads.UPLOADER_CSS), an English one as they are."""
    page.wait_for_selector('[data-testid="stFileUploaderDropzoneInstructions"] span')
    assert page.evaluate(UPLOADER_TEXT_JS) == ["Upload", "20MB per file • SAFETENSORS, ZIP"]
    go_to(page, f"{server}/?lang=zh")
    page.wait_for_selector('[data-testid="stFileUploaderDropzoneInstructions"] span')
    page.wait_for_function(
        "() => getComputedStyle(document.querySelector("
        "'[data-testid=\"stFileUploaderDropzone\"] button p'), '::after').content.includes('上传')"
    )
    assert page.evaluate(UPLOADER_TEXT_JS) == ["上传", "每个文件最多 20 MB • SAFETENSORS, ZIP"]
