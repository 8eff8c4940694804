"""tfviz.serve.jobs: one manager (a cap, one visible queue, cancel, progress, claims) for any kind
of work, checked with a stand-in work (Gate) that trains nothing; the library's import rule.
The kinds of work themselves are tested in tests/serve/test_work.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.support import stop_all
from tfviz import settings
from tfviz.messages import say
from tfviz.serve import jobs


class Gate:
    """A Work that runs until the test opens its gate (or it is asked to stop): the manager's
    rules, checked without training anything. kind names it, claim is what it claims."""

    def __init__(self, kind: str = "gate", claim=None, fail: Exception | None = None):
        self.kind, self._claim, self.fail = kind, claim, fail
        self.spec = {"gate": kind}
        self.result = None
        self.open = threading.Event()
        self.started = threading.Event()

    @property
    def total(self) -> int:
        return 4

    @property
    def claim(self):
        return self._claim

    def validate(self, claimed) -> None:
        if self._claim in claimed:
            raise ValueError(f"{self._claim} is taken")

    def run(self, report, should_stop) -> str:
        self.started.set()
        report(message=say("training"), done=1, step=1, loss=2.0)
        while not self.open.wait(0.002):
            if should_stop():
                self.result = "partial"
                raise jobs.Stopped(say("after_steps", steps=1))
        if self.fail is not None:
            raise self.fail
        report(done=4, step=4, loss=1.0)
        self.result = "made"
        return say("saved", file="gate")


# ---- the manager: one cap, one queue, for any kind of work --------------------------------------


def test_work_of_every_kind_shares_one_first_come_first_served_queue():
    m = jobs.JobManager(max_jobs=1, max_queue=3)
    try:
        works = [Gate("train"), Gate("experiment"), Gate("train"), Gate("experiment")]
        running, *waiting = [m.submit(w) for w in works]
        assert running.status == jobs.RUNNING and works[0].started.wait(5)
        assert [j.state().position for j in waiting] == [1, 2, 3]
        assert [j.state().kind for j in waiting] == ["experiment", "train", "experiment"]
        assert m.counts() == (1, 3)
        with pytest.raises(jobs.QueueFull, match="all 1 training slots are busy and 3 jobs"):
            m.submit(Gate("experiment"))
        waiting[0].cancel()  # a queued job leaves the queue at once; those behind move up
        assert waiting[0].wait(1) and waiting[0].state().message == say("cancelled_waiting")
        assert [j.state().position for j in waiting[1:]] == [1, 2]
        works[0].open.set()  # the slot goes to the oldest job still waiting
        assert running.wait(5)
        wait_until(lambda: works[2].started.is_set())
        assert not works[3].started.is_set() and waiting[2].state().position == 1
        works[2].open.set()
        works[3].open.set()
        assert waiting[2].wait(5)
        assert waiting[1].wait(5) and waiting[1].status == jobs.DONE
        assert not works[1].started.is_set()  # the cancelled one never ran
    finally:
        stop_all(m)


def test_max_jobs_run_side_by_side():
    m = jobs.JobManager(max_jobs=2, max_queue=0)
    try:
        a, b = Gate(), Gate()
        first, second = m.submit(a), m.submit(b)
        assert a.started.wait(5) and b.started.wait(5)  # both run at once
        assert m.counts() == (2, 0)
        with pytest.raises(jobs.QueueFull, match="all 2 training slots"):
            m.submit(Gate())
        a.open.set()
        b.open.set()
        assert first.wait(5) and second.wait(5)
    finally:
        stop_all(m)


def test_a_finished_job_reports_its_result_and_frees_its_slot_before_wait_returns(manager):
    gate = Gate()
    job = manager.submit(gate)
    assert gate.started.wait(5)
    wait_until(lambda: job.state().message == say("training"))
    snap = job.state()
    assert snap.active and snap.position is None and snap.result is None
    assert (snap.done, snap.total, snap.fraction, snap.loss) == (1, 4, 0.25, 2.0)
    gate.open.set()
    assert job.wait(5)
    assert manager.counts() == (0, 0)  # no window where the job ended but its slot is held
    snap = job.state()
    assert (snap.status, snap.message, snap.result) == (
        jobs.DONE,
        say("saved", file="gate"),
        "made",
    )
    assert snap.fraction == 1.0 and snap.losses == [2.0, 1.0] and snap.step == 4


def test_cancel_stops_a_running_job_and_keeps_what_it_left(manager):
    gate = Gate()
    job = manager.submit(gate)
    assert gate.started.wait(5)
    job.cancel()
    assert job.wait(5)
    snap = job.state()
    assert snap.status == jobs.CANCELLED and not snap.active
    assert snap.message == say("cancelled", how_far=say("after_steps", steps=1))
    assert str(snap.message) == "cancelled after 1 steps"  # the English, for logs
    assert snap.result == "partial" and manager.counts() == (0, 0)


@pytest.mark.parametrize(
    "error, message",
    [
        (jobs.JobFailed(say("name_appeared", name="x")), say("name_appeared", name="x")),
        (KeyError("w_o"), say("error", error="KeyError: 'w_o'")),  # unexpected: named by its type
    ],
)
def test_a_failure_is_reported_and_frees_the_slot(manager, error, message):
    gate = Gate(fail=error)
    gate.open.set()
    job = manager.submit(gate)
    assert job.wait(5)
    snap = job.state()
    assert snap.status == jobs.FAILED and snap.message == message
    assert manager.counts() == (0, 0)
    follow = Gate()
    follow.open.set()
    assert manager.submit(follow).wait(5)  # the slot is usable again


def test_a_claim_is_held_by_one_active_job_at_a_time(manager):
    first = Gate(claim="x")
    job = manager.submit(first)
    with pytest.raises(ValueError, match="x is taken"):
        manager.submit(Gate(claim="x"))
    assert manager.counts() == (1, 0)  # a refused job takes no place
    first.open.set()
    assert job.wait(5)
    again = Gate(claim="x")
    again.open.set()
    assert manager.submit(again).wait(5)  # released once the job ended


class Steps:
    """A Work whose steps each take `seconds` (a sleep): the time left is measured from them."""

    kind, spec, result = "steps", {"steps": True}, None

    def __init__(self, steps: int, seconds: float):
        self.steps, self.seconds = steps, seconds
        self.halfway = threading.Event()
        self.go_on = threading.Event()

    @property
    def total(self) -> int:
        return self.steps

    claim = None

    def validate(self, claimed) -> None:
        pass

    def run(self, report, should_stop):
        for step in range(1, self.steps + 1):
            time.sleep(self.seconds)
            report(done=step, step=step, loss=1.0)
            if step == self.steps // 2:
                self.halfway.set()
                self.go_on.wait(30)  # the test reads the state here
            if should_stop():
                raise jobs.Stopped(say("after_steps", steps=step))
        return say("saved", file="steps")


def test_the_time_left_is_measured_from_the_runs_own_first_steps():
    m = jobs.JobManager(max_jobs=1, max_queue=1)
    work = Steps(steps=80, seconds=0.03)
    job = m.submit(work)
    try:
        assert work.halfway.wait(30)
        snap = job.state()
        assert snap.done == 40 and snap.seconds_left is not None
        # 40 steps of ~0.03 s are left: ~1.2 s (sleep overshoots; a loaded machine more).
        assert 0.9 < snap.seconds_left < 4.0, snap.seconds_left
    finally:
        work.go_on.set()
        assert job.wait(30)
    assert job.state().status == jobs.DONE and job.state().seconds_left is None


def test_no_time_left_is_said_before_enough_steps_and_seconds_are_timed():
    first = (100.0, 1)  # the clock and the steps done at the first reported step
    assert jobs.estimate_left(None, 50, 100, 200.0) is None  # no step reported yet
    few = 1 + jobs.ESTIMATE_AFTER_STEPS - 1
    assert jobs.estimate_left(first, few, 100, 160.0) is None  # too few steps, however long
    quick = first[0] + jobs.ESTIMATE_AFTER_S / 2
    assert jobs.estimate_left(first, 51, 100, quick) is None  # too short a time
    # 50 steps in 10 s after the first: 50 more take 10 s more, whatever a recipe promised.
    assert jobs.estimate_left(first, 51, 101, 110.0) == pytest.approx(10.0)
    # A run that slowed down is seen to: the same steps over twice the time.
    assert jobs.estimate_left(first, 51, 101, 120.0) == pytest.approx(20.0)
    assert jobs.estimate_left(first, 101, 101, 120.0) == 0.0  # all steps done: evaluating


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(settings.MAX_JOBS_ENV, "3")
    monkeypatch.setenv(settings.MAX_QUEUE_ENV, "0")
    m = jobs.JobManager()
    assert (m.max_jobs, m.max_queue) == (3, 0)
    monkeypatch.setenv(settings.MAX_JOBS_ENV, "many")
    with pytest.raises(ValueError, match="TFVIZ_MAX_JOBS must be an integer >= 1"):
        settings.max_jobs()
    monkeypatch.setenv(settings.MAX_JOBS_ENV, "0")
    with pytest.raises(ValueError, match="TFVIZ_MAX_JOBS"):
        settings.max_jobs()
    monkeypatch.setenv(settings.MAX_QUEUE_ENV, "-1")
    with pytest.raises(ValueError, match="TFVIZ_MAX_QUEUE must be an integer >= 0"):
        settings.max_queue()


def test_user_models_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(settings.USER_MODELS_ENV, raising=False)
    assert settings.user_models_dir(tmp_path) == tmp_path / "user_models"
    monkeypatch.setenv(settings.USER_MODELS_ENV, str(tmp_path / "elsewhere"))
    assert settings.user_models_dir(tmp_path) == tmp_path / "elsewhere"


# Every module of the library, found by walking the package (tfviz.ui, the app's views, may
# import streamlit); each is imported in a fresh interpreter, which then must not hold streamlit.
IMPORT_ALL = """
import importlib, json, pkgutil, sys

def walk(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if info.name == "tfviz.ui":
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from walk(module.__path__, info.name + ".")

import tfviz
names = ["tfviz", *walk(tfviz.__path__, "tfviz.")]
print(json.dumps({"names": names, "streamlit": "streamlit" in sys.modules}))
"""


def test_the_library_never_imports_streamlit():
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], check=True, capture_output=True, text=True
    ).stdout
    found = json.loads(out.splitlines()[-1])
    package = Path(__file__).resolve().parents[2] / "tfviz"
    on_disk = {f"tfviz.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    assert on_disk <= set(found["names"])  # every module was imported, none skipped
    assert not any(n == "tfviz.ui" or n.startswith("tfviz.ui.") for n in found["names"])
    assert not found["streamlit"], "a library module imported streamlit"
