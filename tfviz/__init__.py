"""tfviz: see inside multi-head attention, and what the output projection W_o does.

The public names below load on first use (PEP 562 module __getattr__): `import tfviz`, and the
modules that need no model (tfviz.messages, tfviz.settings, tfviz.stats, ...), do not import
torch, which takes seconds to load; tests/test_imports.py checks that.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

# public name -> the module that defines it
_WHERE = {
    "CheckpointError": "tfviz.checkpoint",
    "CheckpointMeta": "tfviz.checkpoint",
    "load_checkpoint": "tfviz.checkpoint",
    "save_checkpoint": "tfviz.checkpoint",
    "ModelConfig": "tfviz.config",
    "Encoder": "tfviz.model",
    "EncoderOutput": "tfviz.model",
    "LayerTrace": "tfviz.model",
    "Trace": "tfviz.model",
    "get_task": "tfviz.tasks",
    "list_tasks": "tfviz.tasks",
    "train": "tfviz.train",
}

__all__ = [
    "CheckpointError",
    "CheckpointMeta",
    "Encoder",
    "EncoderOutput",
    "LayerTrace",
    "ModelConfig",
    "Trace",
    "get_task",
    "list_tasks",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]

if TYPE_CHECKING:  # what type checkers and editors see; nothing is imported at run time
    from tfviz.checkpoint import CheckpointError, CheckpointMeta, load_checkpoint, save_checkpoint
    from tfviz.config import ModelConfig
    from tfviz.model import Encoder, EncoderOutput, LayerTrace, Trace
    from tfviz.tasks import get_task, list_tasks
    from tfviz.train import train


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tfviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Package(types.ModuleType):
    """tfviz itself: importing the submodule tfviz.train binds it on the package, which would
    hide the function tfviz.train from then on; that binding is skipped (tfviz.train stays the
    function, as when this file imported it at once)."""

    def __setattr__(self, name: str, value) -> None:
        if name == "train" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
