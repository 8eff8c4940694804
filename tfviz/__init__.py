"""tfviz: see inside multi-head attention, and what the output projection W_o does."""

from tfviz.checkpoint import CheckpointError, CheckpointMeta, load_checkpoint, save_checkpoint
from tfviz.config import ModelConfig
from tfviz.model import Encoder, EncoderOutput, LayerTrace, Trace
from tfviz.tasks import get_task, list_tasks
from tfviz.train import train

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
