"""Train several runs of one encoder at once: every weight stacked on a leading run axis R.

The W_o experiment trains one small encoder 2 x seeds times. `train_runs` trains those R runs as
one model whose weights carry a leading run axis: each step is one forward and backward pass over
R times the data in R-times fewer (and larger) operations, and only real tokens go through the
per-token layers (a batch padded to its longest example is about half padding; see
tfviz.core.packing).

Every run stays the run `tfviz.training.train.train` makes with the same arguments:
- same initial weights: `Transformer(config)` under torch.manual_seed(seed), as there;
- same batches: each seed draws from its own np.random.default_rng(seed), as there (runs sharing a
  seed share the draw);
- its own Adam: torch.optim.Adam is elementwise, so one Adam over the stacked weights is exactly
  one Adam per run (the learning-rate schedule is the same for all runs);
- its own gradient clipping: the gradient norm is taken per run;
- w_o="identity" / "zero" as train(w_o=...): that run's forward applies the identity (or zeros)
  instead of its W_o, so W_o gets exactly zero gradient, Adam leaves it where it was (zero
  moments, zero update) and the returned model holds that map with bias 0, as train() leaves it;
- its own dropout: masks are drawn independently per run, from a stream seeded by the runs' seeds
  (not the masks a sequential run draws, which come from torch's global stream in another order).
With dropout 0 the runs equal train()'s to float precision; tests/training/test_ensemble.py checks
that,
and that with dropout the two agree in distribution.

The forward pass is tfviz.core.model.Transformer's (`forward`): its weights, each with a leading run
axis, are views of one flat (R, N) tensor (one leaf for Adam, one norm per run for clipping),
handed to the model with torch.func.functional_call together with a tfviz.core.packing.Packing of
the runs' batches. A change to the encoder is a change to the batched training too.

Dimensions: R runs, B batch, T tokens, M packed token slots per run, N weights per run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from tfviz.core import wo
from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.core.packing import Packing, pack, pack_targets
from tfviz.core.tasks import IGNORE, Batch, Task, get_task
from tfviz.settings import TRAINING
from tfviz.training.train import check_training, learning_rate, resolve_device

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s: coef = max_norm / (norm + 1e-6)


# ---- the flat layout ----------------------------------------------------------------------------
Layout = list[
    tuple[str, tuple[int, ...]]
]  # (Transformer state_dict key, shape per run), flat order


def layout(config: ModelConfig) -> Layout:
    """The keys and shapes of one run's weights, in flat order: a fresh Transformer's state_dict."""
    with torch.random.fork_rng(devices=[]):
        return [(k, tuple(v.shape)) for k, v in Transformer(config).state_dict().items()]


def initial_state(config: ModelConfig, seed: int) -> dict[str, Tensor]:
    """The weights train(seed=seed) starts from: Transformer(config) under manual_seed(seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Transformer(config).state_dict()


def set_w_o(state: dict[str, Tensor], config: ModelConfig, w_o: str, start: bool = False) -> None:
    """Put the map mode w_o applies into W_o, in place (tfviz.core.wo.effective): identity (eye,
    bias 0), zero, or W_o's diagonal blocks; as train() stores it. start: the map training starts
    from, as train() starts (tfviz.core.wo.training_start)."""
    if w_o == "learned":
        return
    mapped = wo.training_start if start else wo.effective
    for i in range(config.n_layers):
        W, b = state[f"layers.{i}.attn.W_o.weight"], state[f"layers.{i}.attn.W_o.bias"]
        W_eff, b_eff = mapped(W.clone(), b.clone(), w_o, config.n_heads, False)  # not remembered
        W.copy_(W_eff)
        b.copy_(b_eff)


def flatten(blocks: Layout, state: dict[str, Tensor]) -> Tensor:
    """One run's weights as a flat (N,) row in layout order."""
    return torch.cat([state[k].reshape(-1) for k, _ in blocks])


def unflatten(blocks: Layout, row: Tensor) -> dict[str, Tensor]:
    """A Transformer state_dict from a flat (N,) row (copies: the model owns its weights)."""
    pieces = row.split([math.prod(shape) for _, shape in blocks])
    return {k: p.reshape(shape).clone() for (k, shape), p in zip(blocks, pieces, strict=True)}


# ---- the batched forward pass: the Transformer's own ---------------------------------------------
def check_config(config: ModelConfig) -> None:
    """ValueError if config asks for something a packed pass does not run (tfviz.core.model)."""
    # BERT-only parts (tfviz.hf.pretrained), never trained here; getattr: older configs lack them.
    for key, plain in (("type_vocab_size", 0), ("embed_norm", False)):
        if getattr(config, key, plain) != plain:
            value = getattr(config, key)
            raise ValueError(f"tfviz.training.ensemble cannot train a model with {key}={value!r}")
    if config.n_out < 1:
        raise ValueError("tfviz.training.ensemble trains models with an output head (n_out >= 1)")
    # A decoder's rotary positions turn q and k by the position, which the packed pass does not
    # do; a tied head would become two weights of the flat row, trained apart.
    for key, plain in (("positions", "learned"), ("tie_head", False)):
        if getattr(config, key, plain) != plain:
            value = getattr(config, key)
            raise ValueError(f"tfviz.training.ensemble cannot train a model with {key}={value!r}")


def stacked_weights(
    config: ModelConfig, blocks: Layout, flat: Tensor, w_o: Sequence[str]
) -> dict[str, Tensor]:
    """The Transformer's weights, each (R, *shape), as views of flat (R, N), with W_o as each run
    applies it (tfviz.core.wo.effective): its own, the identity or zeros (bias 0), or its diagonal
    blocks. Mapping weights, not activations, keeps one matmul for all runs; runs without W_o
    send it exactly zero gradient (x @ I is exactly x), and a block-diagonal run's blocks that
    mix heads get exactly zero gradient and stay as stored (zero, see set_w_o)."""
    R = flat.shape[0]
    pieces = flat.split([math.prod(shape) for _, shape in blocks], dim=1)  # backward: one cat
    p = {k: piece.view(R, *shape) for (k, shape), piece in zip(blocks, pieces, strict=True)}
    if any(m != "learned" for m in w_o):
        for i in range(config.n_layers):
            kW, kb = f"layers.{i}.attn.W_o.weight", f"layers.{i}.attn.W_o.bias"
            W, b, H = p[kW], p[kb], config.n_heads
            maps = [wo.effective(W[r], b[r], m, H, False) for r, m in enumerate(w_o)]
            p[kW] = torch.stack([W_r for W_r, _ in maps])
            p[kb] = torch.stack([b_r for _, b_r in maps])
    return p


def forward(
    model: Transformer,
    blocks: Layout,
    flat: Tensor,
    packing: Packing,
    w_o: Sequence[str],
    training: bool,
) -> Tensor:
    """model(packing, trace=False).logits with run r's weights flat[r] and W_o mode w_o[r].

    Args:
        model: a Transformer of the runs' config (its own weights are not used).
        flat: (R, N) weights in `layout` order.
        packing: the runs' (R, B, T) batch, from tfviz.core.packing.pack.
        w_o: one mode per run (tfviz.core.wo.TRAINING_MODES).
        training: dropout on (config.dropout), drawn independently per run.
    Returns:
        logits (R, B, n_out) for pooled models; per token (R, M, n_out) in slot order
        (tfviz.core.packing.unpack puts them on the (R, B, T) grid).
    """
    model.train(training)
    weights = stacked_weights(model.config, blocks, flat, w_o)
    return functional_call(model, weights, (packing,), {"trace": False}).logits


# ---- batches ------------------------------------------------------------------------------------
def stack_batches(task: Task, batches: Sequence[Batch]) -> tuple[Tensor, Tensor, Tensor]:
    """ids, pad_mask (S, B, T) and target (S, B[, T]) from S batches, padded to the longest T."""
    T = max(b.ids.shape[1] for b in batches)
    ids = torch.stack([F.pad(b.ids, (0, T - b.ids.shape[1]), value=task.pad_id) for b in batches])
    pad = torch.stack([F.pad(b.pad_mask, (0, T - b.ids.shape[1]), value=True) for b in batches])
    if task.kind == "token":  # per-position targets: padded positions carry no loss
        target = torch.stack(
            [F.pad(b.target, (0, T - b.target.shape[1]), value=IGNORE) for b in batches]
        )
    else:
        target = torch.stack([b.target for b in batches])
    return ids, pad, target


# ---- training -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EnsembleStep:
    """What on_step receives after each optimiser step of all runs together."""

    step: int  # 1-based
    steps: int
    losses: tuple[float, ...]  # one per run, in the order of `runs`
    lr: float


def check_settings(
    task: Task, config: ModelConfig, steps, batch_size, lr, w_o: Sequence[str], schedule
) -> None:
    """train()'s checks, plus the parts of a config the batched forward pass does not build."""
    check_training(task, config, steps, batch_size, lr, w_o, schedule)
    check_config(config)


def dropout_seed(seeds: Sequence[int]) -> int:
    """A seed for the batched dropout masks, fixed by the runs' seeds (so reruns repeat)."""
    return int(np.random.SeedSequence([int(s) % 2**32 for s in seeds]).generate_state(1)[0])


def train_runs(
    task: Task | str,
    config: ModelConfig,
    runs: Sequence[tuple[int, str]],
    steps: int = TRAINING["steps"],
    batch_size: int = TRAINING["batch_size"],
    lr: float = TRAINING["lr"],
    device: str = "auto",
    schedule: str = TRAINING["schedule"],
    clip: float | None = TRAINING["clip"],
    min_len: int | None = None,
    max_len: int | None = None,
    on_step: Callable[[EnsembleStep], bool | None] | None = None,
) -> tuple[list[Transformer], dict]:
    """Train R runs together; run r is train(task, config, seed=s, w_o=m, ...) for runs[r] = (s, m).

    Args:
        runs: (seed, w_o) per run; runs sharing a seed share initial weights (W_o aside) and
            batches, as sequential runs with that seed do.
        steps, batch_size, lr, device, schedule, clip, min_len, max_len: as
            tfviz.training.train.train, the same for every run.
        on_step: called after every step with an EnsembleStep; returning False stops all runs.
    Returns:
        (one Transformer per run, in eval mode on the device; history with "loss": one list per run,
        "steps_done", "cancelled", "seconds" (wall time for all runs together) and the settings).
    Raises:
        FloatingPointError: a run's loss became non-finite (the message names the run).
    """
    task = get_task(task) if isinstance(task, str) else task
    runs = [(int(s), str(m)) for s, m in runs]
    if not runs:
        raise ValueError("train_runs needs at least one (seed, w_o) run")
    modes = [m for _, m in runs]
    check_settings(task, config, steps, batch_size, lr, modes, schedule)
    dev = resolve_device(device)
    seeds = list(dict.fromkeys(s for s, _ in runs))  # distinct, in first-seen order
    seed_of_run = torch.tensor([seeds.index(s) for s, _ in runs])  # (R,) row of each run's batch
    rngs = [np.random.default_rng(s) for s in seeds]
    blocks = layout(config)
    with torch.random.fork_rng(devices=[]):  # building a Transformer draws an init: not ours
        model = Transformer(config).to(dev)  # runs the pass; its own weights are never used
    start = time.perf_counter()
    flat = initial_flat(config, blocks, runs).to(dev).requires_grad_()  # (R, N): the one leaf
    # Elementwise Adam on the stacked leaf = one Adam per run; fused as train() has it.
    fused = dev.type in ("cpu", "cuda")
    opt = torch.optim.Adam([flat], lr=lr, fused=fused or None)
    losses: list[list[float]] = [[] for _ in runs]
    rng_devices = [dev] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(dropout_seed([s for s, _ in runs]))
        for step in range(steps):
            rate = learning_rate(step, steps, lr, schedule)
            for group in opt.param_groups:
                group["lr"] = rate
            drawn = [task.sample(batch_size, rng, min_len, max_len) for rng in rngs]
            packing, target = packed_batch(task, drawn, seed_of_run, dev)
            values = optimiser_step(model, blocks, flat, opt, task, packing, target, modes, clip)
            for r, value in enumerate(values):
                losses[r].append(value)
            check_finite(values, runs, step)
            if on_step is not None:
                if on_step(EnsembleStep(step + 1, steps, tuple(values), rate)) is False:
                    break
    models = to_encoders(config, blocks, flat.detach(), modes)
    history = {
        "loss": losses,
        "steps_done": len(losses[0]),
        "steps": steps,
        "cancelled": len(losses[0]) < steps,
        "seconds": time.perf_counter() - start,
        "batch_size": batch_size,
        "lr": lr,
        "runs": runs,
        "schedule": schedule,
        "device": str(dev),
        "min_len": task.min_len if min_len is None else min_len,
        "max_len": task.max_len if max_len is None else max_len,
    }
    return models, history


def initial_flat(config: ModelConfig, blocks: Layout, runs: Sequence[tuple[int, str]]) -> Tensor:
    """(R, N): each run's starting weights as a flat row, W_o as train() starts it."""
    rows = []
    for seed, mode in runs:
        state = initial_state(config, seed)
        set_w_o(state, config, mode, start=True)
        rows.append(flatten(blocks, state))
    return torch.stack(rows)


def packed_batch(
    task: Task, drawn: Sequence[Batch], seed_of_run: Tensor, dev: torch.device
) -> tuple[Packing, Tensor]:
    """The step's batches, one per distinct seed, given to every run of that seed and packed:
    (the Packing, the targets (R, B), per token (R, M) in slot order as the logits come)."""
    ids, pad, target = (t[seed_of_run].to(dev) for t in stack_batches(task, drawn))
    packing = pack(ids, pad)
    if task.kind == "token":
        target = pack_targets(packing, target)  # (R, M), as the logits come
    return packing, target


def optimiser_step(
    model: Transformer,
    blocks: Layout,
    flat: Tensor,
    opt: torch.optim.Optimizer,
    task: Task,
    packing: Packing,
    target: Tensor,
    w_o: Sequence[str],
    clip: float | None,
) -> list[float]:
    """One step of every run at once on the packed batch: forward, backward, each run's
    gradient clipped, Adam. Returns each run's loss before the step."""
    logits = forward(model, blocks, flat, packing, w_o, training=True)
    loss = run_losses(task, logits, target)  # (R,)
    opt.zero_grad(set_to_none=True)
    loss.sum().backward()
    if clip is not None:
        clip_per_run(flat, clip)
    opt.step()
    return loss.detach().tolist()


def run_losses(task: Task, logits: Tensor, target: Tensor) -> Tensor:
    """(R,) each run's own loss; their sum gives each run's weights its own gradient."""
    per_run = zip(logits.unbind(0), target.unbind(0), strict=True)
    return torch.stack([task.loss(lg, tg) for lg, tg in per_run])


def clip_per_run(flat: Tensor, clip: float) -> None:
    """Each run's gradient scaled in place to norm clip at most, as clip_grad_norm_ per run."""
    with torch.no_grad():
        norm = torch.linalg.vector_norm(flat.grad, dim=1)  # (R,) per-run grad norm
        coef = (clip / (norm + CLIP_EPS)).clamp(max=1.0)
        flat.grad.mul_(coef.unsqueeze(1))


def check_finite(values: Sequence[float], runs: Sequence[tuple[int, str]], step: int) -> None:
    """FloatingPointError naming the first run whose loss at step (0-based) is not finite."""
    for r, value in enumerate(values):
        if not math.isfinite(value):
            seed, mode = runs[r]
            raise FloatingPointError(
                f"training diverged at step {step + 1} in run {r + 1} (seed {seed}, "
                f"w_o={mode}; loss {value}); try a smaller learning rate"
            )


def to_encoders(
    config: ModelConfig, blocks: Layout, flat: Tensor, w_o: Sequence[str]
) -> list[Transformer]:
    """One Transformer per row of flat (R, N), in eval mode on flat's device, W_o set as trained."""
    models = []
    for row, mode in zip(flat.cpu(), w_o, strict=True):
        state = unflatten(blocks, row)
        set_w_o(state, config, mode)  # as train() leaves it
        with torch.random.fork_rng(devices=[]):  # building a Transformer draws an init: not ours
            model = Transformer(config)
        model.load_state_dict(state)
        models.append(model.to(flat.device).eval())
    return models
