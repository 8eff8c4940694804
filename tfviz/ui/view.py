"""What the views draw from: the View (model, sequence, switches, traces) and the per-model
widget keys. The cached computations behind it (traces, similarities, accuracies) are
tfviz.ui.compute's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from tfviz.core.interventions import Interventions
from tfviz.core.tasks import Task
from tfviz.core.trace import TraceArrays
from tfviz.training.checkpoint import CheckpointMeta
from tfviz.ui import state
from tfviz.ui.i18n import t
from tfviz.ui.models import ModelEntry
from tfviz.ui.text import md_escape

# Widget keys whose options depend on the model, each registered by the module that draws the
# widget (per_model); all are forgotten when the model changes (tfviz.ui.sidebar.on_model_change).
_PER_MODEL_KEYS: list[str] = []


def per_model(*keys: str) -> tuple[str, ...]:
    """Register widget keys to forget when the model changes; returns them."""
    _PER_MODEL_KEYS.extend(key for key in keys if key not in _PER_MODEL_KEYS)
    return keys


def forget_per_model() -> None:
    """The model changed: drop every registered widget's value (its options are the old model's)."""
    for key in _PER_MODEL_KEYS:
        state.forget(key)


@dataclass(frozen=True)
class View:
    """Everything the views draw from: the chosen model, the sequence and its traces."""

    entry: ModelEntry
    model: object
    meta: CheckpointMeta
    task: Task  # a toy Task, or a pretrained model's SentenceTask or NextTokenTask
    interventions: Interventions  # the sidebar's switches
    # The model's kind, tfviz.ui.kinds.kind_of(task): what differs between a toy task, an encoder,
    # a masked LM and a decoder, asked of it by the views (typed Any: kinds imports this module).
    kind: Any
    text: str | None = None  # None while the typed sequence is invalid
    trace: TraceArrays | None = None  # with the switches: what the views show
    base: TraceArrays | None = None  # learned W_o, nothing zeroed
    text_b: str | None = None  # sentence B (sentence models only; None while invalid)


# Catalogue keys of the reasons a view is toy-only; each takes {what} and {name} (the model).
NEEDS_ANSWERS = "common.toy_only.needs_answers"


TRAINS_TOYS = "common.toy_only.trains_toys"


def toy_only(view: View, what: str, why: str = NEEDS_ANSWERS) -> bool:
    """True, after one line saying why, when the view's model has no right answers (a pretrained
    text model) and so cannot show `what` (already in the student's language); why: the reason's
    catalogue key."""
    if view.kind.has_answers:
        return False
    st.info(md_escape(t(why, what=what, name=view.entry.name)))
    return True
