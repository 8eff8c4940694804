"""tfviz.jobs: training in worker threads, with a cap, a visible queue, cancel and saving."""

from __future__ import annotations

import errno
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tfviz import jobs, load_checkpoint

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16)


def spec(name: str, steps: int = 20, **kw) -> jobs.JobSpec:
    return jobs.JobSpec(name=name, steps=steps, **{"task": "reverse", **TINY, **kw})


@pytest.fixture
def manager():
    m = jobs.JobManager(max_jobs=1, max_queue=1, device="cpu")
    yield m
    # Stop whatever a failed test left running, so no thread outlives it.
    for job in m._running + m._queue:
        job.cancel()
        job.wait(30)


def test_a_job_trains_saves_and_reports(manager, tmp_path):
    job = manager.submit(spec("tiny"), tmp_path)
    assert job.wait(60)
    snap = job.snapshot()
    assert snap.status == jobs.DONE, snap.message
    assert snap.step == 20 and len(snap.losses) == 20
    assert snap.path == str(tmp_path / "tiny.safetensors")
    assert "token_accuracy" in snap.metrics
    model, meta = load_checkpoint(snap.path)
    assert meta.task == "reverse"
    assert meta.config.d_model == 16 and meta.config.n_layers == 1
    assert meta.record["steps_done"] == 20 and meta.record["name"] == "tiny"
    assert meta.metrics["token_accuracy"] == snap.metrics["token_accuracy"]
    assert manager.counts() == (0, 0)
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]  # written atomically


def test_progress_is_readable_while_running_and_cancel_stops_it(manager, tmp_path):
    job = manager.submit(spec("long", steps=jobs.MAX_STEPS), tmp_path)
    wait_until(lambda: job.snapshot().step >= 3)
    snap = job.snapshot()
    assert snap.status == jobs.RUNNING and snap.active
    assert len(snap.losses) >= 1 and snap.position is None
    job.cancel()
    assert job.wait(30)
    snap = job.snapshot()
    assert snap.status == jobs.CANCELLED and not snap.active
    assert snap.step < jobs.MAX_STEPS
    assert "not saved" in snap.message
    assert not (tmp_path / "long.safetensors").exists()


def test_the_cap_queues_the_extra_job_and_refuses_when_full(manager, tmp_path):
    first = manager.submit(spec("first", steps=jobs.MAX_STEPS), tmp_path)
    second = manager.submit(spec("second", steps=jobs.MAX_STEPS), tmp_path)
    snap = second.snapshot()
    assert snap.status == jobs.QUEUED and snap.position == 1
    assert manager.counts() == (1, 1)
    with pytest.raises(jobs.QueueFull, match="busy"):
        manager.submit(spec("third"), tmp_path)
    # When the running job ends, the waiting one takes its slot.
    first.cancel()
    assert first.wait(30)
    wait_until(lambda: second.snapshot().status == jobs.RUNNING)
    assert second.snapshot().position is None
    second.cancel()
    assert second.wait(30)


def test_a_queued_job_can_be_cancelled_before_it_starts(manager, tmp_path):
    first = manager.submit(spec("first", steps=jobs.MAX_STEPS), tmp_path)
    second = manager.submit(spec("second"), tmp_path)
    second.cancel()
    assert second.wait(1)
    snap = second.snapshot()
    assert snap.status == jobs.CANCELLED and snap.step == 0
    assert "never started" in snap.message
    assert manager.counts() == (1, 0)
    first.cancel()
    assert first.wait(30)


def test_queue_positions_count_up(tmp_path):
    m = jobs.JobManager(max_jobs=1, max_queue=3, device="cpu")
    running = m.submit(spec("r", steps=jobs.MAX_STEPS), tmp_path)
    waiting = [m.submit(spec(f"w{i}"), tmp_path) for i in range(3)]
    assert [j.snapshot().position for j in waiting] == [1, 2, 3]
    waiting[0].cancel()
    assert [j.snapshot().position for j in waiting[1:]] == [1, 2]
    for job in [*waiting[1:], running]:
        job.cancel()
        assert job.wait(30)


@pytest.mark.parametrize(
    "name, message",
    [
        ("../evil", "may only hold letters"),
        ("", "empty"),
        ("reverse", "reserved"),
        ("taken", "already exists"),
    ],
)
def test_bad_names_are_refused_with_a_message(manager, tmp_path, name, message):
    (tmp_path / "taken.safetensors").write_bytes(b"x")
    with pytest.raises(ValueError, match=message):
        manager.submit(spec(name), tmp_path, reserved=frozenset({"reverse"}))
    assert manager.counts() == (0, 0)


def test_a_name_being_trained_is_taken(manager, tmp_path):
    job = manager.submit(spec("same", steps=jobs.MAX_STEPS), tmp_path)
    with pytest.raises(ValueError, match="already exists or is being trained"):
        manager.submit(spec("same"), tmp_path)
    job.cancel()
    assert job.wait(30)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(steps=jobs.MAX_STEPS + 1), "steps must be a whole number from 1 to 20,000"),
        (dict(steps=0), "steps must be"),
        (dict(lr=0.0), "learning rate"),
        (dict(w_o="zero"), "w_o must be"),
        (dict(d_model=30, n_heads=4), "divisible by n_heads"),
        (dict(task="nope"), "unknown task"),
    ],
)
def test_bad_settings_are_refused_with_a_message(manager, tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        manager.submit(spec("x", **changes), tmp_path)


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(jobs.MAX_JOBS_ENV, "3")
    monkeypatch.setenv(jobs.MAX_QUEUE_ENV, "0")
    m = jobs.JobManager(device="cpu")
    assert (m.max_jobs, m.max_queue) == (3, 0)
    monkeypatch.setenv(jobs.MAX_JOBS_ENV, "many")
    with pytest.raises(ValueError, match="TFVIZ_MAX_JOBS must be an integer >= 1"):
        jobs.default_max_jobs()
    monkeypatch.setenv(jobs.MAX_JOBS_ENV, "0")
    with pytest.raises(ValueError, match="TFVIZ_MAX_JOBS"):
        jobs.default_max_jobs()


def test_user_models_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(jobs.USER_MODELS_ENV, raising=False)
    assert jobs.user_models_dir(tmp_path) == tmp_path / "user_models"
    monkeypatch.setenv(jobs.USER_MODELS_ENV, str(tmp_path / "elsewhere"))
    assert jobs.user_models_dir(tmp_path) == tmp_path / "elsewhere"


def test_the_library_never_imports_streamlit():
    code = (
        "import sys, tfviz.jobs, tfviz.plots, tfviz.compare; "
        "assert 'streamlit' not in sys.modules, 'streamlit was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- losing nothing ----------------------------------------------------------------------------

SORT = (Path(__file__).resolve().parent.parent / "models" / "sort.safetensors").read_bytes()


def test_a_failed_save_is_reported_and_every_saved_model_is_kept(manager, tmp_path, monkeypatch):
    kept = tmp_path / "kept.safetensors"
    kept.write_bytes(SORT)

    def disk_full(fd):  # after the bytes went to the temporary file, before the rename
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tfviz.checkpoint.os.fsync", disk_full)
    job = manager.submit(spec("new"), tmp_path)
    assert job.wait(60)
    snap = job.snapshot()
    assert snap.status == jobs.FAILED
    assert "saving new.safetensors failed (No space left on device)" in snap.message
    assert "nothing was written" in snap.message
    assert [p.name for p in tmp_path.iterdir()] == ["kept.safetensors"]  # no part, no temp file
    assert kept.read_bytes() == SORT
    assert load_checkpoint(kept)[1].task == "sort"
    assert manager.counts() == (0, 0)


def test_a_model_saved_under_the_same_name_meanwhile_is_not_overwritten(manager, tmp_path):
    target = tmp_path / "same.safetensors"

    def someone_saves_it() -> bool:  # asked during training: another writer gets there first
        if not target.exists():
            target.write_bytes(SORT)
        return True

    job = manager.submit(spec("same"), tmp_path, is_alive=someone_saves_it)
    assert job.wait(60)
    snap = job.snapshot()
    assert snap.status == jobs.FAILED
    assert "appeared while this one trained" in snap.message and "not saved" in snap.message
    assert target.read_bytes() == SORT
    assert load_checkpoint(target)[1].task == "sort"


def test_models_over_the_parameter_budget_are_refused(manager, tmp_path):
    big = jobs.JobSpec(task="reverse", name="big", d_model=1024, n_heads=8, d_ff=4096, n_layers=4)
    with pytest.raises(ValueError, match=r"has [\d,]+ parameters; .* at most 5,000,000"):
        manager.submit(big, tmp_path)
    largest_in_the_form = replace(big, d_model=256, d_ff=512)
    assert largest_in_the_form.model_config().n_params < jobs.MAX_PARAMS


@pytest.mark.parametrize(
    "sizes",
    [
        dict(),
        dict(d_model=16, n_heads=2, n_layers=1, d_ff=32),
        dict(d_model=96, n_heads=3, n_layers=3, d_ff=40, norm="pre"),
        dict(d_model=8, n_heads=1, n_layers=2, d_ff=8, max_len=30),
    ],
)
@pytest.mark.parametrize("task", ["reverse", "sum", "balanced", "histogram"])
def test_count_parameters_matches_a_real_model(task, sizes):
    from tfviz import Encoder, get_task

    t = get_task(task)
    configs = [t.model_config(**sizes)]
    if task == "sum":  # digits without BOS: the "value" embedding is possible too
        configs.append(replace(configs[0], embed="value"))
    for config in configs:
        real = sum(p.numel() for p in Encoder(config).parameters())
        assert config.n_params == real, config
