"""tfviz.serve.work.LanguageWork through the one job manager: a character language model trained
on the bundled corpus and saved as a model folder (atomically, never over a model or a toy
checkpoint of its name), its settings refused with a code each, a stopped run saving nothing, and
the progress bar's time left said from the job's own first steps (how close it comes to the truth:
bench/lm_estimate.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.conftest import wait_until
from tests.support import stop_all
from tfviz import hf, settings
from tfviz.hf.decoders import TFVIZ_MODEL_TYPE
from tfviz.messages import Refused, say
from tfviz.serve import jobs, work
from tfviz.training import language
from tfviz.training.language import FOLDER_FILES, validation_loss

# A small model that trains in a few milliseconds a step.
TINY = dict(n_layers=1, n_heads=2, d_model=32, context=64, batch_size=8)


def lm_spec(name: str, steps: int = 30, **kw) -> work.LanguageSpec:
    return work.LanguageSpec(name=name, steps=steps, **{**TINY, **kw})


def submit(manager, folder, name, steps=30, reserved=frozenset(), is_alive=None, **kw):
    training = work.LanguageWork(lm_spec(name, steps, **kw), folder, reserved, device="cpu")
    return manager.submit(training, is_alive=is_alive)


def hidden(folder) -> list[str]:
    """What a save left behind: temporary files or folders (their names start with a dot)."""
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


# ---- the spec's checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"n_layers": 0}, "lm_layers"),
        ({"n_layers": 5}, "lm_layers"),
        ({"n_layers": 2.0}, "lm_layers"),
        ({"n_layers": True}, "lm_layers"),
        ({"d_model": 48}, "lm_d_model"),
        ({"d_model": 256}, "lm_d_model"),
        ({"n_heads": 3}, "lm_heads"),  # does not divide 32
        ({"n_heads": 16, "d_model": 128}, "lm_heads"),  # divides, but more than 8
        ({"n_heads": 0}, "lm_heads"),
        ({"ffn": 1}, "lm_ffn"),
        ({"context": 100}, "lm_context"),
        ({"context": 512}, "lm_context"),
        ({"positions": "alibi"}, "lm_positions"),
        ({"batch_size": 0}, "lm_batch"),
        ({"batch_size": 65}, "lm_batch"),
        ({"steps": 0}, "whole_number"),
        ({"steps": settings.MAX_STEPS + 1}, "whole_number"),
        ({"steps": 10.0}, "whole_number"),
        ({"lr": 0.0}, "positive_at_most"),
        ({"lr": 0.2}, "positive_at_most"),
        ({"lr": float("nan")}, "positive_at_most"),
        ({"seed": -1}, "whole_number"),
        ({"w_o": "rank:2"}, "one_of"),
        ({"name": ""}, "name_empty"),
        ({"name": "../up"}, "name_bad_chars"),
        ({"name": "x" * 65}, "name_too_long"),
    ],
)
def test_each_bad_setting_is_refused_with_its_code(manager, tmp_path, changes, key):
    spec = replace(lm_spec("fine"), **changes)
    with pytest.raises(Refused) as refused:
        manager.submit(work.LanguageWork(spec, tmp_path, device="cpu"))
    assert refused.value.message.key == key, refused.value.message
    assert "{" not in refused.value.message.text("zh")  # worded in both languages
    assert manager.counts() == (0, 0) and list(tmp_path.iterdir()) == []


def test_the_defaults_are_accepted_and_the_largest_model_is_small():
    work.LanguageSpec(name="default").check()
    largest = work.LanguageSpec(
        name="big", n_layers=4, n_heads=8, d_model=128, ffn=True, context=256, batch_size=64
    )
    largest.check()
    work.LanguageWork(largest, "unused").validate(set())  # under the parameter budget
    assert work.LanguageSpec("x").steps == work.LM_STEPS


# ---- a finished, a stopped and a refused job ---------------------------------------------------


def test_a_finished_job_saves_a_folder_that_opens_with_its_validation_loss(manager, tmp_path):
    job = submit(manager, tmp_path, "tiny_lm", steps=30, is_alive=lambda: False)
    assert job.wait(120)
    snap = job.state()
    # Its tab closed (is_alive says no) and it trained on: the model is for everyone's picker.
    assert snap.status == jobs.DONE, snap.message
    assert snap.kind == "language" and snap.message == say("saved", file="tiny_lm/")
    assert snap.done == snap.total == 30 and len(snap.losses) == 30
    folder = tmp_path / "tiny_lm"
    assert sorted(p.name for p in folder.iterdir()) == sorted(FOLDER_FILES)
    assert hidden(tmp_path) == []  # the temporary folder was renamed into place
    result: work.LanguageResult = snap.result
    assert result.path == str(folder)
    loaded = hf.open_folder(folder)
    assert loaded.model_type == TFVIZ_MODEL_TYPE and loaded.model.config.causal
    config = loaded.model.config
    assert (config.n_layers, config.n_heads, config.d_model, config.max_len) == (1, 2, 32, 64)
    assert not config.ffn and config.positions == "rotary"
    record = hf.files.read_json(folder / "config.json")["record"]
    assert record["valid_loss"] == result.valid_loss and 1.0 < result.valid_loss < 4.5
    assert record["steps_done"] == 30 and record["name"] == "tiny_lm"
    assert record["induction_best"]["score"] == result.induction
    # The record's loss is the saved model's own, re-measured on the first windows.
    _, _, valid_ids, _ = language.bundled_corpus()
    again = validation_loss(loaded.model, valid_ids, max_windows=record["valid_slice_windows"])
    assert again == pytest.approx(record["valid_loss_slice"], abs=2e-4)
    card = (folder / "README.md").read_text()
    assert "Trained in tfviz's Train tab" in card and "Rebuild" not in card
    assert manager.counts() == (0, 0)


def test_a_stopped_job_leaves_no_folder(manager, tmp_path):
    job = submit(manager, tmp_path, "stopped", steps=settings.MAX_STEPS)
    wait_until(lambda: job.state().step >= 3, timeout=60)
    assert job.state().message == say("training")
    job.cancel()
    assert job.wait(30)
    snap = job.state()
    assert snap.status == jobs.CANCELLED and snap.result is None
    assert snap.message == say("cancelled", how_far=say("after_steps_not_saved", steps=snap.step))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("existing", ["taken", "taken.safetensors"])
def test_a_name_taken_by_a_folder_or_a_checkpoint_is_refused(manager, tmp_path, existing):
    if existing.endswith(".safetensors"):
        (tmp_path / existing).write_bytes(b"a toy model")
    else:
        (tmp_path / existing).mkdir()
    with pytest.raises(Refused) as refused:
        submit(manager, tmp_path, "taken")
    assert refused.value.message == say("name_taken", name="taken")


def test_a_bundled_name_is_reserved(manager, tmp_path):
    with pytest.raises(Refused) as refused:
        submit(manager, tmp_path, "shakespeare-2l-attn", reserved={"shakespeare-2l-attn"})
    assert refused.value.message.key == "name_reserved"


def test_a_language_model_and_a_toy_model_never_share_a_name(tmp_path):
    manager = jobs.JobManager(max_jobs=2, max_queue=2)
    try:
        job = submit(manager, tmp_path, "shared", steps=settings.MAX_STEPS)
        toy = work.JobSpec(task="reverse", name="shared", steps=5, d_model=16, n_heads=2)
        with pytest.raises(Refused):  # being trained as a language model
            manager.submit(work.TrainWork(toy, tmp_path, device="cpu"))
        with pytest.raises(Refused):  # the same name twice
            submit(manager, tmp_path, "shared")
        job.cancel()
        assert job.wait(30)
        (tmp_path / "saved").mkdir()  # a language model's folder
        with pytest.raises(Refused) as refused:
            manager.submit(work.TrainWork(replace(toy, name="saved"), tmp_path, device="cpu"))
        assert refused.value.message == say("name_taken", name="saved")
    finally:
        stop_all(manager)


def test_a_model_that_appears_under_the_name_meanwhile_is_kept(manager, tmp_path):
    job = submit(manager, tmp_path, "same", steps=400)
    wait_until(lambda: job.state().step >= 1, timeout=60)
    other = tmp_path / "same"
    other.mkdir()
    (other / "config.json").write_text("{}")  # another writer got there first
    assert job.wait(300)
    snap = job.state()
    assert snap.status == jobs.FAILED and snap.message == say("name_appeared", name="same")
    assert [p.name for p in other.iterdir()] == ["config.json"]
    assert (other / "config.json").read_text() == "{}"
    assert hidden(tmp_path) == []


# ---- the time left ------------------------------------------------------------------------------


def test_the_time_left_is_measured_on_the_job_s_own_steps(manager, tmp_path, monkeypatch):
    """The progress bar's "about N left" (JobState.seconds_left) is said once the job's first
    steps are timed, and is gone once it ends. How close it comes to the truth depends on how
    the machine's load changes while the job runs, so it is measured in a bench
    (bench/lm_estimate.py: the default job, estimate against actual), not asserted here on a
    machine shared with other tests. The app waits for a second of timing; this run is shorter,
    so that wait is left out."""
    monkeypatch.setattr(jobs, "ESTIMATE_AFTER_S", 0.0)
    steps = 120
    job = submit(manager, tmp_path, "timed", steps=steps)
    said = []
    while not job.wait(0.002):
        snap = job.state()
        if snap.seconds_left is not None:
            said.append((snap.done, snap.seconds_left))
        elif snap.done > jobs.ESTIMATE_AFTER_STEPS + 1 and snap.done < steps:
            pytest.fail(f"no time left said at step {snap.done}")
    snap = job.state()
    assert snap.status == jobs.DONE and snap.seconds_left is None, snap.message
    assert said and all(done > jobs.ESTIMATE_AFTER_STEPS for done, _ in said)
    assert all(left >= 0 and math.isfinite(left) for _, left in said)
    assert said[-1][1] < said[0][1]  # fewer steps left, less time left
