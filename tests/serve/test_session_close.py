"""A job (training or experiment rerun) stops when the browser session that started it closes
(jobs.py and app.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit import config as st_config
from streamlit.runtime.runtime import Runtime
from streamlit.testing.v1 import AppTest

from tests.conftest import submit_training, wait_until
from tfviz import settings
from tfviz.messages import say
from tfviz.serve import jobs, work
from tfviz.training.checkpoint import load_checkpoint

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16)


def training(name: str, folder: Path, steps: int = settings.MAX_STEPS) -> work.TrainWork:
    spec = work.JobSpec(task="reverse", name=name, steps=steps, **TINY)
    return work.TrainWork(spec, folder, device="cpu")


class Owner:
    """A stand-in for a browser session: open until closed (or until asked close_after times);
    counts how often it was asked."""

    def __init__(self, close_after: int | None = None) -> None:
        self.open = threading.Event()
        self.open.set()
        self.asked = 0
        self.close_after = close_after

    def __call__(self) -> bool:
        self.asked += 1
        if self.close_after is not None and self.asked >= self.close_after:
            self.close()
        return self.open.is_set()

    def close(self) -> None:
        self.open.clear()


@pytest.fixture
def manager():
    m = jobs.JobManager(max_jobs=1, max_queue=2)
    yield m
    for job in m.jobs():  # nothing a failed test started outlives it
        job.cancel()
        job.wait(30)


# ---- jobs.py ---------------------------------------------------------------------------------


def test_a_running_training_finishes_and_saves_when_its_session_closes(manager, tmp_path):
    # The decision (jobs.py's docstring): the model is saved for everyone, so a closed tab loses
    # nothing; the slot is free once it ends.
    owner = Owner()
    job = manager.submit(training("mine", tmp_path, steps=60), is_alive=owner)
    wait_until(lambda: job.state().step >= 3)
    owner.close()
    assert job.wait(60), "the training did not finish"
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    assert snap.step == 60
    assert (tmp_path / "mine.safetensors").is_file()
    assert manager.counts() == (0, 0)  # its slot is free again


def test_a_running_retraining_stops_when_its_session_closes(manager):
    # W_o retrained alone lives only in its session: nobody would see it, so it stops.
    model, _ = load_checkpoint(Path(APP).parent / "models" / "reverse.safetensors")
    owner = Owner()
    spec = work.RetrainSpec(task="reverse", steps=settings.RETRAIN_MAX_STEPS)
    job = manager.submit(work.RetrainWoWork(spec, model), is_alive=owner)
    wait_until(lambda: job.state().step >= 3)
    owner.close()
    assert job.wait(30), "the retraining did not stop after its session closed"
    snap = job.state()
    assert snap.status == jobs.CANCELLED and snap.message.key == "abandoned"
    assert snap.step < settings.RETRAIN_MAX_STEPS
    assert manager.counts() == (0, 0)


def test_an_open_session_lets_the_job_finish_and_save(manager, tmp_path):
    owner = Owner()
    job = manager.submit(training("kept", tmp_path, steps=20), is_alive=owner)
    assert job.wait(60)
    assert job.state().status == jobs.DONE, job.state().message
    assert (tmp_path / "kept.safetensors").is_file()


def test_a_failing_check_does_not_stop_training(manager, tmp_path):
    def broken() -> bool:
        raise RuntimeError("the runtime is gone")

    job = manager.submit(training("robust", tmp_path, steps=20), is_alive=broken)
    assert job.wait(60)
    assert job.state().status == jobs.DONE, job.state().message


def test_a_queued_job_whose_session_closed_gives_its_place_up(manager, tmp_path):
    running = manager.submit(training("running", tmp_path))
    owner = Owner()
    waiting = manager.submit(training("waiting", tmp_path, steps=20), is_alive=owner)
    other = manager.submit(training("other", tmp_path, steps=20))
    assert (waiting.state().position, other.state().position) == (1, 2)
    with pytest.raises(jobs.QueueFull):
        manager.submit(training("refused", tmp_path, steps=20))
    owner.close()
    # The queue forgets it at once: the next job moves up and a new one fits again.
    assert other.state().position == 1
    assert waiting.wait(1)
    snap = waiting.state()
    assert snap.status == jobs.CANCELLED and snap.step == 0
    assert snap.message == say("owner_gone_waiting")
    third = manager.submit(training("third", tmp_path, steps=20))
    assert manager.counts() == (1, 2)
    for job in (third, other, running):
        job.cancel()
        assert job.wait(30)
    assert not (tmp_path / "waiting.safetensors").exists()


def test_a_job_whose_session_closed_while_queued_is_skipped_when_a_slot_frees(manager, tmp_path):
    running = manager.submit(training("running", tmp_path))
    owner = Owner()
    waiting = manager.submit(training("waiting", tmp_path, steps=20), is_alive=owner)
    behind = manager.submit(training("behind", tmp_path))
    owner.close()  # nobody looks at the queue until the running job ends
    running.cancel()
    assert running.wait(30)
    wait_until(lambda: behind.status == jobs.RUNNING)
    assert waiting.wait(1)
    assert waiting.status == jobs.CANCELLED and waiting.state().step == 0
    behind.cancel()
    assert behind.wait(30)


def test_a_rerun_stops_when_its_session_closes(manager):
    # A running job asks once per training step of each run: the 4 runs (2 seeds x 2 arms) train
    # together, so closing at the 40th ask closes the session 10 steps into all of them.
    owner = Owner(close_after=40)
    spec = work.ExperimentSpec("balanced", seeds=2, steps=30)
    job = manager.submit(work.ExperimentWork(spec), is_alive=owner)
    assert job.wait(60), "the rerun did not stop after its session closed"
    snap = job.state()
    assert snap.status == jobs.CANCELLED and not snap.active
    assert snap.message == say("abandoned", how_far=say("no_run_finished", done=40, total=120))
    assert (snap.done, snap.step) == (40, 10) and owner.asked == 40
    assert snap.result.cancelled and not snap.result.runs
    assert manager.counts() == (0, 0)


def test_a_queued_rerun_whose_session_closed_never_starts(manager, tmp_path):
    running = manager.submit(training("running", tmp_path))
    owner = Owner()
    waiting = manager.submit(work.ExperimentWork(work.ExperimentSpec("sum")), is_alive=owner)
    assert waiting.state().position == 1
    owner.close()
    assert waiting.state().position is None and manager.counts() == (1, 0)
    assert waiting.wait(1)
    snap = waiting.state()
    assert snap.status == jobs.CANCELLED and snap.message == say("owner_gone_waiting")
    assert snap.result is None and snap.done == 0
    running.cancel()
    assert running.wait(30)


def test_alive_with_grace_waits_out_a_short_disconnect():
    now = [0.0]
    connected = [True]
    check = jobs.alive_with_grace(lambda: connected[0], grace_s=10, clock=lambda: now[0])
    assert check()
    connected[0] = False
    assert check()  # gone for 0 s
    now[0] = 9.9
    assert check()  # still within the grace time: a reconnect may come
    connected[0] = True
    now[0] = 15
    assert check()  # it came back: the clock starts again at the next drop
    connected[0] = False
    now[0] = 16
    assert check()
    now[0] = 26
    assert not check()  # gone 10 s in a row


# ---- app.py ----------------------------------------------------------------------------------


class FakeRuntime:
    """Stands in for Streamlit's Runtime: knows which session ids are connected."""

    def __init__(self) -> None:
        self.closed: set[str] = set()
        self.asked: set[str] = set()

    def is_active_session(self, session_id: str) -> bool:
        self.asked.add(session_id)
        return session_id not in self.closed


@pytest.fixture
def app_env(fresh_app):
    """fresh_app, and the session grace time put back (one test shortens it)."""
    ttl = st_config.get_option("server.disconnectedSessionTTL")
    yield fresh_app
    st_config.set_option("server.disconnectedSessionTTL", ttl)


def test_the_apps_training_outlives_its_browser_session(monkeypatch, app_env):
    st_config.set_option("server.disconnectedSessionTTL", 1)  # seconds a session may come back
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["view"] = "Train"
    at.run()
    fake = FakeRuntime()
    monkeypatch.setattr(Runtime, "_instance", fake)  # a server is running now
    try:
        job = submit_training(at, "closing", 300)
        fake.closed.add("test session id")  # the tab is closed at once
        assert job.wait(60), "the training did not finish"
    finally:
        monkeypatch.setattr(Runtime, "_instance", None)
    snap = job.state()
    # Well past the 1 s grace, it trained to the end and saved: the model is in every picker.
    assert snap.status == jobs.DONE, snap.message
    assert snap.step == 300 and snap.seconds > 1
    assert (app_env / "closing.safetensors").is_file()
    assert job.watches_owner  # the app did hand it the session check


def test_without_a_server_runtime_the_session_counts_as_open(app_env):
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["view"] = "Train"
    at.run()
    job = submit_training(at, "no_runtime", 20)
    assert job.watches_owner and job.owner_alive()
    assert job.wait(60)
    assert job.state().status == jobs.DONE, job.state().message
