"""Lesson 4, switch W_o off and watch the outputs change: the same sequence predicted with the
learned W_o and with W_o switched (a forward argument: the model is not changed)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tfviz.core.interventions import switches
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task
from tfviz.lessons.concat import check_layer


@dataclass(frozen=True)
class SwitchResult:
    """The same sequence with the learned W_o and with W_o switched."""

    learned: str  # the model's answer with its learned W_o
    switched: str  # with the switch
    answer: str  # the right answer
    tokens_changed: int  # answer tokens that differ between learned and switched
    max_change: float  # max |output| change over the model's raw outputs (logits or values)


@torch.no_grad()
def w_o_switch(
    model: Transformer, task: Task, text: str, w_o: str = "identity", layer: int | None = None
) -> SwitchResult:
    """Predict text with the learned W_o and with W_o switched (all layers, or one layer).

    The model is not changed: the switch is a forward argument (tfviz.core.interventions).
    """
    task.validate(text)
    if layer is not None:
        check_layer(model, layer)
    iv = switches(w_o, layer)
    ids, pad = task.encode_batch([text], device=model.device)
    base = model(ids, pad, trace=False).logits
    changed = model(ids, pad, iv, trace=False).logits
    learned_tokens = task.answer_from_logits(base[0], len(text))
    switched_tokens = task.answer_from_logits(changed[0], len(text))
    differ = sum(a != b for a, b in zip(learned_tokens, switched_tokens, strict=True))
    change = float((changed - base).abs().max())
    return SwitchResult(
        learned=task.sep.join(learned_tokens),
        switched=task.sep.join(switched_tokens),
        answer=task.solve(text),
        tokens_changed=differ,
        max_change=change if math.isfinite(change) else float("inf"),
    )
