"""Training: a plain loop over freshly drawn batches that reports through a callback.

`train()` knows neither the CLI (tfviz/cli/train.py) nor the app: both watch it through `on_step`,
which may also stop it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from tfviz.core import modes, wo
from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task, get_task
from tfviz.settings import TRAINING
from tfviz.training.timeline import Timeline


@dataclass(frozen=True)
class StepInfo:
    """What on_step receives after each optimiser step."""

    step: int  # 1-based
    steps: int
    loss: float
    lr: float


class Recorder(Protocol):
    """Watches the model between steps: record(0, model) before the first, record(s, model)
    after step s (a Timeline keeps the weights; tfviz.serve.work.MetricCurve measures the task
    metric). The model is in training mode and must be left as it is found."""

    def record(self, step: int, model: Transformer) -> None: ...


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """ "auto" takes CUDA, then Apple's MPS, then the CPU; anything else is passed to torch."""
    if str(device) != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def learning_rate(step: int, steps: int, lr: float, schedule: str) -> float:
    """Linear warm-up over the first 5% then cosine decay to 10% of lr; or constant (seed 002)."""
    if schedule == "constant":
        return lr
    warm = max(1, steps // 20)
    if step < warm:
        return lr * (step + 1) / warm
    progress = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def train(
    task: Task | str,
    model_config: ModelConfig | None = None,
    steps: int = TRAINING["steps"],
    batch_size: int = TRAINING["batch_size"],
    lr: float = TRAINING["lr"],
    seed: int = 0,
    device: str = "auto",
    w_o: str = "learned",
    on_step: Callable[[StepInfo], bool | None] | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    schedule: str = TRAINING["schedule"],
    clip: float | None = TRAINING["clip"],
    timeline: Timeline | None = None,
) -> tuple[Transformer, dict]:
    """Train a fresh encoder on a task.

    Args:
        task: a Task or its name.
        model_config: sizes; None takes the task's defaults (task.model_config()).
        w_o: "learned", or "identity"/"zero" to train with W_o switched off throughout. The model
            returned then holds that map as its W_o (identity matrix or zeros, no bias), so its
            "learned" W_o is exactly the one it was trained with.
        on_step: called after every step with a StepInfo; returning False stops training early.
        min_len, max_len: range of training lengths (default: the task's whole range).
        schedule: "cosine" (warm-up then cosine decay) or "constant" (plain Adam, as seed 002).
        clip: gradient-norm clip, or None.
        timeline: if given, records the weights at step 0 and at its interval
        (tfviz.training.timeline).
    Returns:
        (model in eval mode on its device, history dict with the loss per step and the settings).
    """
    task = get_task(task) if isinstance(task, str) else task
    config = model_config or task.model_config()
    check_training(task, config, steps, batch_size, lr, [w_o], schedule)
    dev = resolve_device(device)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    # fork_rng keeps the caller's global RNG untouched while we seed init and dropout.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(config).to(dev)
        if w_o != "learned":
            store_w_o(model, w_o, start=True)
        losses = fit_params(
            model,
            list(model.parameters()),
            task,
            rng,
            steps,
            batch_size,
            lr,
            schedule,
            clip,
            on_step,
            min_len,
            max_len,
            timeline,
            w_o=w_o,
        )
    if w_o != "learned":
        store_w_o(model, w_o)  # Adam moved W_o although it was never used: put the real map back
    model.eval()
    history = {
        "loss": losses,
        "steps_done": len(losses),
        "steps": steps,
        "cancelled": len(losses) < steps,
        "seconds": time.perf_counter() - start,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "w_o": w_o,
        "schedule": schedule,
        "device": str(dev),
        "min_len": task.min_len if min_len is None else min_len,
        "max_len": task.max_len if max_len is None else max_len,
    }
    return model, history


def fit_params(
    model: Transformer,
    params: list,
    task: Task,
    rng,
    steps,
    batch_size,
    lr,
    schedule,
    clip,
    on_step,
    min_len,
    max_len,
    recorder: Recorder | None = None,
    *,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    **switches,
) -> list[float]:
    """The training loop: Adam on params (the others stay as they are), one fresh batch a step,
    the learning-rate schedule, gradient clipping, on_step after each step, recorder (a timeline)
    told of every step. Returns the losses.

    weight_decay > 0: AdamW, decaying the matrices and tables only (not biases or norms' gains),
    as nanoGPT does."""
    dev = model.device
    model.train()
    # fused: one kernel for all parameters instead of a loop over them (CPU and CUDA).
    fused = dev.type in ("cpu", "cuda")
    if weight_decay:
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused or None)
    else:
        opt = torch.optim.Adam(params, lr=lr, betas=betas, fused=fused or None)
    losses: list[float] = []
    if recorder is not None:
        recorder.record(0, model)
    try:
        for step in range(steps):
            rate = learning_rate(step, steps, lr, schedule)
            for group in opt.param_groups:
                group["lr"] = rate
            batch = task.sample(batch_size, rng, min_len, max_len)
            ids, pad = batch.ids.to(dev), batch.pad_mask.to(dev)
            logits = model(ids, pad, trace=False, **switches).logits
            loss = task.loss(logits, batch.target.to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            value = loss.item()
            losses.append(value)
            if recorder is not None:
                recorder.record(step + 1, model)
            if not math.isfinite(value):
                raise FloatingPointError(
                    f"training diverged at step {step + 1} (loss {value}); "
                    f"try a smaller learning rate"
                )
            if on_step is not None and on_step(StepInfo(step + 1, steps, value, rate)) is False:
                break
    finally:
        model.eval()
    return losses


# where retrain_w_o starts W_o from
W_O_STARTS = (modes.IDENTITY, modes.ZERO, "random", modes.LEARNED)


def with_w_o_start(model: Transformer, start: str, seed: int = 0) -> Transformer:
    """A copy of model (eval mode, no gradients) whose W_o in every layer is the start of a W_o
    retraining: "identity", "zero", "random" (nn.Linear's init from seed) or "learned"."""
    if start not in W_O_STARTS:
        raise ValueError(f"W_o starts from one of {W_O_STARTS}, got {start!r}")
    copy = Transformer(model.config).to(model.device)
    copy.load_state_dict(model.state_dict())
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for layer in copy.layers:
            W = layer.attn.W_o
            if start == "random":
                W.reset_parameters()
            elif start != "learned":
                weight, bias = wo.fixed_weights(start, model.config.d_model)
                W.weight.copy_(weight)
                W.bias.copy_(bias)
    return copy.eval().requires_grad_(False)


def retrain_w_o(
    model: Transformer,
    task: Task | str,
    start: str = "identity",
    steps: int = 300,
    batch_size: int = TRAINING["batch_size"],
    lr: float = TRAINING["lr"],
    seed: int = 0,
    on_step: Callable[[StepInfo], bool | None] | None = None,
    schedule: str = TRAINING["schedule"],
    clip: float | None = TRAINING["clip"],
    recorder: Recorder | None = None,
) -> tuple[Transformer, dict]:
    """Train only W_o (weight and bias, every layer) of a copy of model; all else stays frozen.

    Answers "does the model need its W_o, or any W_o?": start from the identity (W_o off), zeros
    or a random map, and watch the loss come back, then compare with the learned W_o. The model
    passed in (shared by every session) is never changed: the copy is trained.

    Args:
        model: a trained Transformer (not changed).
        task: its task, or the task's name.
        start: "identity", "zero", "random" (nn.Linear's own init, from seed) or "learned".
        steps, batch_size, lr, seed, on_step, schedule, clip: as train().
        recorder: told of the copy before the first step and after each (e.g. a metric curve).
    Returns:
        (the copy in eval mode, history with the loss per step and the settings).
    """
    task = get_task(task) if isinstance(task, str) else task
    check_training(task, model.config, steps, batch_size, lr, [], schedule)
    copy = with_w_o_start(model, start, seed)
    params = [p for layer in copy.layers for p in layer.attn.W_o.parameters()]
    for p in params:
        p.requires_grad_()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout, if the model has any
        began = time.perf_counter()
        losses = fit_params(
            copy,
            params,
            task,
            np.random.default_rng(seed),
            steps,
            batch_size,
            lr,
            schedule,
            clip,
            on_step,
            None,
            None,
            recorder,
        )
    copy.requires_grad_(False)
    history = {
        "loss": losses,
        "steps_done": len(losses),
        "steps": steps,
        "cancelled": len(losses) < steps,
        "seconds": time.perf_counter() - began,
        "start": start,
        "trained": "W_o only",
        "lr": lr,
        "seed": seed,
    }
    return copy, history


def check_training(
    task: Task, config: ModelConfig, steps, batch_size, lr, w_o_modes, schedule
) -> None:
    """The settings every training path accepts (train here, tfviz.training.ensemble.train_runs),
    with messages that say what is allowed."""
    task.check_config(config)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
        raise ValueError(f"batch_size must be an integer in 1..4096, got {batch_size!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and 0 < lr <= 1):
        raise ValueError(f"lr must be a number in (0, 1], got {lr!r}")
    for mode in w_o_modes:
        if mode not in wo.TRAINING_MODES:
            wo.check_mode(mode)  # an unknown mode gets the general message first
            raise ValueError(
                f"a model trains with W_o in one of {wo.TRAINING_MODES}; {mode!r} is applied "
                f"to a trained W_o instead"
            )
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule must be 'cosine' or 'constant', got {schedule!r}")


@torch.no_grad()
def store_w_o(model: Transformer, w_o: str, start: bool = False) -> None:
    """Store in W_o the map a mode applies (identity, zeros, or W_o's diagonal blocks), so the
    model's "learned" W_o is exactly the one it was trained with. start: the map training
    starts from (wo.training_start: block-diagonal blocks drawn for their own fan-in)."""
    mapped = wo.training_start if start else wo.effective
    for layer in model.layers:
        lin = layer.attn.W_o
        # Copies made for this one store: nothing to remember them by (tfviz.core.wo.effective).
        W, b = mapped(lin.weight.clone(), lin.bias.clone(), w_o, model.config.n_heads, False)
        lin.weight.copy_(W)
        lin.bias.copy_(b)
