"""A class's first training learns: every task trained with the Train tab's defaults, through the
app's own job, reaches its task's level (tfviz.training.recipes.LEARNED). The full defaults, one
seed each (seed 0, the form's); bench/train_defaults.py runs three seeds and reports the seconds.

About 15 s a task on one core: the longest test file, and the one a class depends on most.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tfviz import get_task, list_tasks
from tfviz.serve import jobs, work
from tfviz.training.checkpoint import load_checkpoint
from tfviz.training.recipes import CLASS_RECIPES, LEARNED, class_recipe, learned


def test_every_task_has_a_first_run_recipe_and_a_level():
    assert set(CLASS_RECIPES) == set(LEARNED) == set(list_tasks())
    for task in list_tasks():
        recipe = class_recipe(task)
        metric = get_task(task).metric
        assert learned(task, metric, recipe.expected), f"{task}: expects less than its level"
        assert recipe.seconds < 30


@pytest.mark.parametrize("task", list_tasks())
def test_the_train_tabs_defaults_learn_the_task(task, tmp_path):
    spec = work.JobSpec(task=task, name=f"first_{task}")  # every setting left to its default
    recipe = class_recipe(task)
    assert (spec.steps, spec.lr, spec.batch_size) == (recipe.steps, recipe.lr, recipe.batch_size)
    manager = jobs.JobManager(max_jobs=1, max_queue=0)
    job = manager.submit(work.TrainWork(spec, tmp_path, device="cpu"))
    assert job.wait(300), f"{task}: the training did not end in 5 minutes"
    snap = job.state()
    assert snap.status == jobs.DONE, snap.message
    metric = get_task(task).metric
    value = snap.result.metrics[metric]
    assert learned(task, metric, value), f"{task}: {metric} {value:.4f}, level {LEARNED[task]}"
    _, meta = load_checkpoint(tmp_path / f"first_{task}.safetensors")
    assert meta.metrics[metric] == pytest.approx(value)  # what was saved is what was measured


def test_the_command_line_trains_with_the_same_defaults(tmp_path):
    # As a person runs it.
    out = tmp_path / "cli.safetensors"
    command = [sys.executable, "-m", "tfviz.cli.train", "--task", "sort", "--out", str(out)]
    done = subprocess.run([*command, "--steps", "3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    _, meta = load_checkpoint(out)
    recipe = class_recipe("sort")
    assert (meta.record["lr"], meta.record["batch_size"]) == (recipe.lr, recipe.batch_size)
    assert meta.record["steps"] == 3
