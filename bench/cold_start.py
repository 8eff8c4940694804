"""Cold start: many sessions at once on a freshly started server, and no traceback.

A class opens the link together: the server has just started, and forty browsers connect within
a second. Each session runs the script in its own thread, so the first page's imports (torch,
numpy, pandas, plotly) happen in several threads at once, and a module one thread is still
importing can be seen half-made by another: plotly looks numpy up in sys.modules without
importing it, and once got "partially initialized module 'numpy' has no attribute 'ndarray'"
(3 of 40 sessions on one start; app.py now imports numpy and pandas whole, first).

Each start here spawns `streamlit run app.py` (bench/harness.py's start_server), waits for the
health check, then opens every session's websocket at once with asyncio (bench/session.py's
Session, the browser's protocol) and loads the first page. Per start it counts: sessions whose
page showed the prediction (an st.code in the container keyed "prediction"), exception elements
and error alerts the sessions received, other failures (timeouts, closed sockets), and lines
with "Traceback" or "Error" in the server's log. It also times, from the spawn, the first and the
last complete page (script finished, prediction shown), over a bare websocket: the server's part
of a first render; a browser adds its own drawing (bench/ui_latency.py --first-render-only).

Prints a table and a verdict; exits 0 either way (a benchmark), 1 if a server does not start.
tests/deploy/test_cold_start.py runs the same check and asserts.

Usage: python -m bench.cold_start [--starts 5] [--sessions 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.harness import free_port, start_server, stop_server, wait_healthy
from bench.session import Session, Stats

PREDICTION_KEY = "prediction"  # tfviz.ui.kinds: st.container(key="prediction")
TARGET_FIRST_RENDER_S = 5.0  # issues 8 and 10: server start -> first complete render, median
# A line of the server's log that tells of a failure: a traceback's head, or an exception's name.
LOG_PROBLEM = re.compile(r"Traceback|Error")
LOG_EXCEPTION = re.compile(r"\b\w*(Error|Exception)\b:")  # "AttributeError: partially ..."
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Streamlit logs tracebacks in colour
MAX_SAMPLES = 5
# Kinds of bench/session.py's session errors that are the app failing on the page, not the network.
PAGE_ERRORS = ("exception", "error alert")


@dataclass
class StartResult:
    """One fresh server and its burst of sessions."""

    sessions: int
    healthy_s: float  # spawn -> health check answered
    connect_spread_s: float  # first to last websocket opened
    loaded: int  # sessions whose page load finished
    predictions: int  # sessions whose page showed the prediction
    page_errors: int  # exception elements and error alerts received, all sessions
    failures: int  # timeouts, closed or refused sockets
    log_tracebacks: int  # server log lines with "Traceback"
    log_problems: int  # server log lines with "Traceback" or "Error"
    first_page_s: float  # spawn -> first page finished with the prediction (nan: none)
    last_page_s: float  # spawn -> last such page (nan: none)
    loadavg: float  # 1-minute load average when the sessions were done
    samples: list[str] = field(default_factory=list)  # a few session errors
    log_samples: list[str] = field(default_factory=list)  # a few log lines, exceptions first

    @property
    def clean(self) -> bool:
        """Every session showed its prediction, and nothing failed anywhere."""
        problems = self.page_errors + self.failures + self.log_problems
        return problems == 0 and self.predictions == self.sessions


class ColdSession(Session):
    """A Session that notes when its websocket opened and whether its page showed the prediction."""

    opened_at: float | None = None

    async def _act(self, ws, deadline: float, load_only: bool) -> None:
        self.opened_at = time.monotonic()
        await super()._act(ws, deadline, load_only)

    @property
    def loaded_at(self) -> float | None:
        """When its first page load finished (the request goes out as soon as the socket opens)."""
        if self.opened_at is None or not self.stats.page_loads:
            return None
        return self.opened_at + self.stats.page_loads[0]

    @property
    def shows_prediction(self) -> bool:
        return self.page.shows_code_in(PREDICTION_KEY)


async def burst(ws_url: str, sessions: int, timeout: float) -> list[ColdSession]:
    """Open every session's websocket at once, load the first page, and leave."""
    users = [
        ColdSession(ws_url, Stats(), random.Random(i), timeout, (0.0, 0.0)) for i in range(sessions)
    ]
    deadline = time.monotonic() + timeout
    # load_only: one page load; a failed one is retried only while time is left, which after a
    # timeout it is not, so a session that never loads is counted, not hidden by a retry.
    await asyncio.gather(*(u.run(deadline, load_only=True) for u in users))
    return users


def log_lines(text: str) -> list[str]:
    """The server log's lines that tell of a failure, without colour codes."""
    lines = (ANSI.sub("", line).strip() for line in text.splitlines())
    return [line for line in lines if LOG_PROBLEM.search(line)]


def one_start(
    sessions: int, app: str = "app.py", timeout: float = 90.0, startup_timeout: float = 120.0
) -> StartResult | None:
    """A fresh server, every session at once, the figures; None if the server does not start."""
    with tempfile.TemporaryDirectory(prefix="tfviz-cold-") as tmp:
        log_path = Path(tmp) / "server.log"
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        spawned = time.monotonic()
        proc = start_server(port, 5, log_path, Path(tmp), app)
        try:
            if not wait_healthy(base_url, proc, startup_timeout):
                log = log_path.read_text(errors="replace")[-3000:]
                print(f"the server did not start (exit code {proc.poll()}); its log:\n{log}")
                return None
            healthy_s = time.monotonic() - spawned
            ws_url = base_url.replace("http://", "ws://") + "/_stcore/stream"
            users = asyncio.run(burst(ws_url, sessions, timeout))
            loadavg = os.getloadavg()[0]
        finally:
            stop_server(proc)
        # Read after the server stopped: an exception logged at the last moment is in the file.
        problems = log_lines(log_path.read_text(errors="replace"))
    # The exception's own line says most; the lines of code around "raise ...Error" say little.
    exceptions = list(dict.fromkeys(line for line in problems if LOG_EXCEPTION.search(line)))
    log_samples = (exceptions or problems)[:MAX_SAMPLES]

    opened = [u.opened_at for u in users if u.opened_at is not None]
    done = sorted(u.loaded_at - spawned for u in users if u.shows_prediction and u.loaded_at)
    samples: list[str] = []
    page_errors = failures = 0
    for u in users:
        for kind, n in u.stats.errors.items():
            if kind in PAGE_ERRORS:
                page_errors += n
            else:
                failures += n
        samples.extend(s for s in u.stats.samples if s not in samples)
    return StartResult(
        sessions=sessions,
        healthy_s=healthy_s,
        connect_spread_s=max(opened) - min(opened) if opened else math.nan,
        loaded=sum(bool(u.stats.page_loads) for u in users),
        predictions=sum(u.shows_prediction for u in users),
        page_errors=page_errors,
        failures=failures,
        log_tracebacks=sum("Traceback" in line for line in problems),
        log_problems=len(problems),
        first_page_s=done[0] if done else math.nan,
        last_page_s=done[-1] if done else math.nan,
        loadavg=loadavg,
        samples=samples[:MAX_SAMPLES],
        log_samples=log_samples,
    )


def cold_start(
    starts: int = 5, sessions: int = 40, app: str = "app.py", timeout: float = 90.0, log=print
) -> list[StartResult]:
    """starts fresh servers one after another, each met by sessions at once.

    Raises RuntimeError if a server does not start: that is no figure to report.
    log: called with one line per start as it ends (print; a test passes its own).
    """
    results = []
    for i in range(starts):
        result = one_start(sessions, app, timeout)
        if result is None:
            raise RuntimeError(f"start {i + 1}: the server did not start")
        results.append(result)
        log(row(i + 1, result))
    return results


HEADER = (
    "start  healthy  spread  loaded  prediction  page errors  failures  tracebacks  "
    "error lines  first page  last page  load"
)


def row(i: int, r: StartResult) -> str:
    return (
        f"{i:>5}  {r.healthy_s:>6.1f}s  {r.connect_spread_s:>5.2f}s  {r.loaded:>3}/{r.sessions:<3}"
        f"  {r.predictions:>6}/{r.sessions:<3}  {r.page_errors:>11}  {r.failures:>8}  "
        f"{r.log_tracebacks:>10}  {r.log_problems:>11}  {r.first_page_s:>9.2f}s  "
        f"{r.last_page_s:>8.2f}s  {r.loadavg:>4.1f}"
    )


def median_first_page(results: list[StartResult]) -> float:
    """Median over starts of spawn -> first complete page (a start without one counts as inf)."""
    values = [r.first_page_s if not math.isnan(r.first_page_s) else math.inf for r in results]
    return statistics.median(values) if values else math.nan


def report(results: list[StartResult]) -> bool:
    """Print the summary and the verdict; True when every start was clean."""
    sessions = sum(r.sessions for r in results)
    clean = sum(r.clean for r in results)
    for i, r in enumerate(results, 1):
        for sample in r.samples:
            print(f"  start {i}, a session: {sample}")
        for line in r.log_samples:
            print(f"  start {i}, server log: {line[:300]}")
    first = median_first_page(results)
    last = statistics.median(r.last_page_s for r in results) if results else math.nan
    print(
        f"{len(results)} starts x {results[0].sessions if results else 0} sessions: "
        f"{sum(r.predictions for r in results)}/{sessions} showed the prediction, "
        f"{sum(r.page_errors for r in results)} exceptions/error alerts on pages, "
        f"{sum(r.failures for r in results)} other failures, "
        f"{sum(r.log_tracebacks for r in results)} tracebacks in server logs "
        f"({sum(r.log_problems for r in results)} lines with Traceback or Error)"
    )
    met = "met" if first < TARGET_FIRST_RENDER_S else "NOT met"
    print(
        f"spawn -> first complete page (server side, websocket): median {first:.2f} s "
        f"(target for a browser's first render < {TARGET_FIRST_RENDER_S:g} s: {met}); "
        f"-> all {results[0].sessions if results else 0} pages: median {last:.2f} s"
    )
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average at the end of each start")
    ok = clean == len(results) and bool(results)
    print(
        f"verdict: {'PASS' if ok else 'FAIL'}: {clean} of {len(results)} cold starts clean "
        "(every session shows its prediction, no exception, no traceback)"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--starts", type=int, default=5, help="fresh servers, one after another")
    p.add_argument("--sessions", type=int, default=40, help="sessions at once per start")
    p.add_argument("--app", default="app.py", help="the script the server runs (default app.py)")
    p.add_argument("--timeout", type=float, default=90.0, help="per page load, seconds")
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    if args.starts < 1 or args.sessions < 1:
        p.error("need --starts >= 1 and --sessions >= 1")
    print(f"tfviz cold start: {args.starts} fresh servers, {args.sessions} sessions at once each")
    print(HEADER)
    try:
        results = cold_start(args.starts, args.sessions, args.app, args.timeout)
    except RuntimeError as e:
        print(e)
        return 1
    report(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
