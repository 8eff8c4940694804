"""tfviz.training.timeline: bounded snapshots of a training run, saved safely, replayed for the
slider."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tfviz import get_task, train
from tfviz.analysis import head_importance, w_o_mixing
from tfviz.core.trace import run_trace
from tfviz.training.checkpoint import CheckpointError
from tfviz.training.timeline import (
    Timeline,
    load_timeline,
    replay,
    replay_step,
    save_timeline,
    timeline_path,
)

TINY = dict(d_model=16, n_heads=2, d_ff=16, n_layers=2, dropout=0.0)


@pytest.fixture(scope="module")
def run():
    task = get_task("reverse")
    config = task.model_config(**TINY)
    timeline = Timeline(every=5, max_snapshots=4)
    model, history = train(task, config, steps=40, batch_size=16, timeline=timeline)
    return task, config, timeline, model, history


def test_snapshots_stay_bounded_and_evenly_spread(run):
    _, _, timeline, model, _ = run
    # 40 steps, every 5, at most 4 kept: the interval doubled twice (5 -> 10 -> 20).
    assert timeline.steps == [0, 20, 40] and timeline.every == 20
    final = timeline.model_at(2, model.config)
    assert all(torch.equal(final.state_dict()[k], v) for k, v in model.state_dict().items())
    first = timeline.model_at(0, model.config)
    assert not torch.equal(first.layers[0].attn.W_o.weight, model.layers[0].attn.W_o.weight)


def test_recording_changes_no_training_result(run):
    task, config, _, model, history = run
    again, plain = train(task, config, steps=40, batch_size=16)
    assert plain["loss"] == history["loss"]
    assert all(torch.equal(again.state_dict()[k], v) for k, v in model.state_dict().items())


def test_a_timeline_round_trips_and_a_bad_file_is_refused(run, tmp_path):
    _, config, timeline, _, _ = run
    path = save_timeline(timeline_path(tmp_path / "m.safetensors"), timeline)
    assert path.name == "m.timeline"
    back = load_timeline(path, config)
    assert back.steps == timeline.steps
    for a, b in zip(back.states, timeline.states, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    other = get_task("reverse").model_config(**{**TINY, "d_model": 8})
    with pytest.raises(CheckpointError, match="shape"):
        load_timeline(path, other)
    (tmp_path / "junk.timeline").write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="not a tfviz timeline"):
        load_timeline(tmp_path / "junk.timeline", config)


def test_replay_shows_attention_mixing_and_importance_at_every_step(run):
    task, config, timeline, _, _ = run
    r = replay(timeline, config, task, "abcd", n=16)
    S, L, H, T = 3, 2, 2, 5  # + BOS
    assert r.steps == [0, 20, 40]
    assert r.attn.shape == (S, L, H, T, T) and r.mixing.shape == (S, L)
    assert r.importance.shape == (S, L, H) and r.loss.shape == (S,)
    np.testing.assert_allclose(r.attn.sum(-1), 1.0, atol=1e-5)
    assert r.loss[-1] < r.loss[0]  # it learned something in 40 steps
    assert not np.allclose(r.attn[0], r.attn[-1])
    with pytest.raises(ValueError, match="empty"):
        replay(Timeline(), config, task, "abcd")


def test_one_step_replayed_is_that_snapshot_measured_directly(run):
    """What the slider shows at a step: the snapshot's own trace, W_o mixing and importance."""
    task, config, timeline, model, _ = run
    last = replay_step(timeline, len(timeline.steps) - 1, config, task, "abcd", n=16)
    assert last.step == 40  # the final weights: the trained model itself
    np.testing.assert_array_equal(last.attn, run_trace(model, task, "abcd").attn)
    assert last.labels == run_trace(model, task, "abcd").labels
    np.testing.assert_array_equal(last.mixing, w_o_mixing(model).mixing)
    imp = head_importance(model, task, n=16)
    np.testing.assert_array_equal(last.importance, imp.loss_change)
    assert last.loss == pytest.approx(imp.base_loss)
    whole = replay(timeline, config, task, "abcd", n=16)
    first = replay_step(timeline, 0, config, task, "abcd", n=16)
    np.testing.assert_array_equal(first.attn, whole.attn[0])
    np.testing.assert_array_equal(first.importance, whole.importance[0])
    with pytest.raises(IndexError, match="keeps 3 steps"):
        replay_step(timeline, 3, config, task, "abcd")
    with pytest.raises(ValueError):
        replay_step(timeline, 0, config, task, "abcz")  # z is not in reverse's alphabet
