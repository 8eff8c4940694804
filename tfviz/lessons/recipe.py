"""Lesson 3, the digit-sum model in its original setting (seed 002): RecipeWork trains a bundled
recipe (tfviz/training/recipes.py, `sum_seed`) as a job of the app's one JobManager
(tfviz.serve.jobs) and keeps the model in memory; `predict` reads the answer for typed digits,
`attention_pair` the same model's attention for two inputs."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass

import numpy as np

from tfviz.core.model import Transformer
from tfviz.core.tasks import Task, get_task
from tfviz.core.trace import run_trace
from tfviz.messages import Message, say
from tfviz.serve.checks import whole_number
from tfviz.serve.jobs import Stopped, step_reporter
from tfviz.settings import MAX_STEPS
from tfviz.training.evaluate import evaluate
from tfviz.training.recipes import RECIPES
from tfviz.training.train import resolve_device, train

LESSON_RECIPE = "sum_seed"  # seed 002's exact settings (tfviz/training/recipes.py)
# What train() takes from a recipe (tfviz.cli.train reads the same keys to build the bundled
# models).
_TRAIN_KEYS = ("steps", "batch_size", "lr", "seed", "w_o", "min_len", "max_len", "schedule")
EVAL_N = 500  # fresh examples behind the MAE shown after training (at the recipe's length)


@dataclass(frozen=True)
class RecipeSpec:
    """Train a bundled recipe again; steps None keeps the recipe's own number of steps."""

    recipe: str = LESSON_RECIPE
    steps: int | None = None

    def check(self) -> dict:
        """The recipe with the steps applied, or ValueError (Refused for the steps) saying what is
        allowed."""
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; known: {', '.join(RECIPES)}")
        recipe = dict(RECIPES[self.recipe])
        if self.steps is not None:
            recipe["steps"] = whole_number(self.steps, "steps", 1, MAX_STEPS, int_only=True)
        return recipe

    @property
    def task(self) -> str:
        return RECIPES[self.recipe]["task"] if self.recipe in RECIPES else ""

    @property
    def total_steps(self) -> int:
        return self.check()["steps"]


@dataclass(frozen=True)
class RecipeResult:
    """A model trained from a recipe, kept in memory (never saved), and how it scores."""

    model: Transformer
    history: dict
    metrics: dict  # tfviz.training.evaluate on EVAL_N fresh examples at the recipe's eval length


class RecipeWork:
    """A job (tfviz.serve.jobs' Work protocol) that trains a recipe exactly as the bundled model
    was.

    tfviz.serve.work.TrainWork trains from a JobSpec, which cannot say "value embedding, dropout
    0.1, length 8 only, constant learning rate" (seed 002's setting), and saves into the shared
    models folder; a lesson wants the recipe as it is and a model for this session only. Same
    manager, same cap and queue, same job states.
    """

    kind = "lesson"

    def __init__(self, spec: RecipeSpec, device: str = "auto"):
        self.spec = spec
        self.device = device
        self.result: RecipeResult | None = None
        self._recipe: dict | None = None

    @property
    def total(self) -> int:
        return self.spec.total_steps

    @property
    def claim(self) -> None:
        return None  # nothing is written: any number of lessons may train side by side

    def validate(self, claimed: Collection[Hashable]) -> None:
        self._recipe = self.spec.check()

    def run(self, report, should_stop: Callable[[], bool]) -> Message:
        recipe = self._recipe or self.spec.check()
        task = get_task(recipe["task"])
        config = task.model_config(**recipe.get("sizes", {}))
        kwargs = {key: recipe[key] for key in _TRAIN_KEYS if key in recipe}
        report(message=say("training"))

        on_step = step_reporter(report, should_stop)
        model, history = train(
            task, config, device=str(resolve_device(self.device)), on_step=on_step, **kwargs
        )
        if history["cancelled"]:
            raise Stopped(say("after_steps", steps=history["steps_done"]))
        report(message=say("evaluating", n=EVAL_N))
        n = recipe.get("eval_len")
        metrics = evaluate(model, task, n=EVAL_N, min_len=n, max_len=n)
        self.result = RecipeResult(model=model, history=history, metrics=metrics)
        return say("recipe_trained", recipe=self.spec.recipe, steps=history["steps_done"])


def predict(model: Transformer, task: Task, text: str, **switches_) -> tuple[str, str]:
    """(the model's answer, the right answer) for a typed sequence; ValueError if text is bad."""
    task.validate(text)
    return task.predict(model, text, **switches_), task.solve(text)


@dataclass(frozen=True)
class AttentionPair:
    """Seed 002's point measured: the same model's attention for two inputs."""

    attn: tuple[np.ndarray, np.ndarray]  # each (L, H, T, T)
    labels: tuple[list[str], list[str]]  # each input's T position labels
    max_diff: np.ndarray  # (L,) max |weight a - weight b| over heads and positions, per layer


def attention_pair(model: Transformer, task: Task, a: str, b: str) -> AttentionPair:
    """The attention of two typed sequences of the same length (ValueError otherwise), and how
    far apart they are: the weights are computed from the input, so they differ with it."""
    traces = [run_trace(model, task, text) for text in (a, b)]
    attn = tuple(np.asarray(tr.attn, dtype=np.float64) for tr in traces)
    if attn[0].shape != attn[1].shape:
        raise ValueError(f"the two sequences must have the same length, got {len(a)} and {len(b)}")
    diff = np.abs(attn[0] - attn[1]).reshape(len(attn[0]), -1).max(axis=1)
    return AttentionPair(attn, (list(traces[0].labels), list(traces[1].labels)), diff)
