"""A training timeline: the weights at points of a training run, to replay it afterwards.

A slider over training time shows how attention maps, head importance and W_o's mixing index
grew. Memory and disk stay bounded: a Timeline keeps at most `max_snapshots` states; when full,
it drops every other snapshot and doubles its interval, so the kept steps stay evenly spread
over the whole run however long it is. On disk it is one safetensors file beside the model
(NAME.timeline), written atomically, read back with the same checks as a checkpoint, never
unpickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.training.checkpoint import CheckpointError, check_state, write_atomic

FORMAT = "tfviz-timeline/1"
META_KEY = "tfviz-timeline"
SUFFIX = ".timeline"  # not .safetensors: the model picker lists only models
MAX_SNAPSHOTS = 24  # a bundled-size model is ~70 KB a snapshot: under 2 MB a run
MAX_BYTES = 256 * 1024 * 1024


@dataclass
class Timeline:
    """Snapshots of a model's weights at evenly spread steps, bounded in number."""

    every: int = 25  # steps between snapshots (doubles whenever the timeline fills up)
    max_snapshots: int = MAX_SNAPSHOTS
    steps: list[int] = field(default_factory=list)
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"every must be a whole number of steps >= 1, got {self.every!r}")
        if not isinstance(self.max_snapshots, int) or self.max_snapshots < 2:
            raise ValueError(f"max_snapshots must be a whole number >= 2, got {self.max_snapshots}")

    def record(self, step: int, model: Transformer) -> None:
        """Keep the model's weights at step if step is due (step 0 always is)."""
        if step % self.every:
            return
        if len(self.steps) >= self.max_snapshots:
            self.steps, self.states = self.steps[::2], self.states[::2]
            self.every *= 2
            if step % self.every:
                return
        self.steps.append(step)
        self.states.append(
            {k: v.detach().to("cpu", torch.float32).clone() for k, v in model.state_dict().items()}
        )

    def model_at(self, index: int, config: ModelConfig) -> Transformer:
        """A fresh Transformer (eval mode, no gradients) holding snapshot index."""
        model = Transformer(config)
        model.load_state_dict(self.states[index])
        return model.eval().requires_grad_(False)


def timeline_path(model_path: str | Path) -> Path:
    """Where the timeline of a saved model lives: beside it, NAME.timeline."""
    path = Path(model_path)
    return path.with_name(path.name.removesuffix(".safetensors") + SUFFIX)


def save_timeline(path: str | Path, timeline: Timeline) -> Path:
    """Write a timeline atomically; returns path."""
    tensors = {
        f"{i}/{name}": value.contiguous()
        for i, state in enumerate(timeline.states)
        for name, value in state.items()
    }
    meta = {"format": FORMAT, "steps": timeline.steps, "every": timeline.every}
    write_atomic(Path(path), st_save(tensors, metadata={META_KEY: json.dumps(meta)}))
    return Path(path)


def load_timeline(path: str | Path, config: ModelConfig, max_bytes: int = MAX_BYTES) -> Timeline:
    """Read a timeline for a model of config; CheckpointError saying what is wrong otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError("no_timeline", path=path)
    if path.stat().st_size > max_bytes:
        raise CheckpointError("timeline_too_large", limit=max_bytes / 1e6)
    data = path.read_bytes()
    try:
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_len])
        meta = json.loads(header["__metadata__"][META_KEY])
        tensors = st_load(data)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError("not_timeline", why=e) from None
    if meta.get("format") != FORMAT:
        raise CheckpointError("timeline_format", found=repr(meta.get("format")))
    steps = meta.get("steps")
    if not (isinstance(steps, list) and all(isinstance(s, int) for s in steps)):
        raise CheckpointError("timeline_steps")
    expected = Transformer(config).state_dict()
    states = []
    for i in range(len(steps)):
        state = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith(f"{i}/")}
        check_state(state, expected)
        states.append(state)
    if sum(len(s) for s in states) != len(tensors):
        raise CheckpointError("timeline_extra")
    every = meta.get("every", 1)
    return Timeline(every=every, max_snapshots=max(2, len(steps)), steps=list(steps), states=states)


@dataclass(frozen=True)
class Replay:
    """What the timeline slider shows, for every kept step."""

    steps: list[int]  # (S,)
    attn: np.ndarray  # (S, L, H, T, T) attention of the typed sequence at each step
    mixing: np.ndarray  # (S, L) W_o's mixing index per layer (tfviz.analysis.w_o_mixing)
    importance: np.ndarray  # (S, L, H) loss change when each head is zeroed before W_o
    loss: np.ndarray  # (S,) loss on the same fresh examples


@dataclass(frozen=True)
class StepReplay:
    """What the timeline slider shows at one kept step."""

    step: int
    labels: list[str]  # the typed sequence's token labels (tfviz.core.trace.TraceArrays.labels)
    attn: np.ndarray  # (L, H, T, T) attention of the typed sequence
    mixing: np.ndarray  # (L,) W_o's mixing index per layer (tfviz.analysis.w_o_mixing)
    importance: np.ndarray  # (L, H) loss change when each head is zeroed before W_o
    loss: float  # loss on the fresh examples behind importance


@dataclass(frozen=True)
class Scores:
    """What does not depend on the typed sequence, at every kept step: computed once per
    timeline, so that moving the slider only traces the sequence through one snapshot."""

    steps: list[int]  # (S,)
    mixing: np.ndarray  # (S, L)
    importance: np.ndarray  # (S, L, H)
    loss: np.ndarray  # (S,)

    def at(self, index: int, labels: list[str], attn: np.ndarray) -> StepReplay:
        """Step index's scores with the typed sequence's attention at that step."""
        return StepReplay(
            step=self.steps[index],
            labels=labels,
            attn=attn,
            mixing=self.mixing[index],
            importance=self.importance[index],
            loss=float(self.loss[index]),
        )


def _check_index(timeline: Timeline, index: int) -> None:
    if not 0 <= index < len(timeline.steps):
        raise IndexError(f"the timeline keeps {len(timeline.steps)} steps; no step {index}")


def scores(timeline: Timeline, config: ModelConfig, task, n: int = 64) -> Scores:
    """W_o's mixing index and head importance (n fresh examples, the same at every step) at
    every kept step."""
    from tfviz import analysis  # the analyses are only needed when a timeline is replayed

    if not timeline.steps:
        raise ValueError("the timeline is empty: it recorded no step")
    mixing, importance, loss = [], [], []
    for index in range(len(timeline.steps)):
        model = timeline.model_at(index, config)
        mixing.append(analysis.w_o_mixing(model).mixing)
        imp = analysis.head_importance(model, task, n=n)
        importance.append(imp.loss_change)
        loss.append(imp.base_loss)
    return Scores(
        steps=list(timeline.steps),
        mixing=np.stack(mixing),
        importance=np.stack(importance),
        loss=np.array(loss, dtype=np.float32),
    )


def attention_at(
    timeline: Timeline, index: int, config: ModelConfig, task, text: str
) -> tuple[list[str], np.ndarray]:
    """(token labels, (L, H, T, T) attention) of text through kept step index's snapshot;
    ValueError with the task's message if text is not a sequence it accepts."""
    from tfviz.core.trace import run_trace

    _check_index(timeline, index)
    trace = run_trace(timeline.model_at(index, config), task, text)
    return trace.labels, trace.attn


def replay_step(
    timeline: Timeline, index: int, config: ModelConfig, task, text: str, n: int = 64
) -> StepReplay:
    """Attention, W_o's mixing and head importance at kept step `index` alone.

    Args:
        timeline: the recorded run; config: its model's config.
        index: 0-based position among timeline.steps (IndexError if there is none).
        task: the model's Task; text: a sequence it accepts (ValueError with its message if not).
        n: fresh examples behind the importance scores (the same ones at every step).
    """
    _check_index(timeline, index)
    one = Timeline(every=1, steps=[timeline.steps[index]], states=[timeline.states[index]])
    labels, attn = attention_at(timeline, index, config, task, text)
    return scores(one, config, task, n).at(0, labels, attn)


def replay(timeline: Timeline, config: ModelConfig, task, text: str, n: int = 64) -> Replay:
    """Attention, W_o's mixing and head importance at every kept step."""
    measured = scores(timeline, config, task, n)
    attn = [attention_at(timeline, i, config, task, text)[1] for i in range(len(timeline.steps))]
    return Replay(
        steps=measured.steps,
        attn=np.stack(attn),
        mixing=measured.mixing,
        importance=measured.importance,
        loss=measured.loss,
    )
