"""Every bundled model loads, is small, and meets its target on 2,000 fresh examples."""

from __future__ import annotations

import operator

import pytest

from tests.conftest import MODELS
from tfviz import get_task, load_checkpoint
from tfviz.training.evaluate import EVAL_SEED, evaluate
from tfviz.training.recipes import RECIPES, TARGETS

FRESH_SEED = EVAL_SEED + 17  # not the seed the saved metrics were measured with


@pytest.mark.parametrize("name", list(RECIPES))
def test_bundled_model_loads_and_is_under_one_megabyte(name):
    path = MODELS / f"{name}.safetensors"
    assert path.stat().st_size < 1_000_000
    model, meta = load_checkpoint(path)
    task = get_task(meta.task)
    assert meta.task == RECIPES[name]["task"]
    assert meta.record["steps_done"] == RECIPES[name]["steps"]
    assert meta.metrics["n"] == 2000
    # Every length a person may type is accepted, from the shortest to the longest.
    for n in (task.min_len, task.max_len):
        text = (task.alphabet * task.max_len)[:n]
        assert len(task.predict_tokens(model, text)) == len(task.solve_tokens(text))


@pytest.mark.parametrize("name", list(TARGETS))
def test_bundled_model_meets_its_target_on_fresh_data(name):
    metric, op, bound, lengths = TARGETS[name]
    model, meta = load_checkpoint(MODELS / f"{name}.safetensors")
    result = evaluate(model, meta.task, n=2000, seed=FRESH_SEED, **lengths)
    compare = operator.ge if op == ">=" else operator.le
    assert compare(result[metric], bound), f"{name}: {metric} {result[metric]:.4f} {op} {bound}"


def test_models_readme_lists_every_bundled_model():
    text = (MODELS / "README.md").read_text()
    for name in RECIPES:
        assert f"| {name} |" in text


def test_seed_model_uses_seed_002_settings():
    _, meta = load_checkpoint(MODELS / "sum_seed.safetensors")
    c, r = meta.config, meta.record
    assert (c.d_model, c.n_heads, c.d_ff, c.n_layers, c.max_len, c.dropout) == (
        32,
        4,
        64,
        2,
        16,
        0.1,
    )
    assert (c.embed, c.pool, c.norm) == ("value", "mean", "post")
    assert (r["lr"], r["batch_size"], r["steps"], r["min_len"], r["max_len"]) == (
        1e-3,
        64,
        500,
        8,
        8,
    )
    assert r["schedule"] == "constant"
