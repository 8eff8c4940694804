"""Load benchmark: N concurrent sessions against a local tfviz server, over Streamlit's websocket.

Each session speaks the protocol the browser speaks (protobuf BackMsg / ForwardMsg on
ws://HOST/_stcore/stream), without a browser: it loads the page, then until the time is up it
types a new random valid sequence for the shown model's task, toggles W_o between "learned" and
"off", and waits a random think time between actions. Printed: requests, errors, p50/p95 rerun
latency, and the server's memory (VmRSS, children included) at start, per session at peak and
after every session has closed.

Targets on 2 cores: 40 sessions with 0 errors, p95 rerun latency under 2 s, memory back within 10%
of its start once the sessions close. The script says whether each is met and exits 0 either way
(a benchmark, not a test), unless the server fails to start (exit 1).

With --models toy,minilm the benchmark runs once per entry, each on a fresh server: "toy" is
the plain run above (the opening toy model); "minilm" has every session pick the pretrained
all-MiniLM-L6-v2 first and type sentences into sentence A. Then the ratio of the two runs' peak
memory is printed (issue 9's target: within 1.5x), and the MiniLM run's memory per session is
set against the model's own size: sessions share one copy (st.cache_resource), so each adds far
less than a model.

With --models decoder (issue 32) the server's $TFVIZ_PRETRAINED_DIR holds one random decoder of a
real model's sizes (--decoder llama: SmolLM-135M's, as bench/hf_decoders.py builds it; gpt2,
qwen2), every session picks it first and types texts of 5 to 20 words, toggling W_o as above;
its memory per session is set against the decoder's weights in the same way. A decoder's rerun
costs one traced pass of ~135-500 M parameters (two with W_o off), so it is run with fewer
sessions or longer think times than the toy run's 40 on two cores.

Usage: python -m bench.load [--sessions 40] [--seconds 60] [--port P]
       python -m bench.load --models toy,minilm [--seconds 60]
       python -m bench.load --models decoder [--decoder llama] [--sessions 10]
       python -m bench.load --url http://127.0.0.1:8501 [--pid PID]   (a server already running)

Protocol notes (streamlit 1.67):
- Connect with subprotocol "streamlit"; no XSRF token or cookie is needed for the websocket (the
  token in the subprotocol list only guards the auth cookie), and no Origin header is allowed.
- Nothing runs until the client sends BackMsg.rerun_script (a ClientState; empty query string,
  page hash and widget states for the first load). Every run is answered by ForwardMsg
  new_session (metadata.run.script_run_id names the run), deltas (elements; a widget's proto
  carries its `id`, "$$ID-<hash>-<user key>" for keyed widgets), then script_finished with the
  same run id. A rerun's latency is from sending rerun_script to that script_finished.
- Widget values go in ClientState.widget_states as WidgetState(id, <value>): text_input and radio
  take string_value (the radio's formatted option label), segmented_control / pills a
  string_array_value, selectbox string_value, checkbox / toggle bool_value. Widgets left out keep
  the value they had on the server.
- Disconnected sessions stay on the server for server.disconnectedSessionTTL seconds (for
  reconnection); the server started here gets --session-ttl, and memory after close is measured
  once that has passed and one short session (the poke) has come and gone, which makes the
  server drop expired sessions.
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
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.server import free_port, healthy, streamlit_command

ROOT = Path(__file__).resolve().parent.parent


TARGET_SESSIONS = 40
TARGET_P95_S = 2.0
TARGET_MEMORY_RATIO = 0.10
TARGET_MINILM_MEMORY = 1.5  # peak memory with MiniLM / the same run on toy models (issue 9)
MODEL_KEY = "model"
MODELS = ("toy", "minilm", "decoder")  # what --models takes
# Words for MiniLM's sentences: any text will do, these keep every sentence in its vocabulary.
WORDS = (
    "the a man woman child dog cat bird house car road river city park music song book table "
    "plays reads sees finds likes takes holds gives makes walks runs sings near under over "
    "with without after before big small old new red green happy quiet fast slow today"
).split()
SEQUENCE_KEY = "sequence"
W_O_KEY = "w_o_mode"
VIEW_KEY = "view"  # app.py: st.tabs(..., key="view")
FINISHED_OK = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")
FINISHED_COMPILE_ERROR = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_WITH_COMPILE_ERROR")
# "1 to 16 characters from: abcdefghij" (the text box's help) or the sidebar's "Alphabet: ..." text
HELP_RE = re.compile(r"(\d+) to (\d+) characters from: (\S+)")
ALPHABET_RE = re.compile(r"Alphabet: (\S+)\s+Length: (\d+) to (\d+)")
MAX_ERROR_SAMPLES = 5


class SessionError(Exception):
    """A request that failed; kind is the error counter it goes to."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


# ---- results ----------------------------------------------------------------------------------


@dataclass
class Stats:
    """What every session adds to as it goes."""

    requests: int = 0  # rerun_script BackMsgs sent (page loads included)
    page_loads: list[float] = field(default_factory=list)  # seconds, first run of a connection
    reruns: list[float] = field(default_factory=list)  # seconds, runs with changed widgets
    errors: Counter = field(default_factory=Counter)  # kind -> count
    warnings: int = 0  # exception elements marked is_warning (deprecations): not errors
    samples: list[str] = field(default_factory=list)  # a few error messages, to show

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        if len(self.samples) < MAX_ERROR_SAMPLES:
            self.samples.append(f"{kind}: {detail}"[:300])


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank; nan when there is no value."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# ---- server memory ----------------------------------------------------------------------------


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


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of pid and its children so far, in seconds; None once pid is gone."""
    ticks, seen = 0, False
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        seen = True
    return ticks / os.sysconf("SC_CLK_TCK") if seen else None


def rss_bytes(pid: int) -> int | None:
    """VmRSS of pid and its children, in bytes; None once pid is gone."""
    total, seen = 0, False
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        seen = True
                        break
        except OSError:
            continue
    return total if seen else None


async def settled_rss(pid: int, samples: int = 3, gap: float = 0.5) -> int | None:
    """The smallest of a few readings, so a transient allocation does not count."""
    values = []
    for i in range(samples):
        if i:
            await asyncio.sleep(gap)
        value = rss_bytes(pid)
        if value is not None:
            values.append(value)
    return min(values) if values else None


class PeakSampler:
    """Reads the server's RSS every interval until stopped; keeps the largest."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            value = rss_bytes(self.pid)
            if value is not None:
                self.peak = max(self.peak, value)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> int:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        value = rss_bytes(self.pid)
        if value is not None:
            self.peak = max(self.peak, value)
        return self.peak


# ---- one browser session, over the websocket ---------------------------------------------------


@dataclass
class Page:
    """What one run showed that the session needs: widget protos and the task's alphabet."""

    # user key (or id) -> (element type, widget proto)
    widgets: dict[str, tuple[str, object]] = field(default_factory=dict)
    alphabet: str | None = None
    min_len: int = 1
    max_len: int = 16
    # Keyed containers (user key -> delta path) and the code blocks drawn, by delta path: enough
    # to tell whether a container (the prediction, key "prediction") shows its st.code.
    blocks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    code_paths: list[tuple[int, ...]] = field(default_factory=list)
    # Keyed st.tabs (a widget whose value is the open tab's label): user key -> (widget id, the
    # tab bar's delta path), and each bar's tab labels in order, by that path.
    tab_bars: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    tab_labels: dict[tuple[int, ...], list[str]] = field(default_factory=dict)

    @property
    def sentence(self) -> bool:
        """A sentence model's page: two sentence boxes, any text."""
        return "sentence_b" in self.widgets

    @property
    def free_text(self) -> bool:
        """A page whose box takes any text: a sentence model's, or a decoder's one text box
        (a toy task's box names its alphabet in its help)."""
        return self.sentence or (SEQUENCE_KEY in self.widgets and self.alphabet is None)

    def shows_code_in(self, key: str) -> bool:
        """Whether the container with this user key holds a code block (st.code)."""
        path = self.blocks.get(key)
        return path is not None and any(p[: len(path)] == path for p in self.code_paths)

    def replaced(self, path: tuple[int, ...]) -> None:
        """A new element or block at path replaces whatever was there, and all below it."""
        self.code_paths = [p for p in self.code_paths if p[: len(path)] != path]
        self.blocks = {k: p for k, p in self.blocks.items() if p[: len(path)] != path}
        self.tab_bars = {k: v for k, v in self.tab_bars.items() if v[1][: len(path)] != path}
        self.tab_labels = {p: v for p, v in self.tab_labels.items() if p[: len(path)] != path}

    def tabs(self, key: str) -> tuple[str, list[str]] | None:
        """The keyed tab bar's widget id and tab labels, or None if the page has none."""
        found = self.tab_bars.get(key)
        if found is None:
            return None
        widget_id, path = found
        return widget_id, self.tab_labels.get(path, [])

    def find(self, key: str, label: str) -> tuple[str, object] | None:
        if key in self.widgets:
            return self.widgets[key]
        for kind, proto in self.widgets.values():
            if getattr(proto, "label", None) == label:
                return kind, proto
        return None


def user_key(widget_id: str) -> str:
    """The user key of a keyed widget's id ("$$ID-<hash>-<key>"), else the id itself."""
    if widget_id.startswith("$$ID-"):
        parts = widget_id.split("-", 2)
        if len(parts) == 3 and parts[2] != "None":
            return parts[2]
    return widget_id


class Session:
    """A simulated user: loads the page, then types sequences and toggles W_o until the deadline.

    model: the start of a model picker option ("all-MiniLM-L6-v2") to pick right after the page
    load, or None to stay on the opening model.
    headers: extra HTTP headers of the websocket handshake (a proxy's sticky-session cookie).
    query_string: the address's query string, sent with every rerun as the browser sends it.
    After each run, last_query holds the query string the app last wrote into the address
    (st.query_params; None until it writes one) and session_id the server's id of the session;
    resume_id, when set, is offered on the next connect as the session to resume, as the
    browser does when it reconnects.
    """

    def __init__(
        self,
        ws_url: str,
        stats: Stats,
        rng: random.Random,
        timeout: float,
        think: tuple[float, float],
        model: str | None = None,
        headers: dict[str, str] | None = None,
        query_string: str = "",
    ):
        self.ws_url, self.stats, self.rng = ws_url, stats, rng
        self.timeout, self.think, self.model = timeout, think, model
        self.headers, self.query_string = headers, query_string
        self.last_query: str | None = None
        self.session_id: str | None = None
        self.resume_id: str | None = None
        self.page = Page()
        self.states: dict[str, WidgetState] = {}  # widget id -> the value this user set
        self.w_o_off = False

    async def run(self, deadline: float, load_only: bool = False) -> None:
        """Connect and act until the deadline; after a failure, reconnect while time is left.

        load_only: load the page once (and pick the session's model, if it has one) and leave
        (the warm-up and the poke).
        """
        while time.monotonic() < deadline:
            try:
                async with self.connect() as ws:
                    await self._act(ws, deadline, load_only)
                return
            except SessionError as e:
                self.stats.error(e.kind, str(e))
            except websockets.exceptions.ConnectionClosed as e:
                self.stats.error("closed socket", f"{type(e).__name__}: {e}")
            except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as e:
                self.stats.error("connection", f"{type(e).__name__}: {e}")
            # Back off a little before reconnecting, so a dead server is not hammered.
            await asyncio.sleep(1.0)

    def connect(self):
        """The websocket to the server, opened as the browser opens it (an async context).

        The subprotocol list carries the XSRF token second and the session to resume third; the
        token only guards an auth cookie, which this app does not use, so a placeholder fills
        its place when a session is to be resumed.
        """
        protocols = ["streamlit"] if self.resume_id is None else ["streamlit", "x", self.resume_id]
        return websockets.connect(
            self.ws_url,
            subprotocols=protocols,
            additional_headers=self.headers,
            proxy=None,  # a loopback server: never through an HTTP proxy from the environment
            max_size=None,
            ping_interval=None,  # the browser sends no pings either
            open_timeout=self.timeout,
            close_timeout=5,
        )

    async def _act(self, ws, deadline: float, load_only: bool) -> None:
        self.states.clear()  # a new connection is a new session on the server
        self.page = Page()
        self.w_o_off = False
        self.stats.page_loads.append(await self._request(ws))
        step = 0
        if self.model is not None:
            self._pick_model()
            self.stats.reruns.append(await self._request(ws))
            if not self.page.free_text:
                raise SessionError("widget", f"picking {self.model} showed no text box")
        if load_only:
            return
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.uniform(*self.think))
            if time.monotonic() >= deadline:
                break
            if step % 2 == 0:
                self._set_sequence()
            else:
                self._toggle_w_o()
            step += 1
            self.stats.reruns.append(await self._request(ws))

    def choose(self, key: str, option: str | None = None, index: int | None = None) -> None:
        """Set a selectbox or radio to an option (by its label or index)."""
        found = self.page.widgets.get(key)
        if found is None:
            raise SessionError("widget", f"no widget {key!r} on the page")
        proto = found[1]
        options = list(proto.options)
        value = option if option is not None else options[index % len(options)]
        self.states[proto.id] = WidgetState(id=proto.id, string_value=value)

    def open_tab(self, label: str) -> None:
        found = self.page.tabs(VIEW_KEY)
        if found is None or label not in found[1]:
            raise SessionError("widget", f"no tab {label!r}: {found}")
        self.states[found[0]] = WidgetState(id=found[0], string_value=label)

    def _pick_model(self) -> None:
        found = self.page.find(MODEL_KEY, "Model")
        if found is None:
            raise SessionError("widget", "no model picker with key 'model' on the page")
        _, proto = found
        option = next((o for o in proto.options if o.startswith(self.model)), None)
        if option is None:
            raise SessionError("widget", f"no {self.model} in the model picker: {proto.options}")
        self.states[proto.id] = WidgetState(id=proto.id, string_value=option)

    def _set_sequence(self) -> None:
        found = self.page.find(SEQUENCE_KEY, "Sequence")
        if found is None:
            raise SessionError("widget", "no text box with key 'sequence' on the page")
        _, proto = found
        if self.page.free_text:  # (sentence A) a few words, another sentence each time
            words = self.rng.choices(WORDS, k=self.rng.randint(5, 20))
            text = " ".join(words).capitalize() + "."
            self.states[proto.id] = WidgetState(id=proto.id, string_value=text)
            return
        alphabet = self.page.alphabet or "0123456789"
        lo = max(self.page.min_len, min(8, self.page.max_len))
        hi = max(lo, min(16, self.page.max_len))
        text = "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(lo, hi)))
        self.states[proto.id] = WidgetState(id=proto.id, string_value=text)

    def _toggle_w_o(self) -> None:
        found = self.page.find(W_O_KEY, "W_o")
        if found is None:
            raise SessionError("widget", "no W_o widget with key 'w_o_mode' on the page")
        kind, proto = found
        self.w_o_off = not self.w_o_off
        if kind in ("checkbox", "toggle"):
            self.states[proto.id] = WidgetState(id=proto.id, bool_value=self.w_o_off)
            return
        if kind == "button_group":
            options = [o.content for o in proto.options]
        else:  # radio, selectbox
            options = list(proto.options)
        off = next((o for o in options if "off" in o or "identity" in o), None)
        learned = next((o for o in options if "learned" in o), None)
        if off is None or learned is None:
            raise SessionError("widget", f"W_o options without learned / off: {options}")
        label = off if self.w_o_off else learned
        if kind == "button_group":
            state = WidgetState(id=proto.id)
            state.string_array_value.data.append(label)
        else:
            state = WidgetState(id=proto.id, string_value=label)
        self.states[proto.id] = state

    async def _request(self, ws) -> float:
        """Send rerun_script with this user's widget values; seconds until its run finished."""
        msg = BackMsg()
        client = msg.rerun_script
        client.query_string = self.query_string
        client.page_script_hash = ""
        client.widget_states.SetInParent()
        client.widget_states.widgets.extend(self.states.values())
        client.context_info.timezone = "UTC"
        client.context_info.timezone_offset = 0
        client.context_info.locale = "en-US"
        client.context_info.url = self.ws_url.replace("ws://", "http://").split("/_stcore")[0]
        client.context_info.is_embedded = False
        client.context_info.color_scheme = "light"
        started = time.monotonic()
        self.stats.requests += 1
        await ws.send(msg.SerializeToString())

        run_id: str | None = None  # the run the server started for this request
        page = Page()
        problems: list[tuple[str, str]] = []
        while True:
            left = started + self.timeout - time.monotonic()
            if left <= 0:
                raise SessionError("timeout", f"no script_finished within {self.timeout:.0f} s")
            try:
                raw = await asyncio.wait_for(ws.recv(), left)
            except TimeoutError:
                continue  # reported by the check above
            except websockets.exceptions.ConnectionClosed as e:
                raise SessionError("closed socket", f"server closed the websocket: {e}") from e
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "page_info_changed":  # the app rewrote the address (st.query_params)
                self.last_query = fwd.page_info_changed.query_string
            if kind == "new_session":
                run_id = fwd.metadata.run.script_run_id
                self.session_id = fwd.new_session.initialize.session_id or self.session_id
                page = Page()
                problems.clear()
            elif run_id is None:
                continue  # left over from an earlier run
            elif kind == "delta":
                self._read_delta(fwd, page, problems)
            elif kind == "session_event":
                event = fwd.session_event
                if event.WhichOneof("type") == "script_compilation_exception":
                    problems.append(("exception", event.script_compilation_exception.message))
            elif kind == "page_not_found":
                problems.append(("exception", "page not found"))
            elif kind == "script_finished":
                finished_run = fwd.metadata.run.script_run_id
                if finished_run and finished_run != run_id:
                    continue
                status = fwd.script_finished
                if status == FINISHED_COMPILE_ERROR:
                    problems.append(("exception", "script failed to compile"))
                elif status != FINISHED_OK:
                    continue  # ended early for a rerun (st.rerun) or a fragment run: wait on
                elapsed = time.monotonic() - started
                break
        if page.widgets:
            self.page = page
        for kind, detail in problems:  # counted; the user carries on, as a person would
            self.stats.error(kind, detail)
        return elapsed

    def _read_delta(self, fwd: ForwardMsg, page: Page, problems: list[tuple[str, str]]) -> None:
        delta = fwd.delta
        change = delta.WhichOneof("type")
        path = tuple(fwd.metadata.delta_path)
        if change in ("new_element", "add_block"):
            page.replaced(path)  # an st.empty slot refilled: what it held is gone
        if change == "add_block" and delta.add_block.id:
            page.blocks[user_key(delta.add_block.id)] = path
        if change == "add_block":
            block = delta.add_block
            if block.WhichOneof("type") == "tab_container" and block.tab_container.id:
                page.tab_bars[user_key(block.tab_container.id)] = (block.tab_container.id, path)
            elif block.WhichOneof("type") == "tab":
                page.tab_labels.setdefault(path[:-1], []).append(block.tab.label)
        if change != "new_element":
            return
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind is None:
            return
        proto = getattr(element, kind)
        if kind == "exception":
            if proto.is_warning:
                self.stats.warnings += 1
            else:
                problems.append(("exception", f"{proto.type}: {proto.message}"))
        elif kind == "alert" and proto.format == Alert.ERROR:
            problems.append(("error alert", proto.body))
        elif kind == "code":
            page.code_paths.append(path)
        elif kind == "text":
            match = ALPHABET_RE.search(proto.body)
            if match and page.alphabet is None:
                page.alphabet = match.group(1)
                page.min_len, page.max_len = int(match.group(2)), int(match.group(3))
        widget_id = getattr(proto, "id", "")
        if isinstance(widget_id, str) and widget_id:
            page.widgets[user_key(widget_id)] = (kind, proto)
            if kind == "text_input" and user_key(widget_id) == SEQUENCE_KEY:
                match = HELP_RE.search(proto.help)
                if match:
                    page.min_len, page.max_len = int(match.group(1)), int(match.group(2))
                    page.alphabet = match.group(3)


# ---- the server ---------------------------------------------------------------------------------


def start_server(
    port: int, ttl: int, log_path: Path, env_dir: Path, app: str, models_dir: Path | None = None
) -> subprocess.Popen:
    """`streamlit run app.py` on 127.0.0.1:port, with a private user models folder (and
    models_dir as the server's folder of model folders, $TFVIZ_PRETRAINED_DIR)."""
    env = dict(os.environ)
    env["TFVIZ_USER_MODELS"] = str(env_dir / "user_models")
    if models_dir is not None:
        env["TFVIZ_PRETRAINED_DIR"] = str(models_dir)
    cmd = streamlit_command(app, port, f"--server.disconnectedSessionTTL={ttl}")
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


def wait_healthy(base_url: str, proc: subprocess.Popen | None, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if healthy(base_url):
            return True
        time.sleep(0.5)
    return False


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server and anything it started, by pid; kill what does not stop."""
    pids = [p for p in descendants(proc.pid) if p != proc.pid] if proc.poll() is None else []
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


# ---- the benchmark ---------------------------------------------------------------------------


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


async def one_page_load(ws_url: str, timeout: float, stats: Stats) -> None:
    """Load the page once and leave: warms the server's caches, or pokes it after the run."""
    session = Session(ws_url, stats, random.Random(0), timeout, (0.0, 0.0))
    await session.run(time.monotonic() + timeout, load_only=True)


async def one_model_pick(ws_url: str, timeout: float, stats: Stats, model: str) -> None:
    """Load the page, pick the model once and leave: the server loads it (once per process)."""
    session = Session(ws_url, stats, random.Random(0), timeout, (0.0, 0.0), model)
    await session.run(time.monotonic() + timeout, load_only=True)


async def bench(args, base_url: str, pid: int | None, model: str | None = None) -> dict:
    """One run; model: the picker option every session picks first (None: the opening one)."""
    ws_url = base_url.replace("http://", "ws://").replace("https://", "wss://") + "/_stcore/stream"
    result: dict = {"sessions": args.sessions, "seconds": args.seconds, "url": base_url}
    result["model"] = model or "toy"

    cold = rss_bytes(pid) if pid else None
    # Warm-up: the first page load imports torch, loads the checkpoints and fills caches, which
    # every later session shares; memory "at start" is measured after it. A model the sessions
    # pick is picked by it too, so that "at start" holds that model once and the growth per
    # session shows whether each session holds one more.
    warm_stats = Stats()
    if model is None:
        await one_page_load(ws_url, args.timeout * 2, warm_stats)
    else:
        await one_model_pick(ws_url, args.timeout * 2, warm_stats, model)
    result["warmup_errors"] = sum(warm_stats.errors.values())
    result["warmup_samples"] = warm_stats.samples
    start = await settled_rss(pid) if pid else None

    stats = Stats()
    sampler = PeakSampler(pid) if pid else None
    if sampler:
        sampler.start()
    cpu0 = cpu_seconds(pid) if pid else None
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    master = random.Random(args.seed)

    async def user(i: int) -> None:
        rng = random.Random(master.random())
        await asyncio.sleep(rng.uniform(0, args.ramp))  # users arrive over the ramp
        think = (args.think_min, args.think_max)
        await Session(ws_url, stats, rng, args.timeout, think, model).run(deadline)

    # A session ends at the deadline after its request in flight (timeout bounded); this bound
    # only guards against a hung connection.
    tasks = [asyncio.create_task(user(i)) for i in range(args.sessions)]
    _, pending = await asyncio.wait(tasks, timeout=args.seconds + args.ramp + args.timeout + 30)
    for task in pending:
        task.cancel()
        stats.error("hung", "a session did not end")
    await asyncio.gather(*pending, return_exceptions=True)
    elapsed = time.monotonic() - t0
    cpu1 = cpu_seconds(pid) if pid else None
    load1 = os.getloadavg()[0]
    peak = await sampler.stop() if sampler else None

    after = None
    if pid:
        # Closed sessions stay for reconnection for the TTL; then one more session comes and
        # goes, which makes the server drop the expired ones, and the memory is read.
        await asyncio.sleep(args.settle)
        poke_stats = Stats()
        await one_page_load(ws_url, args.timeout, poke_stats)
        await asyncio.sleep(1.0)
        after = await settled_rss(pid)

    result.update(
        elapsed=elapsed,
        requests=stats.requests,
        page_loads=len(stats.page_loads),
        reruns=len(stats.reruns),
        errors=sum(stats.errors.values()),
        errors_by_kind=dict(stats.errors),
        error_samples=stats.samples,
        warnings=stats.warnings,
        page_load_p50=percentile(stats.page_loads, 50),
        page_load_p95=percentile(stats.page_loads, 95),
        rerun_p50=percentile(stats.reruns, 50),
        rerun_p95=percentile(stats.reruns, 95),
        rerun_max=max(stats.reruns) if stats.reruns else math.nan,
        rss_cold=cold,
        rss_start=start,
        rss_peak=peak,
        rss_per_session=(peak - start) / args.sessions if peak and start else None,
        rss_after=after,
        server_cpu=cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        loadavg=(load0, load1),
        cores=len(os.sched_getaffinity(0)),
    )
    return result


def report(r: dict) -> None:
    """Print the figures and whether each target is met."""
    print(f"tfviz load benchmark: {r['sessions']} sessions for {r['seconds']:g} s on {r['url']}")
    if r["model"] != "toy":
        print(f"every session picks {r['model']} first")
    if r["warmup_errors"]:
        print(f"warm-up page load failed: {'; '.join(r['warmup_samples'])}")
    print(
        f"requests: {r['requests']} ({r['page_loads']} page loads, {r['reruns']} reruns) "
        f"in {r['elapsed']:.1f} s, {r['requests'] / max(r['elapsed'], 1e-9):.1f}/s"
    )
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["errors_by_kind"].items()))
    print(f"errors: {r['errors']}" + (f" ({kinds})" if kinds else ""))
    for sample in r["error_samples"]:
        print(f"  e.g. {sample}")
    if r["warnings"]:
        print(f"warnings shown by the app (not errors): {r['warnings']}")
    if r["server_cpu"] is not None:
        cpu = r["server_cpu"]
        print(
            f"server CPU: {cpu:.1f} s in {r['elapsed']:.1f} s ({cpu / r['elapsed']:.2f} cores), "
            f"{1000 * cpu / max(r['requests'], 1):.0f} ms per request"
        )
    print(
        f"machine: {r['cores']} cores, load average {r['loadavg'][0]:.1f} at start, "
        f"{r['loadavg'][1]:.1f} at end (the server and these sessions included)"
    )
    print(f"page load latency: p50 {r['page_load_p50']:.3f} s, p95 {r['page_load_p95']:.3f} s")
    print(
        f"rerun latency: p50 {r['rerun_p50']:.3f} s, p95 {r['rerun_p95']:.3f} s, "
        f"max {r['rerun_max']:.3f} s"
    )
    if r["rss_start"] is None:
        print("memory: skipped (no server pid; pass --pid with --url)")
    else:
        print(
            f"memory at start: {mib(r['rss_start'])} (before the warm-up page load: "
            f"{mib(r['rss_cold'])})"
        )
        print(
            f"memory at peak: {mib(r['rss_peak'])}, per session: {mib(r['rss_per_session'])} "
            f"((peak - start) / {r['sessions']})"
        )
        if r["rss_after"] is not None:
            change = r["rss_after"] / r["rss_start"] - 1
            print(f"memory after close: {mib(r['rss_after'])} ({change:+.1%} of start)")
        else:
            print("memory after close: n/a (the server is gone)")

    print("targets:")
    if r["sessions"] < TARGET_SESSIONS:
        verdict = f"n/a (ran {r['sessions']} sessions; the target is {TARGET_SESSIONS})"
    else:
        verdict = "met" if r["errors"] == 0 and r["reruns"] > 0 else "NOT met"
        verdict += f" ({r['errors']} errors)"
    print(f"  {TARGET_SESSIONS} sessions with 0 errors: {verdict}")
    p95 = r["rerun_p95"]
    verdict = "n/a (no rerun)" if math.isnan(p95) else "met" if p95 < TARGET_P95_S else "NOT met"
    print(f"  p95 rerun latency under {TARGET_P95_S:g} s: {verdict} ({p95:.3f} s)")
    if r["rss_start"] is None or r["rss_after"] is None:
        verdict = "n/a (no memory figures)"
    else:
        change = r["rss_after"] / r["rss_start"] - 1
        ok = abs(change) <= TARGET_MEMORY_RATIO
        verdict = f"{'met' if ok else 'NOT met'} ({change:+.1%})"
    print(f"  memory after close within {TARGET_MEMORY_RATIO:.0%} of start: {verdict}")


def report_models(results: dict[str, dict]) -> None:
    """MiniLM's run against the toy run: peak memory ratio, and no copy of the model per session;
    a decoder's run: its memory per session against its weights."""
    decoder = results.get("decoder")
    if decoder and decoder.get("weights_bytes") and decoder["rss_per_session"] is not None:
        print(f"\n{decoder['model']}, {decoder['sessions']} sessions:")
        shared_copy(decoder["rss_per_session"], decoder["weights_bytes"], decoder["sessions"])
    toy, minilm = results.get("toy"), results.get("minilm")
    if not toy or not minilm or not toy["rss_peak"] or not minilm["rss_peak"]:
        return
    from tfviz.hf import pretrained

    weights = (pretrained.model_dir() / "model.safetensors").stat().st_size
    ratio = minilm["rss_peak"] / toy["rss_peak"]
    print(f"\n{pretrained.NAME} against toy models, {minilm['sessions']} sessions each:")
    print(
        f"  memory at start: {mib(minilm['rss_start'])} vs {mib(toy['rss_start'])} "
        f"(MiniLM loaded once: {mib(minilm['rss_start'] - toy['rss_start'])} more; its "
        f"weights file: {mib(weights)})"
    )
    print(f"  memory at peak: {mib(minilm['rss_peak'])} vs {mib(toy['rss_peak'])}")
    ok = ratio <= TARGET_MINILM_MEMORY
    print(
        f"  peak ratio MiniLM / toy: {ratio:.2f} (target <= {TARGET_MINILM_MEMORY:g}: "
        f"{'met' if ok else 'NOT met'})"
    )
    shared_copy(minilm["rss_per_session"] or 0.0, weights, minilm["sessions"])


def shared_copy(per_session: float, weights: float, sessions: int) -> None:
    """A run's memory per session against its model's weights: far less means one shared copy."""
    shared = per_session < weights / 4
    print(
        f"  per session: {mib(per_session)}, {per_session / weights:.1%} of the "
        f"weights: {'one shared copy' if shared else 'MORE than a shared copy would need'} "
        f"({mib(weights * sessions)} if every session held its own)"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=40, help="concurrent sessions (default 40)")
    p.add_argument("--seconds", type=float, default=60, help="how long they act (default 60)")
    p.add_argument("--port", type=int, default=0, help="port of the server started here")
    p.add_argument("--url", help="use this running server (e.g. http://127.0.0.1:8501) instead")
    p.add_argument("--pid", type=int, help="with --url: the server's pid, for memory figures")
    p.add_argument("--app", default="app.py", help="the script the server runs (default app.py)")
    p.add_argument(
        "--models",
        default="toy",
        help="comma-separated runs, each on a fresh server: 'toy' (the opening model), "
        "'minilm' (sessions pick all-MiniLM-L6-v2; with toy, their memory is compared) and/or "
        "'decoder' (sessions pick a random decoder of --decoder's family)",
    )
    p.add_argument(
        "--decoder",
        default="llama",
        choices=("gpt2", "llama", "qwen2"),
        help="with --models decoder: the family, at its real model's sizes (default llama)",
    )
    p.add_argument(
        "--tiny-decoder",
        action="store_true",
        help="with --models decoder: 2 layers, D 64, 512 tokens (a smoke test of this script)",
    )
    p.add_argument("--think-min", type=float, default=0.2, help="think time, seconds (min)")
    p.add_argument("--think-max", type=float, default=1.0, help="think time, seconds (max)")
    p.add_argument("--ramp", type=float, default=2.0, help="sessions start over this many s")
    p.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    p.add_argument(
        "--session-ttl",
        type=int,
        default=5,
        help="server.disconnectedSessionTTL of the server started here (default 5 s)",
    )
    p.add_argument(
        "--settle",
        type=float,
        help="seconds to wait after the sessions close before the memory reading "
        "(default: session TTL + 2)",
    )
    p.add_argument("--startup-timeout", type=float, default=120.0, help="server start, seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0 or args.think_min > args.think_max:
        p.error("need --sessions >= 1, --seconds > 0 and --think-min <= --think-max")
    if args.settle is None:
        args.settle = args.session_ttl + 2.0
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or set(args.models) - set(MODELS):
        p.error(f"--models takes a comma-separated list of {', '.join(MODELS)}")
    if args.url and len(args.models) > 1:
        p.error("--url measures one running server: give one of --models")
    return args


def picked(model: str, decoder: str = "llama") -> str | None:
    """The model picker option a --models entry makes sessions pick (None: the opening model;
    a decoder's folder is named after its family, its option "llama (Llama)")."""
    if model == "toy":
        return None
    if model == "decoder":
        return decoder
    from tfviz.hf import pretrained

    return pretrained.NAME


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = {}
    for i, model in enumerate(args.models):
        if i:
            print()
        result = run_once(args, model)
        if result is None:
            return 1
        results[model] = result
    report_models(results)
    if args.json:
        out = results[args.models[0]] if len(results) == 1 else results
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


def run_once(args, model: str) -> dict | None:
    """One benchmark run on a fresh server (or the --url one); None if the server is not up."""
    proc = None
    with tempfile.TemporaryDirectory(prefix="tfviz-load-") as tmp:
        log_path = Path(tmp) / "server.log"
        try:
            if args.url:
                base_url = args.url.rstrip("/")
                host = urlparse(base_url).hostname
                pid = args.pid
                if not wait_healthy(base_url, None, args.startup_timeout):
                    print(f"server at {base_url} is not healthy (/_stcore/health)")
                    return None
                print(f"using the running server at {base_url} ({host})")
            else:
                port = args.port or free_port()
                base_url = f"http://127.0.0.1:{port}"
                models_dir = None
                if model == "decoder":
                    models_dir = decoder_folder(args.decoder, Path(tmp), args.tiny_decoder)
                started = time.monotonic()
                proc = start_server(
                    port, args.session_ttl, log_path, Path(tmp), args.app, models_dir
                )
                pid = proc.pid
                if not wait_healthy(base_url, proc, args.startup_timeout):
                    log = log_path.read_text(errors="replace")[-3000:]
                    print(f"the server did not start (exit code {proc.poll()}); its log:\n{log}")
                    return None
                print(f"server pid {pid} healthy after {time.monotonic() - started:.1f} s")
            result = asyncio.run(bench(args, base_url, pid, picked(model, args.decoder)))
            if model == "decoder" and not args.url:
                weights = models_dir.glob(f"{args.decoder}/*.safetensors")
                result["weights_bytes"] = sum(f.stat().st_size for f in weights)
            report(result)
            return result
        finally:
            if proc is not None:
                stop_server(proc)


def decoder_folder(kind: str, tmp: Path, tiny: bool = False) -> Path:
    """A folder of model folders holding one random decoder of this family at its real model's
    sizes (bench/hf_decoders.py builds it), or TINY_DECODER's, for the server's
    $TFVIZ_PRETRAINED_DIR."""
    from bench import hf_decoders

    root = tmp / "models"
    sizes = dict(hf_decoders.SIZES[kind], **TINY_DECODER) if tiny else hf_decoders.SIZES[kind]
    started = time.monotonic()
    hf_decoders.build(kind, root / kind, sizes)
    took = time.monotonic() - started
    named = "a tiny" if tiny else f"a {hf_decoders.NAMED[kind]}-sized"
    print(f"built {named} random {kind} in {took:.1f} s")
    return root


TINY_DECODER = dict(layers=2, heads=4, kv_heads=2, hidden=64, ff=128, vocab=512, positions=256)


if __name__ == "__main__":
    sys.exit(main())
