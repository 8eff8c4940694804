"""What the bench scripts share: the figures (percentile, median, a timer), the app's server, the
process tree and its memory, and the Chromium they drive.

A bench script imports from this module and from the other harness modules (bench/pages.py: the
timing JavaScript put into the pages and the pages opened with it; bench/session.py: Streamlit's
websocket protocol spoken without a browser; bench/decoder_folders.py and
bench/encoder_folders.py: random model folders of real families' sizes), never from another
script (tests/bench/test_bench_harness.py checks it).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
MODELS = ROOT / "models"  # the bundled checkpoints
FLOOR_APP = ROOT / "bench" / "floor_app.py"  # the bare pages the latency benches measure against
SERVER_START_S = 60  # Server.wait_healthy's limit

# Words that are one word-piece each in MiniLM's vocabulary (bench/ui_latency.py checks it when
# it makes sentences), so a sentence of n of them has n + 2 pieces with [CLS] and [SEP].
WORDS = (
    "the a man woman child dog cat bird house car road river city park music song book table "
    "plays reads sees finds likes takes holds gives makes walks runs sings near under over "
    "with without after before big small old new red green happy quiet fast slow today"
).split()

# Issue 11's target for a keystroke, a click or a slider move -> every chart painted (2 cores).
TARGET_P95_MS = 300.0


# ---- figures -----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (q from 0 to 100) by nearest rank: the smallest value that at least
    q% of the values are at or below, ordered[ceil(q / 100 * n) - 1], always one of the values
    (p95 of 20 values is the 19th smallest, of 15 or fewer the largest). nan when there is no
    value. Every p95 the benches print is this one."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def median(values: list[float]) -> float:
    """The median (statistics.median: the middle value, or the mean of the two middle ones);
    nan when there is no value."""
    return statistics.median(values) if values else math.nan


def seconds(fn, calls: int = 1) -> float:
    """Median seconds of `calls` calls of fn."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def largest_bundled() -> str:
    """The name of the largest bundled checkpoint (its file's size; the name breaks ties)."""
    files = sorted(MODELS.glob("*.safetensors"), key=lambda p: (-p.stat().st_size, p.name))
    if not files:
        raise RuntimeError(f"no bundled model in {MODELS}")
    return files[0].stem


# ---- processes and memory ----------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """pid and every process below it (from /proc/*/stat parent ids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces: split after it.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def rss_mib(field: str = "VmRSS") -> float:
    """This process's resident memory (VmRSS), or its peak so far (VmHWM), or its private
    (RssAnon) or file-backed (RssFile: pages of memory-mapped files, such as safetensors
    weights read in place) part, in MiB; nan where /proc does not say."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def trace_mib(trace) -> float:
    """What one trace holds in numpy arrays: what the server keeps per cached trace."""
    import numpy as np

    return sum(v.nbytes for v in vars(trace).values() if isinstance(v, np.ndarray)) / 2**20


# ---- the app's server --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(base_url: str) -> bool:
    """True when Streamlit's health endpoint at base_url answers "ok"."""
    try:
        with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


def streamlit_command(app: str | Path, port: int, *extra: str) -> list[str]:
    """`streamlit run app` headless on 127.0.0.1:port, no telemetry, no file watcher."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        f"--server.port={port}", "--server.address=127.0.0.1", "--server.headless=true",
        "--browser.gatherUsageStats=false", "--server.fileWatcherType=none", *extra,
    ]  # fmt: skip


class Server:
    """`streamlit run app` on a loopback port (a free one unless given) with a private user models
    folder ($TFVIZ_USER_MODELS: workdir/user_models_PORT unless given), its output in a log file
    (workdir/server_PORT.log unless given): the one launcher of every bench.

    extra: more `streamlit run` options; environ: more environment variables for the server.
    Run from cwd, by default the app's own folder, which Streamlit also puts first on sys.path:
    another checkout's app imports that checkout's tfviz.
    """

    def __init__(
        self,
        workdir: Path,
        extra: list[str] = (),
        app: str | Path = APP,
        environ: dict | None = None,
        *,
        port: int = 0,
        user_models: Path | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
    ):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or workdir / f"server_{self.port}.log"
        user_models = user_models or workdir / f"user_models_{self.port}"
        env = dict(os.environ, TFVIZ_USER_MODELS=str(user_models))
        env.update(environ or {})
        cmd = streamlit_command(app, self.port, *extra)
        self.spawned = time.time()  # epoch seconds: compared with the page's clock
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=cwd or Path(app).parent,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def wait_healthy(self, poll: float = 0.05) -> float:
        """Seconds from spawn until /_stcore/health answers ok; raises if it never does."""
        if not wait_healthy(self.url, self.proc, SERVER_START_S, poll):
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"server on port {self.port} did not come up:\n{tail}")
        return time.time() - self.spawned

    def stop(self) -> None:
        stop_server(self.proc)


def start_server(
    port: int, ttl: int, log_path: Path, env_dir: Path, app: str, models_dir: Path | None = None
) -> subprocess.Popen:
    """`streamlit run app` (a path from the repository's root, which it runs from) on
    127.0.0.1:port with server.disconnectedSessionTTL ttl, env_dir/user_models as its user models
    folder and models_dir, if given, as its folder of model folders ($TFVIZ_PRETRAINED_DIR):
    Server's process, for bench/load.py, cold_start.py and failover.py."""
    environ = {} if models_dir is None else {"TFVIZ_PRETRAINED_DIR": str(models_dir)}
    server = Server(
        env_dir,
        [f"--server.disconnectedSessionTTL={ttl}"],
        app,
        environ,
        port=port,
        user_models=env_dir / "user_models",
        log_path=log_path,
        cwd=ROOT,
    )
    return server.proc


def wait_healthy(
    base_url: str, proc: subprocess.Popen | None, limit: float, poll: float = 0.5
) -> bool:
    """True once the server at base_url answers its health check within limit seconds; False if
    it does not, or if proc (when given) exits first."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if healthy(base_url):
            return True
        time.sleep(poll)
    return False


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server and anything it started, by pid; kill what does not stop. Nothing
    to do for a process already ended (its pid may be another's by now)."""
    if proc.poll() is not None:
        return
    pids = [p for p in descendants(proc.pid) if p != proc.pid]
    for pid in [proc.pid, *pids]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 15)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)


# ---- Chromium ----------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"  # Debian's
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 1000}


def launch_chromium(browser_type, args: list[str] = CHROMIUM_ARGS):
    """Headless CHROMIUM launched by Playwright's browser type (sync_playwright().chromium, or a
    browser's .browser_type) with these command-line options."""
    return browser_type.launch(executable_path=CHROMIUM, args=args)


def cut_network(context, outside: list[str]) -> None:
    """Abort every request of a browser context that is not for a file://, noting its URL in
    outside: a page that works with the network cut fetches nothing."""

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
