"""Failover: two replicas behind the repository's nginx config, one killed with -9 mid-lesson.

What docs/deploy.md promises, run for real on one machine: two `streamlit run app.py` servers on
loopback ports share one user_models folder (TFVIZ_USER_MODELS), and nginx runs in front of them
with deploy/compose/nginx.conf itself, rendered for those ports (render_nginx_conf rewrites the
upstream's `server` lines and the `listen` port and leaves everything else, the stickiness
included, as it is in the file). nginx runs in the foreground as a child process, with its own
prefix, temporary folders and access log in a temporary folder.

Each simulated browser (bench/session.py's Session, Streamlit's websocket protocol) first GETs the
page through nginx and keeps the cookie the proxy sets (the config pins a browser by a cookie,
not by its address: every client here is 127.0.0.1), then opens its websocket with it, sets a
view (model, sequence, W_o switch, a zeroed head on some, tab) and reloads once: the reload must
reach the replica that holds its session, which resumes it (same session id). Then every browser
types sequences while one replica is killed with SIGKILL. A browser on the dead replica sees its
websocket close and reconnects as the browser does: a new websocket through nginx, same cookie,
offering its old session id, with the query string the app last wrote into the address
(tfviz.ui.router.write_address, received as a page_info_changed ForwardMsg). nginx sends it to
the other replica, which has never seen the session and rebuilds the view from the address alone.

Which replica served what comes from nginx's access log: an extra log_format (in the wrapper
around the config, not in it) records each request's cookie, the Set-Cookie the config sends and
$upstream_addr. The app is not changed.

Measured: sessions per replica; stickiness (every request of a browser before the kill reached one
replica, and its reload resumed its session); for the browsers on the killed replica, the time
from the kill to their restored page, how many came back, and whether each shows what it showed
(the app's query string after the reconnect equals the one before, which sync rewrites from what
is on screen, and the model, sequence, W_o and zeroed-heads widgets show what it had set);
browsers on the other replica untouched; no page with an exception or error alert; a model
trained on replica A (a short Train-form job, through a browser pinned to A) listed in the model
picker on replica B; and a browser that names the proxy with a port (http://tfviz.test:PORT,
resolved to nothing: the socket goes to 127.0.0.1) getting its page.

Prints the figures and a verdict; exits 0 either way (a benchmark), 1 if nginx or a server does
not start. tests/deploy/test_replicas.py runs the same scenario and asserts.

Usage: python -m bench.failover [--sessions 40] [--before 5] [--after 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl

import websockets

from bench.harness import ROOT, descendants, free_port, start_server, stop_server, wait_healthy
from bench.session import Session, SessionError, Stats, WidgetState

NGINX_CONF = ROOT / "deploy" / "compose" / "nginx.conf"
PREDICTION_KEY = "prediction"  # tfviz.ui.kinds: st.container(key="prediction")
# The tabs the browsers spread over: cheap to draw, so 40 browsers fit on 2 cores.
TABS = ("Attention", "Before/after W_o")
TRAIN_TAB = "Train"
TRAINED_NAME = "failover_from_a"  # the model trained on replica A
# How a student's browser may name the proxy: a host name and a port (compose publishes 8501).
NAMED_HOST = "tfviz.test"
SESSION_TTL = 120  # server.disconnectedSessionTTL: the app's default (.streamlit/config.toml)
PAGE_ERRORS = ("exception", "error alert")  # bench/session.py's kinds for a failure on the page
LOG_FORMAT = "\t".join(
    ("$msec", "$request_time", "$http_cookie", "$sent_http_set_cookie", "$upstream_addr")
    + ("$status", "$request_uri")
)


# ---- the proxy ---------------------------------------------------------------------------------


def render_nginx_conf(text: str, ports: list[int], listen_port: int) -> str:
    """deploy/compose/nginx.conf for replicas on 127.0.0.1:ports, nginx on 127.0.0.1:listen_port.

    Only the upstream's `server` addresses and the `listen` port change; each `server` line keeps
    its parameters, and every other line (the cookie map, the hash, the headers) stays as it is.
    Raises ValueError when the file no longer has the shape this relies on (one upstream with one
    `server` line per port, one `listen`), so a changed config fails loudly instead of being
    tested half-rendered.
    """
    upstreams = list(re.finditer(r"upstream\s+\w+\s*\{(?P<body>[^}]*)\}", text))
    if len(upstreams) != 1:
        raise ValueError(f"expected one upstream block, found {len(upstreams)}")
    body = upstreams[0].group("body")
    server_line = re.compile(r"^(?P<lead>\s*server\s+)(?P<addr>[^\s;]+)", re.MULTILINE)
    found = server_line.findall(body)
    if len(found) != len(ports):
        raise ValueError(f"the upstream has {len(found)} server lines, {len(ports)} ports given")
    addresses = iter(f"127.0.0.1:{p}" for p in ports)
    body = server_line.sub(lambda m: m.group("lead") + next(addresses), body)
    start, end = upstreams[0].span("body")
    text = text[:start] + body + text[end:]
    text, listens = re.subn(r"^(\s*listen\s+)[^;]+;", rf"\g<1>127.0.0.1:{listen_port};", text,
                            flags=re.MULTILINE)  # fmt: skip
    if listens != 1:
        raise ValueError(f"expected one listen directive, found {listens}")
    return text


def nginx_path() -> str | None:
    """The nginx executable, or None where it is not installed."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def nginx_main_conf(prefix: Path, site: Path) -> str:
    """The top of nginx's config around the site: everything in prefix, foreground, one worker,
    and an access log that says which replica served each request and with which cookie."""
    temp = " ".join(
        f"{kind}_temp_path {prefix / kind};" for kind in ("client_body", "proxy", "fastcgi")
    )
    temp += f" uwsgi_temp_path {prefix / 'uwsgi'}; scgi_temp_path {prefix / 'scgi'};"
    return (
        f"pid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} warn;\n"
        "daemon off;\nworker_processes 1;\nevents { worker_connections 1024; }\n"
        f"http {{\n  {temp}\n  log_format failover '{LOG_FORMAT}';\n"
        f"  access_log {prefix / 'access.log'} failover;\n  include {site};\n}}\n"
    )


@dataclass
class LogLine:
    """One request in nginx's access log."""

    started: float  # time.time() when the request came in (a websocket: when it opened)
    route: str  # the sticky cookie, "name=value", sent or (first request) set
    upstreams: list[str]  # every replica tried, in order ("127.0.0.1:P")
    status: str
    uri: str


def parse_access_log(text: str) -> list[LogLine]:
    """The access log's lines (LOG_FORMAT); a route is the request's cookie if it sent one, else
    the cookie nginx set on it (a browser's first request)."""
    lines = []
    for raw in text.splitlines():
        parts = raw.split("\t", 6)
        if len(parts) != 7:
            continue
        logged, took, sent, set_cookie, upstream, status, uri = parts
        cookie = sent if sent != "-" else set_cookie.split(";", 1)[0]
        # nginx logs a request when it ends, a websocket when it closes: when it started is
        # the logged time less the time it took.
        started = float(logged) - float(took)
        upstreams = re.findall(r"\d+\.\d+\.\d+\.\d+:\d+", upstream)
        lines.append(LogLine(started, cookie.strip(), upstreams, status, uri))
    return lines


# ---- the replicas ------------------------------------------------------------------------------


class Replicas:
    """Two (or more) app servers sharing one user_models folder, and nginx in front of them.

    Use as a context manager: everything started is stopped on the way out, whatever happened.
    """

    def __init__(self, folder: Path, count: int = 2, app: str = "app.py"):
        self.folder, self.count, self.app = folder, count, app
        self.ports = [free_port() for _ in range(count)]
        self.servers: list[subprocess.Popen] = []
        self.nginx: subprocess.Popen | None = None
        self.port = free_port()
        self.prefix = folder / "nginx"
        self.killed: set[int] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/_stcore/stream"

    @property
    def user_models(self) -> Path:
        return self.folder / "user_models"  # bench/harness.py's start_server puts it there

    def address(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    def replica_of(self, address: str) -> int | None:
        return next((i for i in range(self.count) if self.address(i) == address), None)

    def server_log(self, i: int) -> Path:
        return self.folder / f"replica{i}.log"

    def __enter__(self) -> Replicas:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, startup_timeout: float = 180.0) -> None:
        """Start every server (together: each imports torch), then nginx; raise if one fails."""
        if nginx_path() is None:
            raise RuntimeError("nginx is not installed")
        for i, port in enumerate(self.ports):
            # One folder for all: start_server puts TFVIZ_USER_MODELS at folder/user_models.
            self.servers.append(
                start_server(port, SESSION_TTL, self.server_log(i), self.folder, self.app)
            )
        for i, proc in enumerate(self.servers):
            if not wait_healthy(f"http://{self.address(i)}", proc, startup_timeout):
                log = self.server_log(i).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"replica {i} did not start (exit {proc.poll()}):\n{log}")
        self.nginx = self.start_proxy(self.prefix, NGINX_CONF.read_text(), self.port)

    def start_proxy(self, prefix: Path, conf: str, port: int) -> subprocess.Popen:
        """nginx in the foreground with conf (nginx.conf's text) rendered for these replicas,
        listening on 127.0.0.1:port, its files in prefix; returns once it listens. The caller
        stops it (stop_server)."""
        prefix.mkdir()
        site = prefix / "tfviz.conf"
        site.write_text(render_nginx_conf(conf, self.ports, port))
        main = prefix / "nginx.conf"
        main.write_text(nginx_main_conf(prefix, site))
        with open(prefix / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                [nginx_path() or "nginx", "-p", str(prefix), "-c", str(main)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while True:  # until nginx listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    stop_server(proc)
                    err = (prefix / "stderr.log").read_text(errors="replace")
                    raise RuntimeError(f"nginx did not start listening: {err}") from None
                time.sleep(0.1)

    def kill(self, i: int) -> float:
        """SIGKILL replica i and anything it started, as a crash or an OOM kill would; returns
        time.monotonic() of the kill."""
        proc = self.servers[i]
        pids = descendants(proc.pid)
        at = time.monotonic()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.killed.add(i)
        return at

    def stop(self) -> None:
        """Stop nginx and every server still running (each by its own pid)."""
        if self.nginx is not None and self.nginx.poll() is None:
            stop_server(self.nginx)  # its workers too
        for proc in self.servers:
            if proc.poll() is None:
                stop_server(proc)

    def access_log(self) -> list[LogLine]:
        path = self.prefix / "access.log"
        return parse_access_log(path.read_text(errors="replace")) if path.exists() else []


# ---- a browser ---------------------------------------------------------------------------------


@dataclass
class Result:
    """One browser's story."""

    index: int
    route: str = ""  # its sticky cookie
    replica: int | None = None  # where nginx sent its first request
    view: str = ""  # the query string before the kill
    session_ids: list[str] = field(default_factory=list)  # one per connection
    resumed: bool = False  # its reload resumed its session (the same replica)
    lost: bool = False  # its websocket closed after the kill
    recovered: bool = False  # a page came back after that
    restored: bool = False  # ... showing what it showed
    noticed_s: float = math.nan  # kill -> its websocket seen closed
    recover_s: float = math.nan  # kill -> restored page finished
    view_after: str = ""  # the query string the app holds after the reconnect
    chosen: dict = field(default_factory=dict)  # the widgets' values it set (shown_view's keys)
    shown_after: dict = field(default_factory=dict)  # what the page showed after the reconnect
    page_errors: int = 0  # exceptions and error alerts on its pages
    other_errors: list[str] = field(default_factory=list)  # anything else that went wrong
    shows_prediction: bool = False  # its last page shows the prediction
    models_seen: list[str] = field(default_factory=list)  # its last page's model picker


class Browser(Session):
    """A browser behind the proxy: a cookie jar, a view it sets, and a reconnect after a crash."""

    def __init__(self, index: int, replicas: Replicas, rng: random.Random, timeout: float):
        super().__init__(replicas.ws_url, Stats(), rng, timeout, (0.3, 1.0))
        self.replicas, self.result = replicas, Result(index)

    async def get_cookie(self) -> None:
        """GET the page through nginx, as a browser first does, and keep the cookies it sets."""

        def fetch() -> list[str]:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
            with opener.open(self.replicas.base_url + "/", timeout=self.timeout) as r:
                r.read()
                return r.headers.get_all("Set-Cookie") or []

        jar = SimpleCookie()
        for header in await asyncio.to_thread(fetch):
            jar.load(header)
        if not jar:
            # Stickiness by client address (ip_hash) would put every loopback client on one
            # replica: this scenario needs the cookie the compose config sets.
            raise RuntimeError("nginx set no cookie: the config does not pin browsers by cookie")
        self.headers = {"Cookie": "; ".join(f"{k}={m.value}" for k, m in jar.items())}
        self.result.route = self.headers["Cookie"].split(";")[0]

    async def load(self, ws) -> None:
        """A page load on a new websocket: a new session unless the server resumes resume_id."""
        self.states.clear()
        self.page = type(self.page)()
        self.session_id = None  # so that a page without one cannot pass for a resumed session
        await self._request(ws)
        self.result.session_ids.append(self.session_id or "")

    async def set_view(self, ws) -> None:
        """A view of its own: model, sequence, W_o switch, a zeroed head (odd browsers), tab."""
        i = self.result.index
        models = [o for o in self.page.widgets["model"][1].options if "(bundled)" in o]
        chosen = self.result.chosen
        chosen["model"] = models[i % len(models)]
        self.choose("model", chosen["model"])
        await self._request(ws)
        self._set_sequence()
        w_o = self.page.widgets["w_o_mode"][1].options
        chosen["w_o_mode"] = w_o[1 + i % 3]  # off, zero, block-diagonal
        self.choose("w_o_mode", chosen["w_o_mode"])
        chosen["ablate"] = []
        if i % 2:
            heads = self.page.widgets["ablate"][1]
            chosen["ablate"] = [heads.options[i % len(heads.options)]]
            state = WidgetState(id=heads.id)
            state.string_array_value.data.extend(chosen["ablate"])
            self.states[heads.id] = state
        await self._request(ws)
        self.open_tab(TABS[i % len(TABS)])
        await self._request(ws)

    async def setup(self) -> None:
        """Cookie, page, view; then a reload, which must resume the same session."""
        await self.get_cookie()
        async with self.connect() as ws:
            await self.load(ws)
            await self.set_view(ws)
        self.query_string, self.resume_id = self.last_query or "", self.session_id

    async def live(self, stop: asyncio.Event, killed: asyncio.Event, kill_at: list[float]):
        """Reload, then type sequences until stop; after a crash, reconnect and go on."""
        result = self.result
        async with self.connect() as ws:
            await self.load(ws)
            ids = result.session_ids
            result.resumed = len(ids) == 2 and ids[0] == ids[1] != ""
            result.view = self.last_query or ""
            lost = await self.act(ws, stop)
        if not lost:
            return
        result.lost = True
        if not killed.is_set():  # nothing should close a websocket before the kill
            self.stats.error("closed socket", "the websocket closed before the kill")
            return
        result.noticed_s = time.monotonic() - kill_at[0]
        result.view = self.last_query or result.view
        await self.reconnect(stop, kill_at[0])

    async def act(self, ws, stop: asyncio.Event) -> bool:
        """Type a new sequence now and then until stop; True if the websocket closed under it."""
        while not stop.is_set():
            think = self.rng.uniform(*self.think)
            closed = asyncio.ensure_future(ws.wait_closed())
            stopped = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({closed, stopped}, timeout=think)
            for task in (closed, stopped):
                task.cancel()
            if closed in done:
                return True
            if stopped in done:
                return False
            self._set_sequence()
            try:
                await self._request(ws)
            except SessionError as e:
                if e.kind == "closed socket":
                    return True
                raise
            except websockets.exceptions.ConnectionClosed:
                return True
        return False

    async def reconnect(self, stop: asyncio.Event, kill_at: float) -> None:
        """What the browser does when its websocket dies: connect again (same cookie, offering
        its old session) with the address it holds, until a page comes back."""
        result = self.result
        self.query_string, self.resume_id = result.view, self.session_id
        self.last_query = None  # sync sends nothing when the address already holds the view
        deadline = time.monotonic() + self.timeout * 2
        while time.monotonic() < deadline:
            try:
                async with self.connect() as ws:
                    await self.load(ws)
                    result.recover_s = time.monotonic() - kill_at
                    result.recovered = True
                    result.view_after = self.last_query or self.query_string
                    # The sequence typed last is the one the address holds.
                    result.chosen["sequence"] = query_value(result.view, "sequence")
                    result.shown_after = shown_view(self.page)
                    result.restored = (
                        same_query(result.view_after, result.view)
                        and result.shown_after == result.chosen
                    )
                    self.query_string = result.view_after
                    await self.act(ws, stop)  # and carries on, on the other replica
                    return
            except SessionError as e:
                self.stats.error(e.kind, str(e))
            except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as e:
                self.stats.error("connection", f"{type(e).__name__}: {e}")
            await asyncio.sleep(0.5)  # the browser backs off between tries too

    def finish(self) -> Result:
        result = self.result
        for kind, n in self.stats.errors.items():
            if kind in PAGE_ERRORS:
                result.page_errors += n
        result.other_errors = [s for s in self.stats.samples if not s.startswith(PAGE_ERRORS)]
        result.shows_prediction = self.page.shows_code_in(PREDICTION_KEY)
        found = self.page.widgets.get("model")
        result.models_seen = list(found[1].options) if found else []
        return result


async def train_on(replicas: Replicas, replica: int, timeout: float, limit: float) -> str:
    """Train a tiny model through a browser that nginx sends to replica; return what went wrong
    ("" when the model is in the shared folder). Tries fresh cookies until one lands there."""
    target = replicas.user_models / f"{TRAINED_NAME}.safetensors"
    for attempt in range(30):
        browser = Browser(1000 + attempt, replicas, random.Random(attempt), timeout)
        await browser.get_cookie()
        if route_replicas(replicas, browser.result.route) == {replica}:
            break
    else:
        return f"no cookie of 30 landed on replica {replica}"
    async with browser.connect() as ws:
        await browser.load(ws)
        problem = await submit_training(browser, ws, TRAINED_NAME, steps=30)
        if problem:
            return problem
        deadline = time.monotonic() + limit
        while not target.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.25)  # the job runs in a worker thread of that replica
    if browser.stats.errors:
        return "; ".join(browser.stats.samples)
    return "" if target.exists() else f"no {target.name} after {limit:.0f} s"


async def submit_training(session: Session, ws, name: str, steps: int, d_model: str = "16") -> str:
    """Open the Train tab of a loaded page and submit a training of a small model; "" once the
    form was sent, else what the tab lacked. The job then runs in a worker thread of the server."""
    session.open_tab(TRAIN_TAB)
    await session._request(ws)
    widgets = session.page.widgets
    for key in ("train_name", "train_steps", "train_d_model", "train_submit"):
        if key not in widgets:
            return f"the Train tab has no {key!r}"
    name_id, steps_id = widgets["train_name"][1].id, widgets["train_steps"][1].id
    session.states[name_id] = WidgetState(id=name_id, string_value=name)
    session.states[steps_id] = WidgetState(id=steps_id, double_value=float(steps))
    session.choose("train_d_model", d_model)
    submit = widgets["train_submit"][1].id
    session.states[submit] = WidgetState(id=submit, trigger_value=True)
    await session._request(ws)
    del session.states[submit]
    return ""


def served(
    lines: list[LogLine],
    replicas: Replicas,
    route: str,
    after: float = 0.0,
    before: float = math.inf,
) -> set[int | None]:
    """The replicas that answered the route's requests started between after and before
    (time.time()); the last one tried is the one that answered."""
    return {
        replicas.replica_of(line.upstreams[-1]) if line.upstreams else None
        for line in lines
        if line.route == route and after <= line.started < before
    }


async def page_for(replicas: Replicas, cookie: str, query: str, timeout: float = 60.0) -> dict:
    """What a new page, opened through nginx with this cookie and address, shows (shown_view)."""
    browser = Browser(2000, replicas, random.Random(0), timeout)
    browser.headers, browser.query_string = {"Cookie": cookie}, query
    async with browser.connect() as ws:
        await browser.load(ws)
    return shown_view(browser.page)


async def named_host_page(replicas: Replicas, port: int, timeout: float = 60.0) -> str:
    """Open the app as a browser at http://NAMED_HOST:port does (Host and Origin both name the
    port), through the nginx on 127.0.0.1:port; "" when its page came, else what went wrong."""
    browser = Browser(3000, replicas, random.Random(0), timeout)
    url = f"ws://{NAMED_HOST}:{port}/_stcore/stream"
    try:
        async with websockets.connect(
            url,
            host="127.0.0.1",  # the name is never looked up: the socket goes to loopback
            port=port,
            origin=f"http://{NAMED_HOST}:{port}",
            subprotocols=["streamlit"],
            proxy=None,
            open_timeout=timeout,
        ) as ws:
            await browser.load(ws)
    except (OSError, websockets.exceptions.WebSocketException, SessionError, TimeoutError) as e:
        return f"{type(e).__name__}: {e}"
    if browser.stats.errors or not browser.page.shows_code_in(PREDICTION_KEY):
        return f"the page failed: {browser.stats.samples}"
    return ""


def route_replicas(replicas: Replicas, route: str) -> set[int | None]:
    """The replicas that answered the route's requests so far."""
    return served(replicas.access_log(), replicas, route)


def query_value(query: str, key: str) -> str | None:
    return dict(parse_qsl(query, keep_blank_values=True)).get(key)


def shown_view(page) -> dict:
    """The model, sequence, W_o switch and zeroed heads a page shows, read from the widgets the
    server drew: a value restored from the address comes with set_value, else the default."""
    shown: dict = {}
    for key in ("model", "w_o_mode"):
        found = page.widgets.get(key)
        if found is None:
            shown[key] = None
            continue
        proto = found[1]
        shown[key] = proto.raw_value if proto.set_value else proto.options[proto.default]
    found = page.widgets.get("sequence")
    proto = found[1] if found else None
    shown["sequence"] = None if proto is None else proto.value if proto.set_value else proto.default
    found = page.widgets.get("ablate")
    shown["ablate"] = list(found[1].raw_values) if found and found[1].set_value else []
    return shown


def same_query(a: str, b: str) -> bool:
    """Two query strings that set the same keys to the same values, in whatever order."""
    return sorted(parse_qsl(a, keep_blank_values=True)) == sorted(
        parse_qsl(b, keep_blank_values=True)
    )


# ---- the scenario ------------------------------------------------------------------------------


@dataclass
class Figures:
    """What one run measured."""

    sessions: int
    per_replica: list[int]  # browsers whose first request each replica served
    sticky: int  # browsers whose every request before the kill reached one replica
    resumed: int  # browsers whose reload resumed their session
    victim: int  # the replica killed
    on_victim: int  # browsers on it when it died
    lost: int  # browsers whose websocket closed
    recovered: int
    restored: int  # recovered showing the same view
    moved: int  # lost browsers whose reconnect was served by the other replica
    noticed_max_s: float  # kill -> the last lost websocket seen closed
    recover_min_s: float
    recover_median_s: float
    recover_max_s: float
    untouched: int  # browsers on the surviving replica that never lost their websocket
    error_pages: int  # browsers whose pages showed an exception or error alert
    no_prediction: int  # browsers whose last page lacks the prediction
    other_errors: int
    trained: str  # "" when the model trained on replica A was saved; else what went wrong
    listed_before: bool  # the model was in B's picker before it was trained (must be False)
    listed_on_b: int  # browsers on replica B whose picker lists it afterwards
    named_host: str  # "" when a browser at http://NAMED_HOST:port got its page; else why not
    setup_s: float
    elapsed_s: float
    samples: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)


async def scenario(
    replicas: Replicas,
    sessions: int = 40,
    before: float = 5.0,
    after: float = 5.0,
    timeout: float = 60.0,
    seed: int = 0,
    log=print,
) -> Figures:
    """Browsers set their views, a model is trained on replica 0, replica 0 is killed, and the
    browsers it held come back on replica 1; the figures of it all."""
    t0 = time.monotonic()
    master = random.Random(seed)
    browsers = [
        Browser(i, replicas, random.Random(master.random()), timeout) for i in range(sessions)
    ]

    async def setup(b: Browser) -> None:
        await asyncio.sleep(b.rng.uniform(0, 2.0))  # browsers arrive over two seconds
        await b.setup()

    await asyncio.wait_for(asyncio.gather(*(setup(b) for b in browsers)), timeout * 2)
    setup_s = time.monotonic() - t0
    log(f"{sessions} browsers set their views in {setup_s:.1f} s")

    stop, killed = asyncio.Event(), asyncio.Event()
    kill_at: list[float] = []
    tasks = [asyncio.create_task(b.live(stop, killed, kill_at)) for b in browsers]
    # A model trained on replica 0 meanwhile: first, replica 1 must not list it yet.
    victim, survivor = 0, 1
    lines = replicas.access_log()
    for b in browsers:  # where its first request went (GET /, logged at once)
        mine = [x for x in lines if x.route == b.result.route and x.upstreams]
        first = min(mine, key=lambda x: x.started, default=None)
        b.result.replica = replicas.replica_of(first.upstreams[-1]) if first else None
    on_b = [b for b in browsers if b.result.replica == survivor]
    listed_before = any(TRAINED_NAME in o for b in on_b for o in b.page.widgets["model"][1].options)
    try:
        trained = await train_on(replicas, victim, timeout, limit=90)
    except (OSError, websockets.exceptions.WebSocketException, SessionError, TimeoutError) as e:
        trained = f"{type(e).__name__}: {e}"
    log(f"trained on replica {victim}: {trained or 'saved'}")
    await asyncio.sleep(before)

    wall_kill = time.time()
    kill_at.append(replicas.kill(victim))
    killed.set()
    log(f"replica {victim} killed with SIGKILL")
    lost_deadline = time.monotonic() + timeout
    on_victim = [b for b in browsers if b.result.replica == victim]
    while time.monotonic() < lost_deadline and not all(
        b.result.recovered for b in on_victim if b.result.lost
    ):
        await asyncio.sleep(0.2)
    await asyncio.sleep(after)
    stop.set()
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    samples = [f"{type(t.exception()).__name__}: {t.exception()}" for t in done if t.exception()]
    samples += ["a browser did not end"] * len(pending)

    results = [b.finish() for b in browsers]
    named_host = await named_host_page(replicas, replicas.port, timeout)
    for r, t in zip(results, tasks, strict=True):
        if t.done() and not t.cancelled() and t.exception():
            r.other_errors.append(str(t.exception()))
    log_lines = replicas.access_log()
    sticky = moved = 0
    for r in results:
        # Every request begun before the kill (the page, both websockets) on one replica; a
        # browser on the survivor keeps its websocket, so that is all of its requests.
        sticky += len(served(log_lines, replicas, r.route, before=wall_kill)) == 1
        if r.lost:  # its requests after the kill: all answered by the survivor
            moved += served(log_lines, replicas, r.route, after=wall_kill) == {survivor}
    recovered = [r for r in results if r.recovered]
    times = [r.recover_s for r in recovered]
    return Figures(
        sessions=sessions,
        per_replica=[sum(r.replica == i for r in results) for i in range(replicas.count)],
        sticky=sticky,
        resumed=sum(r.resumed for r in results),
        victim=victim,
        on_victim=len(on_victim),
        lost=sum(r.lost for r in results),
        recovered=len(recovered),
        restored=sum(r.restored for r in recovered),
        moved=moved,
        noticed_max_s=max((r.noticed_s for r in results if r.lost), default=math.nan),
        recover_min_s=min(times) if times else math.nan,
        recover_median_s=statistics.median(times) if times else math.nan,
        recover_max_s=max(times) if times else math.nan,
        untouched=sum(r.replica == survivor and not r.lost for r in results),
        error_pages=sum(r.page_errors > 0 for r in results),
        no_prediction=sum(not r.shows_prediction for r in results),
        other_errors=sum(bool(r.other_errors) for r in results),
        trained=trained,
        listed_before=listed_before,
        listed_on_b=sum(any(TRAINED_NAME in o for o in r.models_seen) for r in results),
        named_host=named_host,
        setup_s=setup_s,
        elapsed_s=time.monotonic() - t0,
        samples=(samples + [e for r in results for e in r.other_errors])[:8],
        results=[asdict(r) for r in results],
    )


def report(f: Figures) -> bool:
    """Print the figures and the verdict; True when every check held."""
    n = f.sessions
    spread = ", ".join(f"replica {i}: {k}" for i, k in enumerate(f.per_replica))
    print(f"sessions per replica: {spread}")
    print(f"sticky (every request before the kill on one replica): {f.sticky}/{n}")
    print(f"reload resumed its session (same replica, same session id): {f.resumed}/{n}")
    print(
        f"killed replica {f.victim} (SIGKILL) holding {f.on_victim} sessions: {f.lost} lost their "
        f"websocket, {f.recovered} came back ({f.moved} served by the other replica), "
        f"{f.restored} showing the same view"
    )
    print(
        f"time to recover (kill -> restored page): min {f.recover_min_s:.2f} s, median "
        f"{f.recover_median_s:.2f} s, max {f.recover_max_s:.2f} s (every lost websocket seen "
        f"closed within {f.noticed_max_s:.2f} s)"
    )
    print(f"sessions on the other replica that kept their websocket: {f.untouched}")
    print(
        f"pages with an exception or error alert: {f.error_pages}; without the prediction: "
        f"{f.no_prediction}; sessions with other errors: {f.other_errors}"
    )
    for sample in f.samples:
        print(f"  e.g. {sample[:300]}")
    print(
        f"model trained on replica {f.victim}: {f.trained or 'saved'}; listed on the other "
        f"replica before: {f.listed_before}; after, in the picker of {f.listed_on_b}/{n} sessions"
    )
    print(f"a browser at http://{NAMED_HOST}:<port>: {f.named_host or 'page loaded'}")
    print(
        f"setup {f.setup_s:.1f} s, whole run {f.elapsed_s:.1f} s, "
        f"{len(os.sched_getaffinity(0))} cores"
    )
    ok = (
        min(f.per_replica) > 0
        and f.sticky == n
        and f.resumed == n
        and f.lost == f.on_victim
        and f.recovered == f.lost
        and f.restored == f.lost
        and f.moved == f.lost
        and f.untouched == n - f.on_victim
        and f.error_pages == f.no_prediction == f.other_errors == 0
        and not f.trained
        and not f.listed_before
        and f.listed_on_b == n
        and not f.named_host
    )
    print(f"verdict: {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=40, help="browsers (default 40)")
    p.add_argument("--before", type=float, default=5.0, help="seconds of typing before the kill")
    p.add_argument("--after", type=float, default=5.0, help="seconds of typing after recovery")
    p.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    if args.sessions < 2:
        p.error("need --sessions >= 2")
    print(
        f"tfviz failover: 2 replicas behind {NGINX_CONF.relative_to(ROOT)}, "
        f"{args.sessions} sessions"
    )
    with tempfile.TemporaryDirectory(prefix="tfviz-failover-") as tmp:
        try:
            with Replicas(Path(tmp)) as replicas:
                figures = asyncio.run(
                    scenario(
                        replicas, args.sessions, args.before, args.after, args.timeout, args.seed
                    )
                )
        except RuntimeError as e:
            print(e)
            return 1
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
