"""What jobs and form checks say, as keys and values: the library words nothing for a page.

A job's progress ("training", "measuring the model on 1000 fresh examples"), how it ended ("saved
as sort_3f9a.safetensors", "cancelled after 40 steps; not saved") and why a form was refused
("steps must be a whole number from 1 to 100,000; got 2.5") are each a `Message`: a key of
MESSAGES and the numbers and names its wording takes. The app words a message in the page's
language through its catalogue (key "jobs.message.<key>", with the same placeholders;
tfviz.ui.views.train.job_text); `Message.english()` words it from MESSAGES for logs, the command
line and tests.

A value named in CHOICES is one of a fixed set (a W_o start, an experiment's condition, a form
field), worded from that set rather than shown as it is; a value that is itself a Message (how far
a cancelled job got) is worded the same way as its parent.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

# key -> English template. Grouped by who says it; one vocabulary, so a test can hold every key to
# the catalogue.
MESSAGES = {
    # the manager (tfviz.jobs), for a job of any kind
    "waiting": "waiting for a free slot",
    "starting": "starting",
    "cancelled": "cancelled {how_far}",
    "abandoned": "stopped (the browser session that started it has closed) {how_far}",
    "cancelled_waiting": "cancelled while waiting; never started",
    "owner_gone_waiting": "never started: the browser session that started it has closed",
    "shutdown_waiting": "never started: the server is shutting down",
    "error": "unexpected error: {error}",
    # training a model (tfviz.work.TrainWork) and a lesson's recipe (tfviz.lessons.RecipeWork)
    "training": "training",
    "evaluating": "measuring the model on {n} fresh examples",
    "after_steps": "after {steps} steps",
    "after_steps_not_saved": "after {steps} steps; not saved",
    "saved": "saved as {file}",
    "name_appeared": (
        "a model named '{name}' appeared while this one trained; it was kept as it is and this "
        "one was not saved"
    ),
    "save_failed": (
        "trained, but saving {file} failed ({why}); nothing was written and every saved model "
        "is as it was"
    ),
    "recipe_trained": "trained {recipe} for {steps} steps",
    # retraining W_o alone (tfviz.work.RetrainWoWork)
    "measuring_learned": "measuring the learned W_o",
    "retraining": "training W_o alone from {start}",
    "retrained": "W_o retrained alone for {steps} steps",
    # rerunning the experiment (tfviz.work.ExperimentWork)
    "run_curve": "curve of run {run} of {runs}: random seed {seed}, {condition}",
    "run_curve_together": (
        "curve of run {run} of {runs} (all {runs} runs train together): random seed {seed}, "
        "{condition}"
    ),
    "no_run_finished": "after {done} of {total} steps; no run had finished",
    "runs_kept": "after {finished} of {runs} runs; the finished ones are kept",
    "runs_finished": "{finished} runs finished",
    # refusals of a form's values (tfviz.checks, the specs of tfviz.work)
    "whole_number": "{field} must be a whole number from {low} to {high}; got {got}",
    "number_in_range": "{field} must be a number from {low} to {high}; got {got}",
    "positive_at_most": "{field} must be a number above 0 and at most {high}; got {got}",
    "one_of": "{field} must be one of {options}; got {got}",
    "too_big": (
        "the model has {n} parameters; this server takes models of at most {most} (make "
        "d_model, d_ff or the number of layers smaller)"
    ),
    "name_taken": "a model named '{name}' already exists or is being trained; choose another name",
}

# value name -> {value: English}: values worded from a fixed set (the app: its catalogue's labels)
CHOICES = {
    "condition": {
        "learned": "with W_o",
        "identity": "without W_o",
        "block_diagonal": "block-diagonal W_o",
    },
    "start": {"identity": "identity", "zero": "zeros", "random": "random", "learned": "learned"},
    "field": {
        "steps": "steps",
        "lr": "the learning rate",
        "seed": "the random seed",
        "seeds": "random seeds",
        "w_o": "W_o",
        "start": "W_o's start",
    },
}


def placeholders(template: str) -> set[str]:
    """The {names} a template takes."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@dataclass(frozen=True)
class Message:
    """One thing a job or a check says: a key of MESSAGES and the values its wording takes.

    Refused at once if the key is unknown or the values do not match its placeholders, so a typo
    fails where it is made, not on a page.
    """

    key: str
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        template = MESSAGES.get(self.key)
        if template is None:
            raise KeyError(f"no job message {self.key!r}")
        if set(self.values) != placeholders(template):
            raise ValueError(
                f"message {self.key!r} takes {sorted(placeholders(template))}, "
                f"got {sorted(self.values)}"
            )
        for name, value in self.values.items():
            if name in CHOICES and value not in CHOICES[name]:
                raise ValueError(f"{name} is one of {list(CHOICES[name])}, got {value!r}")

    def english(self) -> str:
        return MESSAGES[self.key].format(
            **{name: english_value(name, value) for name, value in self.values.items()}
        )

    __str__ = english


def english_value(name: str, value: Any) -> str:
    if isinstance(value, Message):
        return value.english()
    if name in CHOICES:
        return CHOICES[name][value]
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def say(key: str, **values: Any) -> Message:
    """Message(key, values), written as a call."""
    return Message(key, values)


class Refused(ValueError):
    """A form's value refused; `message` says why as a Message (str(): the English)."""

    def __init__(self, message: Message):
        super().__init__(message.english())
        self.message = message
