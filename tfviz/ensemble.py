"""Train several runs of one encoder at once: every weight stacked on a leading run axis R.

The W_o experiment trains one small encoder 2 x seeds times. `train_runs` trains those R runs as
one model whose weights carry a leading run axis: each step is one forward and backward pass over
R times the data in R-times fewer (and larger) operations, and only real tokens go through the
per-token layers (a batch padded to its longest example is about half padding; see `Packing`).

Every run stays the run `tfviz.train.train` makes with the same arguments:
- same initial weights: `Encoder(config)` under torch.manual_seed(seed), as there;
- same batches: each seed draws from its own np.random.default_rng(seed), as there (runs sharing a
  seed share the draw);
- its own Adam: torch.optim.Adam is elementwise, so one Adam over the stacked weights is exactly
  one Adam per run (the learning-rate schedule is the same for all runs);
- its own gradient clipping: the gradient norm is taken per run;
- w_o="identity" / "zero" as train(w_o=...): that run's forward applies the identity (or zeros)
  instead of its W_o, so W_o gets exactly zero gradient, Adam leaves it where it was (zero
  moments, zero update) and the returned Encoder holds that map with bias 0, as train() leaves it;
- its own dropout: masks are drawn independently per run, from a stream seeded by the runs' seeds
  (not the masks a sequential run draws, which come from torch's global stream in another order).
With dropout 0 the runs equal train()'s to float precision; tests/test_ensemble.py checks that,
and that with dropout the two agree in distribution.

The weights live in one flat (R, N) tensor: one leaf for Adam, one norm per run for clipping, and
a layout that puts W_q, W_k, W_v side by side, so the three projections are one batched matmul.
`stacked_forward` mirrors tfviz.model.Encoder.forward(trace=False); tests compare the two.

Dimensions: R runs, B batch, T tokens, M packed token slots per run, H heads, D = d_model,
d_k = D / H, N weights per run.
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

from tfviz import wo
from tfviz.config import ModelConfig
from tfviz.model import Encoder, activation_function
from tfviz.settings import TRAINING
from tfviz.tasks import IGNORE, Batch, Task, get_task
from tfviz.train import check_training, learning_rate, resolve_device

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s: coef = max_norm / (norm + 1e-6)


# ---- the flat layout ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """A piece of the flat weight row that the forward pass reads as one tensor."""

    name: str  # e.g. "layers.0.attn.qkv.weight", or an Encoder state_dict key
    shape: tuple[int, ...]  # per run
    members: tuple[tuple[str, tuple[int, ...]], ...]  # Encoder keys concatenated on dim 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def layout(config: ModelConfig) -> list[Block]:
    """The blocks of one run's weights, in flat order, from a fresh Encoder's state_dict.

    Raises ValueError if the Encoder has weights this module does not know (model.py changed).
    """
    with torch.random.fork_rng(devices=[]):
        shapes = {k: tuple(v.shape) for k, v in Encoder(config).state_dict().items()}
    blocks: list[Block] = []
    used: set[str] = set()

    def add(name: str, keys: list[str]) -> None:
        members = tuple((k, shapes[k]) for k in keys)
        first = members[0][1]
        shape = (sum(s[0] for _, s in members), *first[1:])
        blocks.append(Block(name, shape, members))
        used.update(keys)

    for key in ("embed.weight", "embed.bias", "pos"):
        if key in shapes:
            add(key, [key])
    for i in range(config.n_layers):
        a = f"layers.{i}.attn"
        # q, k, v weights adjacent (and their biases): one (3D, D) matmul instead of three.
        add(f"{a}.qkv.weight", [f"{a}.W_{x}.weight" for x in "qkv"])
        add(f"{a}.qkv.bias", [f"{a}.W_{x}.bias" for x in "qkv"])
        for sub in ("attn.W_o", "ff.fc1", "ff.fc2", "norm1", "norm2"):
            for part in ("weight", "bias"):
                add(f"layers.{i}.{sub}.{part}", [f"layers.{i}.{sub}.{part}"])
    for key in ("norm_f.weight", "norm_f.bias", "head.weight", "head.bias"):
        if key in shapes:
            add(key, [key])
    unknown = sorted(set(shapes) - used)
    if unknown:
        raise ValueError(f"tfviz.ensemble does not know these Encoder weights: {unknown}")
    return blocks


def initial_state(config: ModelConfig, seed: int) -> dict[str, Tensor]:
    """The weights train(seed=seed) starts from: Encoder(config) under torch.manual_seed(seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Encoder(config).state_dict()


def set_w_o(state: dict[str, Tensor], config: ModelConfig, w_o: str, start: bool = False) -> None:
    """Put the map mode w_o applies into W_o, in place (tfviz.wo.effective): identity (eye, bias
    0), zero, or W_o's diagonal blocks; as train() stores it. start: the map training starts
    from, as train() starts (tfviz.wo.training_start)."""
    n_layers, n_heads = config.n_layers, config.n_heads
    if w_o == "learned":
        return
    mapped = wo.training_start if start else wo.effective
    for i in range(n_layers):
        W, b = state[f"layers.{i}.attn.W_o.weight"], state[f"layers.{i}.attn.W_o.bias"]
        W_eff, b_eff = mapped(W.clone(), b.clone(), w_o, n_heads, False)  # not remembered
        W.copy_(W_eff)
        b.copy_(b_eff)


def flatten(blocks: list[Block], state: dict[str, Tensor]) -> Tensor:
    """One run's weights as a flat (N,) row in layout order."""
    return torch.cat([state[k].reshape(-1) for b in blocks for k, _ in b.members])


def unflatten(blocks: list[Block], row: Tensor) -> dict[str, Tensor]:
    """An Encoder state_dict from a flat (N,) row (copies, so the Encoder owns its weights)."""
    state, start = {}, 0
    for b in blocks:
        for key, shape in b.members:
            n = math.prod(shape)
            state[key] = row[start : start + n].reshape(shape).clone()
            start += n
    return state


# ---- packing: only real tokens go through the per-token layers ---------------------------------
@dataclass(frozen=True)
class Packing:
    """Each run's real tokens side by side in M slots, and where each slot sits in the padded grid.

    Batches are padded to their longest example, so about half of a (B, T) grid is padding. Every
    layer but attention treats each token alone, so those layers run on the M slots of real
    tokens only; attention scatters its q, k, v into the padded (R*B, T) grid and gathers z back.
    Runs hold different numbers of real tokens: the M - n_r slots past run r's n_r real ones carry
    padded positions of its grid (in order), which attention masks as keys and nothing reads as
    queries, so they change no real token and get zero gradient.
    """

    ids: Tensor  # (R, M) token id in each slot (PAD in the slots past a run's real tokens)
    slot: Tensor  # (R, M) the slot's place b*T + t in its run's (B, T) grid; distinct per run
    seq: Tensor  # (R*M,) the slot's sequence r*B + b in the attention grid
    pos: Tensor  # (R*M,) the slot's position t
    real: Tensor  # (R, M) True for real tokens
    lengths: Tensor  # (R, B) real tokens per example (BOS included)
    key_bias: Tensor  # (R*B, 1, T) 0 at real keys, -inf at padded ones (added to the scores)
    grid: tuple[int, int, int]  # (R, B, T)


def pack(ids: Tensor, pad_mask: Tensor) -> Packing:
    """Packing of (R, B, T) ids with pad_mask True at padding; every example needs a real token."""
    R, B, T = ids.shape
    real = ~pad_mask.reshape(R, B * T)
    lengths = real.view(R, B, T).sum(dim=2)  # (R, B)
    if not bool((lengths > 0).all()):
        raise ValueError("every example needs at least one real (unpadded) token")
    n_real = lengths.sum(dim=1, keepdim=True)  # (R, 1)
    M = int(n_real.max())
    # Each grid position's slot: real ones first, in grid order, then the padded ones; the
    # inverse of that permutation says which position each slot holds.
    rank = torch.where(real, real.cumsum(1), n_real + (~real).cumsum(1)) - 1  # (R, B*T)
    grid_index = torch.arange(B * T, device=ids.device).expand(R, B * T)
    slot = torch.empty_like(rank).scatter_(1, rank, grid_index)[:, :M]  # (R, M)
    seq = (slot // T + torch.arange(R, device=ids.device).view(R, 1) * B).reshape(-1)
    key_bias = torch.zeros(R * B, 1, T, device=ids.device)
    key_bias.masked_fill_(pad_mask.reshape(R * B, 1, T), float("-inf"))
    return Packing(
        ids=ids.reshape(R, B * T).gather(1, slot),
        slot=slot,
        seq=seq,
        pos=(slot % T).reshape(-1),
        real=real.gather(1, slot),
        lengths=lengths,
        key_bias=key_bias,
        grid=(R, B, T),
    )


def pack_targets(packing: Packing, target: Tensor) -> Tensor:
    """Per-token targets (R, B, T) -> (R, M) in slot order (padded positions keep IGNORE)."""
    R, B, T = packing.grid
    return target.reshape(R, B * T).gather(1, packing.slot)


def unpack(packing: Packing, values: Tensor, fill: float = 0.0) -> Tensor:
    """(R, M, ...) per-slot values -> (R, B, T, ...) on the padded grid, fill at padding."""
    R, B, T = packing.grid
    out = values.new_full((R, B * T, *values.shape[2:]), fill)
    index = packing.slot.view(R, -1, *[1] * (values.dim() - 2)).expand_as(values)
    real = packing.real.view(R, -1, *[1] * (values.dim() - 2))
    return out.scatter(1, index, torch.where(real, values, fill)).view(R, B, T, *values.shape[2:])


class _ToGrid(torch.autograd.Function):
    """Slot rows (R*M, 3, H, d_k) -> zeros (3, R*B, H, T, d_k) with each row at (seq, pos).

    One pass each way; autograd's own index_put would also clone the zeros.
    """

    @staticmethod
    def forward(ctx, rows: Tensor, grid: tuple[Tensor, Tensor], shape: tuple[int, ...]) -> Tensor:
        ctx.grid = grid
        out = rows.new_zeros(shape)
        out.permute(1, 3, 0, 2, 4).index_put_(grid, rows)  # (R*B, T, 3, H, d_k) view
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad.permute(1, 3, 0, 2, 4)[ctx.grid], None, None


class _FromGrid(torch.autograd.Function):
    """z (R*B, H, T, d_k) -> the slots' rows (R*M, H, d_k): each slot reads its (seq, pos)."""

    @staticmethod
    def forward(ctx, z: Tensor, grid: tuple[Tensor, Tensor]) -> Tensor:
        ctx.grid, ctx.shape = grid, z.shape
        return z.transpose(1, 2)[grid]

    @staticmethod
    def backward(ctx, grad: Tensor):
        out = grad.new_zeros(ctx.shape)
        out.transpose(1, 2).index_put_(ctx.grid, grad)  # slots are distinct: no accumulation
        return out, None


# ---- the batched forward pass -------------------------------------------------------------------
def _linear(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """Per-run nn.Linear: x (R, M, in), w (R, out, in), b (R, out) -> (R, M, out)."""
    return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))


def _layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
    """Per-run nn.LayerNorm over the last dim: x (R, M, D), w and b (R, D)."""
    return torch.addcmul(b.unsqueeze(1), F.layer_norm(x, x.shape[-1:], eps=eps), w.unsqueeze(1))


def _lookup(table: Tensor, index: Tensor) -> Tensor:
    """Per-run embedding lookup: table (R, V, D), index (R, M) -> (R, M, D)."""
    R, V, D = table.shape
    offsets = torch.arange(R, device=index.device).view(R, 1) * V  # run r's rows of the table
    return F.embedding(index + offsets, table.reshape(R * V, D))


def check_config(config: ModelConfig) -> None:
    """ValueError if the stacked forward pass does not implement something config asks for."""
    # BERT-only parts (tfviz.pretrained), never trained here; getattr: older configs lack them.
    for key, plain in (("type_vocab_size", 0), ("embed_norm", False)):
        if getattr(config, key, plain) != plain:
            value = getattr(config, key)
            raise ValueError(f"tfviz.ensemble cannot train a model with {key}={value!r}")
    if config.n_out < 1:
        raise ValueError("tfviz.ensemble trains models with an output head (n_out >= 1)")


def stacked_forward(
    config: ModelConfig,
    blocks: list[Block],
    flat: Tensor,
    packing: Packing,
    w_o: Sequence[str],
    training: bool,
) -> Tensor:
    """Encoder.forward(ids, pad_mask, w_o, trace=False).logits for R runs at once.

    Args:
        flat: (R, N) weights in `layout` order.
        packing: the runs' (R, B, T) batch, from `pack`.
        w_o: one mode per run (tfviz.wo.TRAINING_MODES).
        training: dropout on (config.dropout), drawn independently per run.
    Returns:
        logits (R, B, n_out) for pooled models; per token (R, M, n_out) in slot order (`unpack`
        puts them on the (R, B, T) grid).
    """
    R, B, T = packing.grid
    M = packing.ids.shape[1]
    D, H, d_k = config.d_model, config.n_heads, config.d_k
    eps = getattr(config, "norm_eps", 1e-5)
    act = activation_function(getattr(config, "activation", "relu"))  # the model's own definition
    pieces = flat.split([b.size for b in blocks], dim=1)  # backward: one cat
    p = {b.name: piece.view(R, *b.shape) for b, piece in zip(blocks, pieces, strict=True)}
    drop = config.dropout if training else 0.0

    if config.embed == "token":
        x = _lookup(p["embed.weight"], packing.ids)  # (R, M, D)
    else:  # Linear(1, D) on the id as a number: id * w + b
        value = packing.ids.to(flat.dtype).unsqueeze(-1)  # (R, M, 1)
        x = torch.addcmul(p["embed.bias"].view(R, 1, D), value, p["embed.weight"].view(R, 1, D))
    x = x + _lookup(p["pos"].view(R, -1, D), packing.pos.view(R, M))  # (R, M, D)

    grid = (packing.seq, packing.pos)  # where each slot sits in the (R*B, T) attention grid
    # Padded keys get -inf added to their scores: exactly zero weight, as in Encoder.
    key_bias = packing.key_bias.to(flat.dtype).unsqueeze(1).expand(R * B, H, 1, T)
    key_bias = key_bias.reshape(R * B * H, 1, T)  # (R*B*H, 1, T), one row per (sequence, head)
    scale = 1.0 / math.sqrt(d_k)
    # W_o as each run applies it, from tfviz.wo's one definition of the modes (as Encoder does):
    # its own, the identity or zeros (bias 0), or its head-diagonal blocks. Mapping weights, not
    # activations, keeps one matmul for all runs; runs without W_o send it exactly zero gradient
    # (x @ I is exactly x), and a block-diagonal run's blocks that mix heads get exactly zero
    # gradient and stay as they are stored (zero, see set_w_o).
    all_learned = all(m == "learned" for m in w_o)
    pre = config.norm == "pre"
    for i in range(config.n_layers):
        L = f"layers.{i}"

        def attention(h: Tensor, L: str = L) -> Tensor:
            qkv = _linear(h, p[f"{L}.attn.qkv.weight"], p[f"{L}.attn.qkv.bias"])  # (R, M, 3D)
            # Into the grid, laid out (3, R*B, H, T, d_k): each head's rows side by side.
            heads = _ToGrid.apply(qkv.view(R * M, 3, H, d_k), grid, (3, R * B, H, T, d_k))
            q, k, v = heads.view(3, R * B * H, T, d_k).unbind(0)  # (R*B*H, T, d_k) each
            # The plain softmax path: for 8-dim heads and T ~ 17 torch's fused CPU kernel
            # spends far more time per (sequence, head) than two small matmuls.
            scores = torch.baddbmm(key_bias, q, k.transpose(1, 2), alpha=scale)  # (., T, T)
            attn = F.dropout(F.softmax(scores, dim=-1), drop, training)
            z = torch.bmm(attn, v).view(R * B, H, T, d_k)
            concat = _FromGrid.apply(z, grid).view(R, M, D)  # (R, M, D): heads side by side
            W, b = p[f"{L}.attn.W_o.weight"], p[f"{L}.attn.W_o.bias"]
            if not all_learned:
                maps = [wo.effective(W[r], b[r], m, H, False) for r, m in enumerate(w_o)]
                W = torch.stack([W_r for W_r, _ in maps])
                b = torch.stack([b_r for _, b_r in maps])
            return _linear(concat, W, b)

        def feed_forward(h: Tensor, L: str = L) -> Tensor:
            hidden = act(_linear(h, p[f"{L}.ff.fc1.weight"], p[f"{L}.ff.fc1.bias"]))
            hidden = F.dropout(hidden, drop, training)
            return _linear(hidden, p[f"{L}.ff.fc2.weight"], p[f"{L}.ff.fc2.bias"])

        def norm(h: Tensor, which: str, L: str = L) -> Tensor:
            return _layer_norm(h, p[f"{L}.{which}.weight"], p[f"{L}.{which}.bias"], eps)

        if pre:
            x = x + F.dropout(attention(norm(x, "norm1")), drop, training)
            x = x + F.dropout(feed_forward(norm(x, "norm2")), drop, training)
        else:
            x = norm(x + F.dropout(attention(x), drop, training), "norm1")
            x = norm(x + F.dropout(feed_forward(x), drop, training), "norm2")
    if pre:
        x = _layer_norm(x, p["norm_f.weight"], p["norm_f.bias"], eps)
    if config.pool == "none":
        return _linear(x, p["head.weight"], p["head.bias"])  # (R, M, n_out)
    if config.pool == "mean":
        # Sum each example's real slots (the others into a spare row R*B), divide by its length.
        into = torch.where(packing.real.view(-1), packing.seq, R * B)
        sums = x.new_zeros(R * B + 1, D).index_add(0, into, x.reshape(R * M, D))[: R * B]
        x = (sums / packing.lengths.reshape(R * B, 1).to(x.dtype)).view(R, B, D)
    else:  # "first": an example's first token is the slot after the previous examples' tokens
        first = packing.lengths.cumsum(dim=1) - packing.lengths  # (R, B)
        x = x.gather(1, first.unsqueeze(-1).expand(R, B, D))
    return _linear(x, p["head.weight"], p["head.bias"])  # (R, B, n_out)


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
) -> tuple[list[Encoder], dict]:
    """Train R runs together; run r is train(task, config, seed=s, w_o=m, ...) for runs[r] = (s, m).

    Args:
        runs: (seed, w_o) per run; runs sharing a seed share initial weights (W_o aside) and
            batches, as sequential runs with that seed do.
        steps, batch_size, lr, device, schedule, clip, min_len, max_len: as tfviz.train.train,
            the same for every run.
        on_step: called after every step with an EnsembleStep; returning False stops all runs.
    Returns:
        (one Encoder per run, in eval mode on the device; history with "loss": one list per run,
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
    start = time.perf_counter()

    rows = []
    for seed, mode in runs:
        state = initial_state(config, seed)
        set_w_o(state, config, mode, start=True)
        rows.append(flatten(blocks, state))
    flat = torch.stack(rows).to(dev).requires_grad_()  # (R, N): the one leaf
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
            ids, pad, target = (t[seed_of_run].to(dev) for t in stack_batches(task, drawn))
            packing = pack(ids, pad)
            if task.kind == "token":
                target = pack_targets(packing, target)  # (R, M), as the logits come
            logits = stacked_forward(config, blocks, flat, packing, modes, training=True)
            # Each run's own loss; their sum gives each run's weights its own gradient.
            per_run = zip(logits.unbind(0), target.unbind(0), strict=True)
            loss = torch.stack([task.loss(lg, tg) for lg, tg in per_run])  # (R,)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            if clip is not None:
                with torch.no_grad():
                    norm = torch.linalg.vector_norm(flat.grad, dim=1)  # (R,) per-run grad norm
                    coef = (clip / (norm + CLIP_EPS)).clamp(max=1.0)
                    flat.grad.mul_(coef.unsqueeze(1))
            opt.step()
            values = loss.detach().tolist()
            for r, value in enumerate(values):
                losses[r].append(value)
                if not math.isfinite(value):
                    seed, mode = runs[r]
                    raise FloatingPointError(
                        f"training diverged at step {step + 1} in run {r + 1} (seed {seed}, "
                        f"w_o={mode}; loss {value}); try a smaller learning rate"
                    )
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


def to_encoders(
    config: ModelConfig, blocks: list[Block], flat: Tensor, w_o: Sequence[str]
) -> list[Encoder]:
    """One Encoder per row of flat (R, N), in eval mode on flat's device, W_o set as trained."""
    models = []
    for row, mode in zip(flat.cpu(), w_o, strict=True):
        state = unflatten(blocks, row)
        set_w_o(state, config, mode)  # as train() leaves it
        with torch.random.fork_rng(devices=[]):  # building an Encoder draws an init: not ours
            model = Encoder(config)
        model.load_state_dict(state)
        models.append(model.to(flat.device).eval())
    return models
