"""Streamlit's websocket protocol, spoken as the browser speaks it, without a browser: a Session
loads the page and acts (types a sequence, toggles W_o, picks a model, opens a tab) over
ws://HOST/_stcore/stream and times every run; Stats adds up what every session saw. Used by
bench/load.py, bench/cold_start.py and bench/failover.py (and tests that drive a server).

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
  reconnection); one more session coming and going after that makes the server drop the expired
  ones (bench/load.py's poke, before it reads the memory after close).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.harness import WORDS

MODEL_KEY = "model"
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


async def one_page_load(ws_url: str, timeout: float, stats: Stats) -> None:
    """Load the page once and leave: warms the server's caches, or pokes it after the run."""
    session = Session(ws_url, stats, random.Random(0), timeout, (0.0, 0.0))
    await session.run(time.monotonic() + timeout, load_only=True)


async def one_model_pick(ws_url: str, timeout: float, stats: Stats, model: str) -> None:
    """Load the page, pick the model once and leave: the server loads it (once per process)."""
    session = Session(ws_url, stats, random.Random(0), timeout, (0.0, 0.0), model)
    await session.run(time.monotonic() + timeout, load_only=True)
