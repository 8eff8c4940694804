"""Shared fixtures: small models built from a fixed seed, the repository root, and the browser
tests' way to open the app (opened_app)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from tfviz import ModelConfig
from tfviz.core.model import Encoder

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"


# The files that take longest, collected first. Whole files go to a worker (pyproject's
# --dist loadfile), in collection order: a long file collected last ran alone at the end while
# the other worker sat idle. Longest first (the per-file seconds this conftest prints at the end
# of a CI=true run on 2 cores, 2026-12-06); the order within a file is kept. The language atlas's
# re-run first: it trains on both cores at once (its own two processes), beside a browser file
# that mostly waits on its page, not beside test_train_defaults, which trains on one.
SLOW_FIRST = (
    "test_language_atlas_rows.py",
    "test_browser_why.py",
    "test_train_defaults.py",
    "test_browser_layout.py",
    "test_browser_lessons.py",
    "test_atlas.py",
    "test_browser_readable.py",
    "test_browser_decoders.py",
    "test_browser_inert.py",
    "test_browser_folders.py",
    "test_browser_language.py",
    "test_replicas.py",
    "test_browser_share.py",
    "test_browser_atlas.py",
    "test_browser.py",
    "test_load_bench.py",
    "test_app_reading_order.py",
    "test_app_parts.py",
    "test_cold_start.py",
    "test_browser_a11y.py",
    "test_browser_first_hour.py",
    "test_container.py",
)


# Seconds each file took (setup, call and teardown of its tests, summed over workers), printed
# at the end of a run: what SLOW_FIRST's order comes from. And each worker's busy seconds and
# when it reported last: how evenly the order spread the files.
FILE_SECONDS: dict[str, float] = {}
WORKER_SECONDS: dict[str, list[float]] = {}  # worker -> [busy seconds, last report's time]
STARTED = time.monotonic()


def pytest_runtest_logreport(report) -> None:
    path = report.nodeid.split("::", 1)[0]
    FILE_SECONDS[path] = FILE_SECONDS.get(path, 0.0) + report.duration
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    busy = WORKER_SECONDS.setdefault(worker, [0.0, 0.0])
    busy[0] += report.duration
    busy[1] = time.monotonic() - STARTED


def pytest_terminal_summary(terminalreporter) -> None:
    if not FILE_SECONDS:
        return
    slowest = sorted(FILE_SECONDS.items(), key=lambda kv: -kv[1])[:20]
    terminalreporter.section("seconds per file (the 20 slowest)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:7.1f}  {path}")
    for worker, (busy, last) in sorted(WORKER_SECONDS.items()):
        terminalreporter.write_line(
            f"worker {worker}: {busy:.0f} s in tests, last report {last:.0f} s after the start"
        )


def pytest_configure(config) -> None:
    # pytest-xdist (3.6 on) queues a loadfile run's files by how many tests each has, most first,
    # unless told not to: SLOW_FIRST's order was dropped, and the longest files, which hold few
    # tests each (the language atlas's re-run, a browser file of one test), were dealt out last.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    # One torch thread in every test process, as the app runs (tfviz.serve.jobs.
    # limit_torch_threads): three of them share two cores, and the models are tiny, so a second
    # thread only waits on the other processes. Set here once, so that every test computes the same
    # way whichever tests ran before it in its process.
    torch.set_num_threads(1)
    scan_components_once()


def scan_components_once() -> None:
    """Every AppTest scans the metadata of every installed package for Streamlit components (in
    its first run), where a server scans once when it starts. A file of AppTests makes hundreds
    (tests/ui/test_app_parts.py: 189), and the scans were the larger part of such a file's time.
    The packages installed do not change while the tests run, so the test process scans once
    and hands each AppTest what that scan found."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without v2 components scans nothing
        return
    scan = manifest_scanner.scan_component_manifests
    if getattr(scan, "scanned_once", False):
        return
    found: list = []

    def scanned(max_workers: int | None = None) -> list:
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    scanned.scanned_once = True
    manifest_scanner.scan_component_manifests = scanned


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # sort() is stable
    BROWSER_FILES.update(item.path for item in items if "browser" in item.fixturenames)


def make_model(seed: int = 0, **sizes) -> Encoder:
    """A randomly initialised encoder in eval mode (no dropout), deterministic for a seed."""
    cfg = dict(
        vocab_size=12, n_out=5, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=10, dropout=0.0
    )
    cfg.update(sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Encoder(ModelConfig(**cfg))
        # Non-zero biases everywhere, so tests notice a dropped or misplaced bias.
        for p in model.parameters():
            if p.dim() == 1:
                p.data.normal_(0, 0.1)
    return model.eval()


@pytest.fixture
def model() -> Encoder:
    return make_model()


@pytest.fixture
def manager():
    """A JobManager with one slot and one queue place; whatever a test left running is stopped."""
    from tests.support import stop_all
    from tfviz.serve import jobs

    m = jobs.JobManager(max_jobs=1, max_queue=1)
    yield m
    stop_all(m)


@pytest.fixture
def ids() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 11, (3, 7), generator=g)


APP = str(ROOT / "app.py")


@pytest.fixture
def fresh_app(monkeypatch, tmp_path):
    """For AppTest: empty Streamlit caches (they outlive AppTest instances), a private user
    models folder, no upload-limit override, and torch's thread count put back afterwards (the
    app sets it for the whole process; every test computes on pytest_configure's one thread)."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setenv("TFVIZ_USER_MODELS", str(tmp_path / "user_models"))
    monkeypatch.delenv("TFVIZ_MAX_UPLOAD_MB", raising=False)
    threads = torch.get_num_threads()
    yield tmp_path / "user_models"
    st.cache_data.clear()
    st.cache_resource.clear()
    torch.set_num_threads(threads)


@pytest.fixture
def server_folder(model_root, monkeypatch) -> Path:
    """The app's models folder ($TFVIZ_PRETRAINED_DIR) set to the test module's model_root (a
    module that asks for this fixture defines model_root)."""
    from tfviz import settings

    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(model_root))
    return model_root


def start_app(view: str | None = None, model: str | None = None, lang: str | None = None):
    """A fresh AppTest session, run once (on a tab, model and language if given), with no
    exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    if view:
        at.session_state["view"] = view
    if lang:
        at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    if model is not None:
        at.selectbox(key="model").set_value(model).run()
        assert not at.exception, at.exception
    return at


def start_with_state(**state):
    """A fresh AppTest session with session state set before its first run (as a student's
    shared link restores it), run once without an exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def wait_until(condition, timeout: float = 30.0) -> None:
    """Poll condition (bounded) until it holds; AssertionError if it never does."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def submit_training(at, name: str, steps: int):
    """Start a tiny training through the app's Train form; returns the session's job."""
    at.selectbox(key="train_d_model").set_value(16)
    at.selectbox(key="train_heads").set_value(2)
    at.selectbox(key="train_layers").set_value(1)
    at.selectbox(key="train_d_ff").set_value(32)
    at.number_input(key="train_steps").set_value(steps)
    at.text_input(key="train_name").set_value(name)
    at.button(key="train_submit").click().run()
    assert not at.exception and not at.error
    return at.session_state["train_job"]


def page_figures(at) -> list[dict]:
    """Every chart an AppTest page shows in its main area, as plotly JSON, in page order: the
    plotly charts and the figures of the canvas charts (tfviz.ui.widgets.canvas_charts)."""
    from tfviz.ui.widgets import CANVAS_NAME

    out: list[dict] = []

    def visit(node) -> None:
        kind = getattr(node, "type", None)
        if kind == "plotly_chart":
            out.append(json.loads(node.proto.spec))
        elif kind == "bidi_component" and node.proto.component_name == CANVAS_NAME:
            out.extend(json.loads(node.proto.json)["figures"])  # the data canvas_charts sent
        for child in getattr(node, "children", {}).values():
            visit(child)

    visit(at.main)
    return out


# ---- the browser tests' one way to open the app (tests/test_browser*.py) ----------------------

# One action on 2 cores shared by three test workers (pytest-xdist) and a server each; a healthy run
# takes well under a second.
TIMEOUT_MS = 60_000
APP_ELEMENT = '[data-testid="stApp"]'
APP_IDLE = f'{APP_ELEMENT}[data-test-script-state="notRunning"]'
# Streamlit's page mounts its app element as soon as its code has loaded, before any script run
# (a second or two here; no model or server work in it). Not less: at 10 s a CI run saw the same
# first page blank twice running while its server sat idle (the browser starved, not the app).
APP_MOUNT_MS = 20_000
CODE = '.st-key-prediction [data-testid="stCode"]'  # st.container(key="prediction")
EXCEPTION = '[data-testid="stException"]'
# Any chart drawn: a plotly chart's svg, or a canvas chart (tfviz.ui.widgets.canvas_charts) marked
# drawn by standalone.js.
CHART_DRAWN = ".js-plotly-plot .main-svg, .tfviz-chart[data-drawn]"

# Counts finished script runs (the script state turning back to notRunning) and notes the time of
# the last DOM change. Installed before the page loads, on the document, so it sees stApp once it
# exists. A fast run may never show "running" (React can batch it away), so waits also accept
# the run's expected outcome, and then require the page to stay quiet for a moment.
WATCH_JS = """
window.__tfvizRuns = 0;
window.__tfvizChanged = performance.now();
new MutationObserver((records) => {
  window.__tfvizChanged = performance.now();
  for (const r of records) {
    if (r.type === 'attributes' && r.attributeName === 'data-test-script-state'
        && r.target.getAttribute('data-test-script-state') === 'notRunning') window.__tfvizRuns++;
  }
}).observe(document, {attributes: true, childList: true, characterData: true, subtree: true});
// What the server sends, as text, while a test sets window.__tfvizSent to an array: the
// protobuf frames carry each element's strings as UTF-8, so a test can tell which elements a
// run re-sent.
window.__tfvizSent = null;
const OrigWS = window.WebSocket;
window.WebSocket = class extends OrigWS {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (e) => {
      if (window.__tfvizSent && e.data instanceof ArrayBuffer) {
        window.__tfvizSent.push(new TextDecoder('utf-8', {fatal: false}).decode(e.data));
      }
    });
  }
};
"""
QUIET_MS = 300  # no DOM change for this long after a run: it is drawn

# Under load the browser now and then fails to fetch one of Streamlit's own code chunks from
# the server (seen in CI: a widget drawn as "TypeError: Failed to fetch dynamically imported
# module: .../static/js/TextInput....js"). The page keeps the failure; a new session loads it.
CHUNK_FAILED_JS = (
    "() => document.body.innerText.includes('Failed to fetch dynamically imported module')"
)


def refuse_chunk_failure(page) -> None:
    """AssertionError when a widget on the page shows that its code did not load."""
    if page.evaluate(CHUNK_FAILED_JS):
        raise AssertionError("a component's code did not load in the browser")


CHUNK_CHECK_MS = 2_000


def drawn(page, selector: str, timeout_ms: int | None = None) -> None:
    """Wait for selector to be visible, as wait_for_selector does, but end at once, with
    refuse_chunk_failure's error, when a widget shows that its code did not load: such a page
    never draws what the widget holds, and a whole timeout (60 s) used to go by before it was
    opened again. Looked for every CHUNK_CHECK_MS, between waits that return the moment the
    element shows (a polled wait made every page open wait up to one poll longer)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    end = time.monotonic() + (timeout_ms or TIMEOUT_MS) / 1000
    while True:
        left_ms = (end - time.monotonic()) * 1000
        try:
            page.wait_for_selector(selector, timeout=max(1, min(CHUNK_CHECK_MS, left_ms)))
            return
        except PlaywrightTimeout:
            refuse_chunk_failure(page)
            if left_ms <= CHUNK_CHECK_MS:
                raise


# What a test process keeps for all its modules (tests/browser/test_browser.py's app server and
# Chromium), here because the test modules all import this file under one name (tests.conftest),
# where a test module may be imported twice (pytest's own import, and another module's). pytest
# imports this file once more, as `conftest`, for its hooks: a hook reaches this state through
# tests.conftest too.
WORKER: dict[str, object] = {}
WORKER_ENDS: dict[str, object] = {}  # name -> the rest of its start() generator


def for_the_worker(request, name: str, start):
    """WORKER[name], made the first time (or the first time since end_for_the_worker): start() is
    a generator whose first value is kept and whose rest runs when the test process ends
    (pytest's config cleanup) or end_for_the_worker(name) is called."""
    if name not in WORKER:
        made = start()
        WORKER[name] = next(made)
        WORKER_ENDS[name] = made
        request.config.add_cleanup(lambda: end_for_the_worker(name))
    return WORKER[name]


def end_for_the_worker(name: str) -> None:
    """Run the rest of WORKER[name]'s start() now, where it is still kept."""
    WORKER.pop(name, None)
    made = WORKER_ENDS.pop(name, None)
    if made is not None:
        next(made, None)


# The test files with a test that takes the `browser` fixture (found at collection). While
# Playwright's sync API runs, its event loop counts as running in the test process's thread, and
# asyncio.run() there is refused (the bench's sessions in the deploy tests, test_container's own
# Playwright); so the process's Chromium, kept from one browser file to the next, is stopped
# before the first test of any other file.
BROWSER_FILES: set[Path] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    if item.path not in BROWSER_FILES:
        from tests.conftest import end_for_the_worker as end  # the test modules' WORKER

        end("browser")


# The browser tests' servers, by address: a first page that never draws is reported with what
# its server was doing (every thread's stack, written by faulthandler on SIGUSR1, and its log).
SERVERS: dict[str, tuple[subprocess.Popen, Path]] = {}


def server_state(url: str) -> str:
    """The tail of the log of the server behind url, after asking it for its threads' stacks."""
    for address, (proc, log_path) in SERVERS.items():
        if url.startswith(address) and proc.poll() is None:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)  # faulthandler writes from its own thread
            return log_path.read_text(errors="replace")[-12_000:]
    return "(no running server known for this address)"


def page_state(page) -> str:
    """What a page shows, for a failure message: its script state and its visible text."""
    try:
        state = page.evaluate(
            """() => document.querySelector('[data-testid="stApp"]')
                       ?.getAttribute('data-test-script-state')"""
        )
        text = page.evaluate("() => document.body.innerText")
    except Exception as e:  # noqa: BLE001  (the page itself may be what broke)
        return f"(the page could not be read: {e})"
    return f"script state {state!r}; text:\n{text[:3000]}"


def quiet(page) -> None:
    """Wait until the app is idle and the page has not changed for QUIET_MS."""
    page.wait_for_function(
        """q => document.querySelector('[data-testid="stApp"]')
                  ?.getAttribute('data-test-script-state') === 'notRunning'
               && performance.now() - window.__tfvizChanged > q""",
        arg=QUIET_MS,
        polling=50,
    )


def resized(page, viewport: dict) -> None:
    """The open page at another screen size, redrawn there. Streamlit's layout follows the
    window as a fresh page of that size draws it (the sidebar folds away below its breakpoint
    and comes back above it), plotly charts relayout and canvas charts repaint when their width
    changes: one page serves a test's phone, projector and desktop, where a page each cost
    3-5 s more of the suite."""
    if page.viewport_size == viewport:
        return
    page.set_viewport_size(viewport)
    page.wait_for_timeout(QUIET_MS)  # the resize is seen, and charts begin to redraw
    quiet(page)


def watched(context):
    """context with the browser tests' timeout and WATCH_JS on every page it opens."""
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(WATCH_JS)
    return context


def new_page(browser, viewport: dict, options: dict):
    """A page of viewport's size: the blank tab of browser's one shared context, or, with context
    options (a phone's touch, downloads), a page alone in a fresh context made with them.

    The shared context's pages share the HTTP cache of Streamlit's and plotly's scripts, which a
    fresh context fetched again for every page; and its tab, kept blank between tests
    (close_page), keeps its renderer, whose compiled code a new tab compiled again: an app page
    opened in it costs the browser about half the CPU. Each test's page is still a session of its
    own (a new document, with its own WebSocket), and what a page kept in the browser (its
    storage, cookies) is cleared when it closes."""
    if options:
        return watched(browser.new_context(viewport=viewport, **options)).new_page()
    context = getattr(browser, "shared_context", None)
    if context is None:
        context = browser.shared_context = watched(browser.new_context(viewport=viewport))
        context.blank_tab = None
    page, context.blank_tab = context.blank_tab, None
    if page is None or page.is_closed():
        page = context.new_page()
    page.set_viewport_size(viewport)
    return page


def close_page(page, options: dict, keep: bool = True) -> None:
    """End a page new_page opened: close its fresh context, or, in the shared one, clear its
    storage and cookies, so that the next test's page starts as a fresh one, and leave the tab
    blank for the next test (keep; the page's session ends as the app's document unloads), or
    close it where a tab is already kept or it is not to be trusted (keep=False: a first page
    that was not drawn)."""
    if options:
        page.context.close()
        return
    if page.is_closed():
        return
    try:
        page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
    except Exception:  # noqa: BLE001  (a page that never loaded, or whose origin has no storage)
        pass
    context = page.context
    context.clear_cookies()
    if not keep or context.blank_tab is not None:
        page.close()
        return
    page.goto("about:blank")
    page.mouse.move(-1, -1)  # no pointer left over a chart: the next page opens with no hover
    context.blank_tab = page


@contextmanager
def opened_app(
    browser,
    url: str,
    viewport: dict,
    *,
    first: str = CODE,
    first_timeout_ms: int | None = None,
    settle: bool = True,
    no_exception: bool = True,
    **options,
):
    """A fresh browser session on url (new_page's page sent there), drawn to the end; yields
    its page.

    first: what the first run draws (the prediction block; a sentence model's word-pieces or
    similarity instead), waited for before the app's idle state, which on the very first load may
    read notRunning before the first run started. first_timeout_ms: for both waits, where a fresh
    server loads a big model first. settle: also wait until the page is quiet (`quiet`).
    no_exception: on leaving, no exception element on the page. Uncaught page errors are kept in
    page.page_errors and must be none on leaving. options: more for browser.new_context.
    """
    failed = ""
    for attempt in (1, 2):
        page = new_page(browser, viewport, options)
        page.page_errors = []

        def caught(error, page=page):
            page.page_errors.append(str(error))

        page.on("pageerror", caught)
        try:
            page.goto(url)
            # A page whose own code never ran stays blank: no app element, no text (seen in two
            # CI runs in five). It is opened again after APP_MOUNT_MS, not the whole timeout.
            page.wait_for_selector(APP_ELEMENT, state="attached", timeout=APP_MOUNT_MS)
            drawn(page, first, first_timeout_ms)
            drawn(page, APP_IDLE, first_timeout_ms)
            drawn(page, CHART_DRAWN)
            if settle:
                quiet(page)
            refuse_chunk_failure(page)
            break
        except Exception as e:  # noqa: BLE001  (a timeout, reported with its circumstances)
            failed += (
                f"\n=== attempt {attempt}: {url}: the first page was not drawn "
                f"({e.__class__.__name__}: {str(e).splitlines()[0]})\n--- the page: "
                f"{page_state(page)}\n--- the server: {server_state(url)}"
            )
            page.remove_listener("pageerror", caught)
            close_page(page, options, keep=False)
    else:
        raise AssertionError(failed)
    if failed:
        # Seen in about one full CI run in four, never alone: a fresh session's first page not
        # drawn, or drawn with a widget whose code did not load (CHUNK_FAILED_JS), while the
        # other test worker loaded the machine. A second session is opened once; what the
        # first showed, and the server's threads, stay in the report.
        warnings.warn(f"a first page was opened again:{failed}", stacklevel=2)
    try:
        yield page
        if no_exception:
            assert page.locator(EXCEPTION).count() == 0
        assert page.page_errors == [], f"uncaught errors in the page: {page.page_errors}"
    finally:
        page.remove_listener("pageerror", caught)
        close_page(page, options)


def go_to(page, url: str, *, first: str = CODE) -> None:
    """An open page sent to url (a new session: a language link), waited for as opened_app waits
    for its first run: what that run draws, then the app idle."""
    page.goto(url)
    drawn(page, first)
    drawn(page, APP_IDLE)
