"""tfviz: see inside multi-head attention, and what the output projection W_o does.

The public names below load on first use (PEP 562 module __getattr__): `import tfviz`, and the
modules that need no model (tfviz.messages, tfviz.settings, tfviz.experiments.stats, ...), do
not import torch, which takes seconds to load; tests/project/test_imports.py checks that.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# public name -> the module that defines it
_WHERE = {
    "CheckpointError": "tfviz.training.checkpoint",
    "CheckpointMeta": "tfviz.training.checkpoint",
    "load_checkpoint": "tfviz.training.checkpoint",
    "save_checkpoint": "tfviz.training.checkpoint",
    "ModelConfig": "tfviz.core.config",
    "Encoder": "tfviz.core.model",  # Transformer's old name, kept for saved code
    "Transformer": "tfviz.core.model",
    "EncoderOutput": "tfviz.core.model",
    "LayerTrace": "tfviz.core.model",
    "Trace": "tfviz.core.model",
    "get_task": "tfviz.core.tasks",
    "list_tasks": "tfviz.core.tasks",
    "train": "tfviz.training.train",
}

__all__ = [
    "CheckpointError",
    "CheckpointMeta",
    "Encoder",
    "EncoderOutput",
    "LayerTrace",
    "ModelConfig",
    "Trace",
    "Transformer",
    "get_task",
    "list_tasks",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]

if TYPE_CHECKING:  # what type checkers and editors see; nothing is imported at run time
    from tfviz.core.config import ModelConfig
    from tfviz.core.model import Encoder, EncoderOutput, LayerTrace, Trace, Transformer
    from tfviz.core.tasks import get_task, list_tasks
    from tfviz.training.checkpoint import (
        CheckpointError,
        CheckpointMeta,
        load_checkpoint,
        save_checkpoint,
    )
    from tfviz.training.train import train


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tfviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
