"""tfviz.serve.work through the one job manager: training a model (saving, names, limits, its
timeline), rerunning the W_o experiment and retraining W_o alone, each reporting Message values;
nothing is lost when a save fails or a name is taken meanwhile."""

from __future__ import annotations

import errno
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.conftest import wait_until
from tfviz import load_checkpoint, settings
from tfviz.experiments import experiment
from tfviz.messages import say
from tfviz.serve import jobs, work

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16)


def spec(name: str, steps: int = 20, **kw) -> work.JobSpec:
    return work.JobSpec(name=name, steps=steps, **{"task": "reverse", **TINY, **kw})


def submit_train_work(manager, folder, name, steps=20, reserved=frozenset(), is_alive=None, **kw):
    training = work.TrainWork(spec(name, steps, **kw), folder, reserved=reserved, device="cpu")
    return manager.submit(training, is_alive=is_alive)


def experiment_work(task: str = "balanced", seeds: int = 1, steps: int = 5) -> work.ExperimentWork:
    return work.ExperimentWork(work.ExperimentSpec(task, seeds=seeds, steps=steps))


# ---- training ----------------------------------------------------------------------------------


def test_a_job_trains_saves_and_reports(manager, tmp_path):
    job = submit_train_work(manager, tmp_path, "tiny")
    assert job.wait(60)
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    assert snap.kind == "train" and snap.message == say("saved", file="tiny.safetensors")
    assert snap.step == snap.done == snap.total == 20 and len(snap.losses) == 20
    assert snap.fraction == 1.0 and snap.loss is not None
    assert snap.result.path == str(tmp_path / "tiny.safetensors")
    assert "token_accuracy" in snap.result.metrics
    model, meta = load_checkpoint(snap.result.path)
    assert meta.task == "reverse"
    assert meta.config.d_model == 16 and meta.config.n_layers == 1
    assert meta.record["steps_done"] == 20 and meta.record["name"] == "tiny"
    assert meta.metrics["token_accuracy"] == snap.result.metrics["token_accuracy"]
    assert manager.counts() == (0, 0)
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]  # written atomically


def test_progress_is_readable_while_running_and_cancel_stops_it(manager, tmp_path):
    job = submit_train_work(manager, tmp_path, "long", steps=settings.MAX_STEPS)
    wait_until(lambda: job.state().step >= 3)
    snap = job.state()
    assert snap.status == jobs.RUNNING and snap.active and snap.message == say("training")
    assert len(snap.losses) >= 1 and snap.position is None
    assert 0 < snap.fraction < 1 and snap.total == settings.MAX_STEPS
    job.cancel()
    assert job.wait(30)
    snap = job.state()
    assert snap.status == jobs.CANCELLED and not snap.active
    assert snap.step < settings.MAX_STEPS
    assert snap.message == say("cancelled", how_far=say("after_steps_not_saved", steps=snap.step))
    assert snap.result is None
    assert not (tmp_path / "long.safetensors").exists()


def test_the_cap_queues_the_extra_job_and_refuses_when_full(manager, tmp_path):
    first = submit_train_work(manager, tmp_path, "first", steps=settings.MAX_STEPS)
    second = submit_train_work(manager, tmp_path, "second", steps=settings.MAX_STEPS)
    snap = second.state()
    assert snap.status == jobs.QUEUED and snap.position == 1
    assert snap.message == say("waiting") and snap.fraction == 0.0
    assert manager.counts() == (1, 1)
    with pytest.raises(jobs.QueueFull, match="busy"):
        submit_train_work(manager, tmp_path, "third")
    # When the running job ends, the waiting one takes its slot.
    first.cancel()
    assert first.wait(30)
    wait_until(lambda: second.state().status == jobs.RUNNING)
    assert second.state().position is None
    second.cancel()
    assert second.wait(30)


def test_a_queued_job_can_be_cancelled_before_it_starts(manager, tmp_path):
    first = submit_train_work(manager, tmp_path, "first", steps=settings.MAX_STEPS)
    second = submit_train_work(manager, tmp_path, "second")
    second.cancel()
    assert second.wait(1)
    snap = second.state()
    assert snap.status == jobs.CANCELLED and snap.step == 0
    assert snap.message == say("cancelled_waiting")
    assert manager.counts() == (1, 0)
    first.cancel()
    assert first.wait(30)


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
        submit_train_work(manager, tmp_path, name, reserved=frozenset({"reverse"}))
    assert manager.counts() == (0, 0)


def test_a_name_being_trained_is_taken(manager, tmp_path):
    job = submit_train_work(manager, tmp_path, "same", steps=settings.MAX_STEPS)
    with pytest.raises(ValueError, match="already exists or is being trained"):
        submit_train_work(manager, tmp_path, "same")
    job.cancel()
    assert job.wait(30)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(steps=settings.MAX_STEPS + 1), "(?i)steps must be a whole number from 1 to 20,000"),
        (dict(steps=0), "(?i)steps must be"),
        (dict(lr=0.0), "learning rate"),
        (dict(w_o="rank:2"), "W_o must be one of learned, identity, zero, block_diagonal; got"),
        (dict(d_model=30, n_heads=4), "divisible by n_heads"),
        (dict(task="nope"), "unknown task"),
    ],
)
def test_bad_settings_are_refused_with_a_message(manager, tmp_path, changes, message):
    steps = changes.pop("steps", 20)
    with pytest.raises(ValueError, match=message):
        submit_train_work(manager, tmp_path, "x", steps=steps, **changes)
    assert manager.counts() == (0, 0)


# ---- experiment reruns ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(seeds=0), "(?i)seeds per condition must be a whole number"),
        (dict(seeds=6), "from 1 to 5"),
        (dict(steps=2001), "from 1 to 2,000"),
        (dict(task="nope"), "nope"),
        (dict(against="zero"), "compared with one of"),
        (dict(against="learned"), "compared with one of"),
    ],
)
def test_a_rerun_with_settings_out_of_range_is_refused(settings, message):
    m = jobs.JobManager(max_jobs=1, max_queue=0)
    with pytest.raises(ValueError, match=message):
        m.submit(work.ExperimentWork(work.ExperimentSpec(**{"task": "reverse", **settings})))
    assert m.counts() == (0, 0)  # a refused rerun holds no slot


def test_a_rerun_runs_every_seed_with_and_without_w_o(manager):
    job = manager.submit(experiment_work(seeds=1, steps=5))
    assert job.wait(60)
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    assert snap.kind == "experiment" and snap.message == say("runs_finished", finished=2)
    assert (snap.done, snap.total, snap.fraction) == (10, 10, 1.0)
    assert snap.step == 5 and len(snap.losses) == 5  # the curve of the first run
    assert [r.condition for r in snap.result.runs] == list(experiment.CONDITIONS)
    assert snap.losses == pytest.approx(snap.result.runs[0].losses, rel=1e-5)
    assert manager.counts() == (0, 0)


def test_a_rerun_can_compare_the_learned_w_o_with_a_block_diagonal_one(manager):
    spec = work.ExperimentSpec(task="reverse", seeds=2, steps=4, against="block_diagonal")
    job = manager.submit(work.ExperimentWork(spec))
    assert job.wait(60)
    snap = job.state()
    assert snap.status == jobs.DONE and (snap.done, snap.total) == (16, 16)
    runs = [(r.condition, r.seed) for r in snap.result.runs]
    assert runs == [("learned", 0), ("block_diagonal", 0), ("learned", 1), ("block_diagonal", 1)]
    assert snap.result.against == ("block_diagonal",)


def test_a_rerun_waits_in_the_queue_behind_training_like_any_job(manager, tmp_path):
    training = submit_train_work(manager, tmp_path, "first", steps=settings.MAX_STEPS)
    job = manager.submit(experiment_work(seeds=1, steps=5))
    snap = job.state()
    assert (snap.kind, snap.status, snap.position) == ("experiment", jobs.QUEUED, 1)
    assert snap.message == say("waiting")
    with pytest.raises(jobs.QueueFull, match="all 1 training slots are busy"):
        manager.submit(experiment_work())  # a full queue refuses reruns as it refuses training
    training.cancel()
    assert training.wait(30)
    assert job.wait(60) and job.state().status == jobs.DONE  # it ran once the slot was free
    assert manager.counts() == (0, 0)


def test_training_waits_for_a_running_rerun(manager, tmp_path):
    job = manager.submit(experiment_work(seeds=2, steps=settings.EXPERIMENT_MAX_STEPS))
    training = submit_train_work(manager, tmp_path, "after_rerun")
    assert training.state().position == 1 and manager.counts() == (1, 1)
    wait_until(lambda: job.state().step >= 3)
    snap = job.state()
    assert snap.status == jobs.RUNNING and snap.message == say(
        "run_curve_together", run=1, runs=4, seed=0, condition="learned"
    )
    assert 0 < snap.fraction < 1 and snap.total == 4 * settings.EXPERIMENT_MAX_STEPS
    assert snap.loss is not None and snap.result is None
    job.cancel()
    assert job.wait(30)
    snap = job.state()
    assert snap.status == jobs.CANCELLED
    how_far = snap.message.values["how_far"]
    assert snap.message.key == "cancelled" and how_far.key == "no_run_finished"
    assert how_far.values["total"] == 8000
    assert snap.result.cancelled and not snap.result.runs
    assert training.wait(60) and training.status == jobs.DONE  # started once the slot came back
    assert manager.counts() == (0, 0)


# ---- losing nothing ----------------------------------------------------------------------------

SORT = (Path(__file__).resolve().parents[2] / "models" / "sort.safetensors").read_bytes()


def test_a_failed_save_is_reported_and_every_saved_model_is_kept(manager, tmp_path, monkeypatch):
    kept = tmp_path / "kept.safetensors"
    kept.write_bytes(SORT)

    def disk_full(fd):  # after the bytes went to the temporary file, before the rename
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tfviz.training.checkpoint.os.fsync", disk_full)
    job = submit_train_work(manager, tmp_path, "new")
    assert job.wait(60)
    snap = job.state()
    assert snap.status == jobs.FAILED
    # The system's reason, worded by the catalogue in each language (tfviz.refusal.cause)
    assert snap.message.key == "save_failed" and snap.message.values["file"] == "new.safetensors"
    assert "saving new.safetensors failed (the disk is full)" in snap.message.english()
    assert "磁盘已满" in snap.message.text("zh") and "No space" not in snap.message.text("zh")
    assert [p.name for p in tmp_path.iterdir()] == ["kept.safetensors"]  # no part, no temp file
    assert kept.read_bytes() == SORT
    assert load_checkpoint(kept)[1].task == "sort"
    assert manager.counts() == (0, 0)


def test_a_model_saved_under_the_same_name_meanwhile_is_not_overwritten(manager, tmp_path):
    target = tmp_path / "same.safetensors"
    job = submit_train_work(manager, tmp_path, "same", steps=2000)
    wait_until(lambda: job.state().step >= 1)
    target.write_bytes(SORT)  # during training, another writer gets there first
    assert job.wait(300)  # 2000 steps: 120 s ran out on 2 cores shared by two test workers
    snap = job.state()
    assert snap.status == jobs.FAILED
    assert snap.message == say("name_appeared", name="same")
    assert target.read_bytes() == SORT
    assert load_checkpoint(target)[1].task == "sort"


def test_models_over_the_parameter_budget_are_refused(manager, tmp_path):
    big = work.JobSpec(task="reverse", name="big", d_model=1024, n_heads=8, d_ff=4096, n_layers=4)
    with pytest.raises(ValueError, match=r"has [\d,]+ parameters; .* at most 5,000,000"):
        manager.submit(work.TrainWork(big, tmp_path))
    largest_in_the_form = replace(big, d_model=256, d_ff=512)
    assert largest_in_the_form.model_config().n_params < settings.MAX_PARAMS


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


# ---- training timeline and W_o retraining through the one job system ---------------------------


def test_a_training_job_saves_its_timeline_beside_the_model(manager, tmp_path):
    from tfviz.training.timeline import load_timeline

    job = submit_train_work(manager, tmp_path, "with_timeline", steps=48)
    assert job.wait(60) and job.state().status == jobs.DONE
    result = job.state().result
    assert result.timeline == str(tmp_path / "with_timeline.timeline")
    model, _ = load_checkpoint(result.path)
    timeline = load_timeline(result.timeline, model.config)
    assert timeline.steps[0] == 0 and timeline.steps[-1] == 48
    assert len(timeline.steps) <= 24 + 1
    last = timeline.model_at(len(timeline.steps) - 1, model.config)
    assert all(torch.equal(last.state_dict()[k], v) for k, v in model.state_dict().items())


def test_retraining_w_o_alone_runs_as_a_job_and_leaves_the_shared_model_alone(manager):
    shared, meta = load_checkpoint(Path(__file__).resolve().parents[2] / "models/sort.safetensors")
    before = {k: v.clone() for k, v in shared.state_dict().items()}
    spec = work.RetrainSpec(meta.task, start="identity", steps=40)
    job = manager.submit(work.RetrainWoWork(spec, shared))
    assert job.wait(120)
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    r = snap.result
    key = "token_accuracy"
    assert r.metrics_learned[key] > 0.95 and r.metrics_start[key] < r.metrics_learned[key]
    assert r.metrics_after[key] > r.metrics_start[key]  # accuracy comes back with W_o retrained
    assert len(r.losses) == 40 and snap.step == 40
    # The metric curve: step 0 (the start), every 40 // RETRAIN_CURVE_POINTS steps, the last.
    assert r.curve_steps == list(range(0, 41, 40 // work.RETRAIN_CURVE_POINTS))
    assert r.metrics_start is r.curve[0] and r.metrics_after is r.curve[-1]
    assert all(torch.equal(before[k], v) for k, v in shared.state_dict().items())


def test_the_metric_curve_measures_the_model_being_retrained_on_fixed_examples():
    from tfviz.training.evaluate import evaluate
    from tfviz.training.train import retrain_w_o, with_w_o_start

    shared, meta = load_checkpoint(Path(__file__).resolve().parents[2] / "models/sort.safetensors")
    curve = work.MetricCurve(meta.task, steps=7, every=3, n=64)
    copy, _ = retrain_w_o(shared, meta.task, start="zero", steps=7, recorder=curve)
    assert curve.done == [0, 3, 6, 7]  # the interval, and the last step however it falls
    # Its ends are exactly the start and the result, measured on the same examples.
    assert curve.metrics[0] == evaluate(with_w_o_start(shared, "zero"), meta.task, n=64)
    assert curve.metrics[-1] == evaluate(copy, meta.task, n=64)
    assert curve.metrics[0] != curve.metrics[-1]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"start": "ones"}, "W_o's start must be one of identity, zero, random, learned"),
        ({"steps": 0}, "(?i)steps must be a whole number from 1"),
        ({"lr": float("nan")}, "learning rate"),
        ({"task": "nope"}, "unknown task"),
    ],
)
def test_a_bad_w_o_retraining_is_refused_on_submit(manager, kw, message):
    shared, meta = load_checkpoint(Path(__file__).resolve().parents[2] / "models/sort.safetensors")
    spec = work.RetrainSpec(**{"task": meta.task, **kw})
    with pytest.raises(ValueError, match=message):
        manager.submit(work.RetrainWoWork(spec, shared))
