"""A rolling update drains: SIGTERM stops new jobs, lets running ones finish within the grace
period the manifests state, and the server exits 0.

The manager's rules are checked directly (tfviz.serve.jobs.JobManager.drain); then real servers
(`streamlit run app.py`) get SIGTERM while a training runs in them:
- with the default grace, the training finishes and saves its model before the server exits 0,
  and a student who asks for a new job meanwhile is told the server is shutting down;
- with a grace of 1 s, a long training is cut off: the server still exits 0, soon, and leaves no
  file behind (the control: the first server saved its model because it waited).
The manifests' grace periods are checked against the drain they must cover.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from bench.failover import submit_training
from bench.harness import free_port, start_server, stop_server, wait_healthy
from bench.session import Session, Stats
from tests.conftest import ROOT
from tests.serve.test_jobs import Gate
from tfviz import load_checkpoint, settings
from tfviz.serve import jobs

K8S = ROOT / "deploy" / "k8s" / "deployment.yaml"
COMPOSE = ROOT / "deploy" / "compose" / "compose.yaml"
SPARE_S = 10  # what a grace period must leave after the drain: saving, closing sockets, exiting


# ---- the manager --------------------------------------------------------------------------------


def test_a_draining_manager_refuses_new_jobs_and_ends_the_queued_ones():
    m = jobs.JobManager(max_jobs=1, max_queue=2)
    running, queued = Gate(), Gate()
    first, second = m.submit(running), m.submit(queued)
    assert running.started.wait(10)
    drained = {}
    drainer = threading.Thread(target=lambda: drained.update(ok=m.drain(30)))
    drainer.start()
    assert second.wait(10), "the queued job was not ended"
    assert second.status == jobs.CANCELLED and second.state().message.key == "shutdown_waiting"
    assert not queued.started.is_set()
    with pytest.raises(jobs.Draining):
        m.submit(Gate())
    assert first.status == jobs.RUNNING and drainer.is_alive()  # the running job carries on
    running.open.set()
    drainer.join(10)
    assert drained == {"ok": True} and first.status == jobs.DONE


class LeavingGate(Gate):
    """A Gate that also says when its run has returned (by any way out)."""

    def __init__(self):
        super().__init__()
        self.left = threading.Event()

    def run(self, report, should_stop) -> str:
        try:
            return super().run(report, should_stop)
        finally:
            self.left.set()


def test_drain_stops_a_job_still_running_after_the_grace():
    m = jobs.JobManager(max_jobs=1, max_queue=0)
    gate = LeavingGate()
    job = m.submit(gate)
    assert gate.started.wait(10)
    started = time.monotonic()
    assert m.drain(0.3) is False
    assert 0.3 <= time.monotonic() - started < 5  # the whole grace, then the stop
    # Cancelled, and stopped at its next step before drain returned: the work has left its run
    # (no thread is inside a job when the process exits) through its stop branch, the gate
    # never having opened.
    assert gate.left.is_set(), "drain returned while the job was still running"
    assert job.wait(0) and job.status == jobs.CANCELLED
    assert job.state().message.key == "cancelled"
    assert gate.result == "partial" and not gate.open.is_set()


def test_a_draining_refusal_is_a_queue_full_with_its_own_type():
    """The pages catch QueueFull, so a drain's refusal reaches the same message box."""
    assert issubclass(jobs.Draining, jobs.QueueFull)


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, 120), ("", 120), ("0", 0), ("45", 45), (" 600 ", 600)]
)
def test_the_drain_time_comes_from_the_environment(raw, expected):
    environ = {} if raw is None else {settings.DRAIN_SECONDS_ENV: raw}
    assert settings.drain_seconds(environ) == expected


@pytest.mark.parametrize("raw", ["-1", "soon", "1.5", "3601"])
def test_a_bad_drain_time_is_refused_with_a_message(raw):
    with pytest.raises(ValueError, match=settings.DRAIN_SECONDS_ENV):
        settings.drain_seconds({settings.DRAIN_SECONDS_ENV: raw})


# ---- the manifests ------------------------------------------------------------------------------


def env_value(env: list[dict] | dict, name: str) -> str | None:
    if isinstance(env, dict):
        return env.get(name)
    return next((e["value"] for e in env if e["name"] == name), None)


def drain_of(env) -> int:
    """The drain a container gets: its TFVIZ_DRAIN_SECONDS, else the app's default."""
    raw = env_value(env, settings.DRAIN_SECONDS_ENV)
    return settings.drain_seconds({} if raw is None else {settings.DRAIN_SECONDS_ENV: raw})


def k8s_grace_problems(doc: dict) -> list[str]:
    pod = doc["spec"]["template"]["spec"]
    grace = pod.get("terminationGracePeriodSeconds", 30)  # Kubernetes' default
    (container,) = pod["containers"]
    pause = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    drain = drain_of(container.get("env", []))
    problems = []
    if grace < pause + drain + SPARE_S:
        problems.append(f"grace {grace} s < preStop {pause} s + drain {drain} s + {SPARE_S} s")
    if pause == 0:
        problems.append("no preStop pause: new connections may reach a stopping pod")
    return problems


def compose_seconds(text: str) -> float:
    """A compose duration ("135s", "2m15s") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def compose_grace_problems(doc: dict) -> list[str]:
    problems = []
    for name in ("app1", "app2"):
        service = doc["services"][name]
        grace = compose_seconds(service.get("stop_grace_period", "10s"))  # docker's default
        drain = drain_of(service.get("environment", {}))
        if grace < drain + SPARE_S:
            problems.append(f"{name}: stop_grace_period {grace:g} s < drain {drain} s + spare")
    return problems


def test_the_kubernetes_grace_period_covers_the_pause_and_the_drain():
    doc = yaml.safe_load(K8S.read_text())
    assert k8s_grace_problems(doc) == []
    doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 60  # control
    assert k8s_grace_problems(doc) and "grace 60 s" in k8s_grace_problems(doc)[0]


def test_the_compose_grace_period_covers_the_drain():
    doc = yaml.safe_load(COMPOSE.read_text())  # merges the x-app anchor into each service
    assert compose_grace_problems(doc) == []
    doc["services"]["app2"]["stop_grace_period"] = "1m"  # control
    assert compose_grace_problems(doc) == ["app2: stop_grace_period 60 s < drain 120 s + spare"]


# ---- real servers -------------------------------------------------------------------------------

pytest_bench = pytest.mark.bench  # starts real servers: deselect with -m "not bench"


class Server:
    """`streamlit run app.py` on a free port with its own user_models folder and drain time."""

    def __init__(self, folder: Path, drain: int, monkeypatch):
        monkeypatch.setenv(settings.DRAIN_SECONDS_ENV, str(drain))
        self.folder, self.port = folder, free_port()
        self.log = folder / "server.log"
        self.proc = start_server(self.port, 120, self.log, folder, "app.py")
        if not wait_healthy(f"http://127.0.0.1:{self.port}", self.proc, 180):
            stop_server(self.proc)
            pytest.fail(f"the server did not start:\n{self.log.read_text()[-2000:]}")

    @property
    def models(self) -> Path:
        return self.folder / "user_models"

    def session(self) -> Session:
        ws_url = f"ws://127.0.0.1:{self.port}/_stcore/stream"
        return Session(ws_url, Stats(), random.Random(0), 120.0, (0.1, 0.2))

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_server(self.proc)


async def start_training(server: Server, name: str, steps: int) -> Session:
    session = server.session()
    async with session.connect() as ws:
        await session._request(ws)
        problem = await submit_training(session, ws, name, steps=steps)
    assert problem == "", problem
    assert not session.stats.errors, session.stats.samples
    return session


def exit_code(proc: subprocess.Popen, timeout: float) -> tuple[int | None, float]:
    started = time.monotonic()
    try:
        return proc.wait(timeout), time.monotonic() - started
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started


@pytest_bench
def test_sigterm_lets_a_running_training_finish_then_exits_0(tmp_path, monkeypatch):
    server = Server(tmp_path, drain=settings.DEFAULT_DRAIN_SECONDS, monkeypatch=monkeypatch)
    try:
        asyncio.run(
            start_training(server, "drained", steps=500)
        )  # several seconds: still running at SIGTERM
        target = server.models / "drained.safetensors"
        time.sleep(0.5)  # the job is running in the server's worker thread
        assert not target.exists(), "the training ended before SIGTERM: make it longer"
        server.proc.send_signal(signal.SIGTERM)

        # Meanwhile a student asks for another job: told the server is shutting down.
        late = asyncio.run(start_training_refused(server))
        assert any("shutting down" in s for s in late), late

        code, waited = exit_code(server.proc, settings.DEFAULT_DRAIN_SECONDS + SPARE_S)
        log = server.log.read_text(errors="replace")
        assert code == 0, f"exit {code} after {waited:.1f} s:\n{log[-2000:]}"
        assert target.exists(), f"the training was cut off:\n{log[-2000:]}"
        model, _ = load_checkpoint(target)
        assert model.config.d_model == 16
        assert "Traceback" not in log, log[-2000:]
        assert not list(server.models.glob("*.tmp*"))
    finally:
        server.stop()


async def start_training_refused(server: Server) -> list[str]:
    """A second browser submits a training; the page's error alerts."""
    session = server.session()
    async with session.connect() as ws:
        await session._request(ws)
        problem = await submit_training(session, ws, "too_late", steps=30)
    assert problem == "", problem
    return [s for s in session.stats.samples if s.startswith("error alert")]


@pytest_bench
def test_sigterm_cuts_off_a_training_longer_than_the_grace_and_still_exits_0(tmp_path, monkeypatch):
    server = Server(tmp_path, drain=1, monkeypatch=monkeypatch)
    try:
        asyncio.run(start_training(server, "cut_off", steps=settings.MAX_STEPS))
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGTERM)
        code, waited = exit_code(server.proc, 30)
        log = server.log.read_text(errors="replace")
        assert code == 0, f"exit {code} after {waited:.1f} s:\n{log[-2000:]}"
        assert waited < 15, f"a 1 s drain took {waited:.1f} s to exit"
        assert "were cancelled" in log
        assert not server.models.exists() or list(server.models.iterdir()) == []
    finally:
        server.stop()


def test_the_pages_word_a_refusal_in_their_own_language():
    """The manager's refusals carry numbers; each language words them (no English in zh)."""
    for lang in ("en", "zh"):
        catalogue = json.loads((ROOT / "tfviz/locales" / f"{lang}.json").read_text())
        assert "{slots}" in catalogue["jobs.queue_full"]
        assert "{waiting}" in catalogue["jobs.queue_full"]
        assert catalogue["jobs.draining"]
    zh = json.loads((ROOT / "tfviz/locales/zh.json").read_text())
    words = re.sub(r"\{\w+\}", "", zh["jobs.draining"] + zh["jobs.queue_full"])
    assert not re.search(r"[A-Za-z]{3,}", words), words
