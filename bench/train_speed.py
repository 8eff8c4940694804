"""Training and tracing speed, measured side by side in one process; prints ratios.

1. Steps per second of tfviz.training.train against a plain loop written the way seed 002 writes it
(its
   own small modules, data from torch.randint, Adam 1e-3, batch 64, length 8), same task and sizes.
   Target: ratio (ours / plain) >= 1.
2. Forward time with trace=True against trace=False on a bundled model at T=16.
   Target: ratio <= 1.5.
3. The W_o experiment for one task as tfviz.experiments.experiment runs it (5 seeds x 2 arms at its
real
   sizes, 500 steps, evaluation included): the runs one after another
   (run_experiment(batched=False)) against trained together as one batched model (the default),
   both on --threads torch threads (default 1, as the experiment CLI and the app's jobs run).
   Target: ratio (sequential / batched) >= 4. --exp-steps runs a fraction of the steps.
4. Retraining W_o alone (tfviz.training.train.retrain_w_o, every other weight frozen) against
training
   the whole model (tfviz.training.train.train), time per step, on the largest bundled model's sizes
   and task, one thread; then where a step's time goes (drawing the batch, forward, backward,
   clipping + Adam) for both. Target: ratio (whole / W_o alone) >= 3.

Each side runs in alternating rounds so machine noise falls on both; the median round is reported.
Usage: python -m bench.train_speed [--steps 200] [--rounds 5]
       [--part all|train|forward|experiment|retrain]
       [--task sum] [--exp-steps 500] [--exp-rounds 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from tfviz import get_task, load_checkpoint, train
from tfviz.experiments import experiment as E
from tfviz.training.train import retrain_w_o, with_w_o_start

ROOT = Path(__file__).resolve().parent.parent


# ---- the baseline: seed 002's modules, written plainly -------------------------------------------
class SeedMHA(nn.Module):
    def __init__(self, d_model, num_heads, dropout):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, D = x.shape
        q = self.W_q(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        w = self.dropout(F.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1))
        return self.W_o((w @ v).transpose(1, 2).contiguous().view(B, T, D))


class SeedLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.attn = SeedMHA(d_model, num_heads, dropout)
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attn(x)))
        return self.norm2(x + self.dropout(self.fc2(self.dropout(F.relu(self.fc1(x))))))


class SeedModel(nn.Module):
    def __init__(self, d_model=32, num_heads=4, d_ff=64, num_layers=2, max_len=16, dropout=0.1):
        super().__init__()
        self.input_proj = nn.Linear(1, d_model)
        self.pos = nn.Parameter(torch.randn(1, max_len, d_model) * 0.02)
        self.layers = nn.ModuleList(
            SeedLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)
        )
        self.regressor = nn.Linear(d_model, 1)

    def forward(self, x):
        x = self.input_proj(x.unsqueeze(-1)) + self.pos[:, : x.size(1)]
        for layer in self.layers:
            x = layer(x)
        return self.regressor(x.mean(dim=1))


def plain_loop(steps: int) -> float:
    """Seed 002's training loop; returns seconds."""
    torch.manual_seed(42)
    model = SeedModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for _ in range(steps):
        x = torch.randint(0, 10, (64, 8)).float()
        y = x.sum(dim=1, keepdim=True) / 10.0
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def ours(steps: int) -> float:
    """tfviz.training.train on the same task and sizes (the sum_seed recipe); returns seconds."""
    task = get_task("sum")
    cfg = task.model_config(
        d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=16, dropout=0.1, embed="value"
    )
    start = time.perf_counter()
    train(
        task,
        cfg,
        steps=steps,
        batch_size=64,
        lr=1e-3,
        seed=42,
        device="cpu",
        min_len=8,
        max_len=8,
        schedule="constant",
        clip=None,
    )
    return time.perf_counter() - start


def forward_times(model, ids, pad, reps: int) -> tuple[float, float]:
    with torch.no_grad():
        for trace in (True, False):  # warm-up
            model(ids, pad, trace=trace)
        t_on = t_off = 0.0
        for _ in range(reps):
            s = time.perf_counter()
            model(ids, pad, trace=True)
            t_on += time.perf_counter() - s
            s = time.perf_counter()
            model(ids, pad, trace=False)
            t_off += time.perf_counter() - s
    return t_on / reps, t_off / reps


def experiment_times(task: str, steps: int, rounds: int, threads: int) -> None:
    """Part 3: the whole experiment for one task, sequential against batched; prints the ratio."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    wall: dict[str, list[float]] = {"sequential": [], "batched": []}
    cpu: dict[str, list[float]] = {"sequential": [], "batched": []}
    results = {}
    try:
        for _ in range(rounds):
            for name, batched in (("sequential", False), ("batched", True)):
                w, c = time.perf_counter(), time.process_time()
                results[name] = E.run_experiment(task, steps=steps, batched=batched)
                wall[name].append(time.perf_counter() - w)
                cpu[name].append(time.process_time() - c)
    finally:
        torch.set_num_threads(before)
    full = E.DEFAULTS["steps"]
    share = "full" if steps == full else f"{steps / full:.0%} of the experiment's {full}"
    runs = len(results["batched"].runs)
    print(
        f"experiment {task}: {runs // 2} seeds x 2 arms, {steps} steps ({share}), "
        f"{threads} thread(s), median of {rounds}"
    )
    for label, times in (("wall", wall), ("CPU ", cpu)):
        seq, bat = statistics.median(times["sequential"]), statistics.median(times["batched"])
        print(
            f"  {label} time  sequential {seq:7.1f} s   batched {bat:7.1f} s   "
            f"ratio sequential/batched {seq / bat:.2f}  (target >= 4.00)"
        )
    # Float rounding differs between the paths and training amplifies it over hundreds of steps
    # (as it does between 1 and 2 threads), so single runs drift apart; what must agree is what
    # the experiment reports: each condition's mean final loss, within its run-to-run spread.
    for name in ("sequential", "batched"):
        row = E.compare(results[name])[0]
        print(
            f"  {name:10s} final loss with W_o {row.mean_learned:.4g} ± {row.std_learned:.2g}, "
            f"without {row.mean_against:.4g} ± {row.std_against:.2g} (mean ± std over seeds)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument(
        "--part", choices=["all", "train", "forward", "experiment", "retrain"], default="all"
    )
    p.add_argument("--task", default="sum", help="the experiment's task (part 3)")
    p.add_argument("--exp-steps", type=int, default=E.DEFAULTS["steps"])
    p.add_argument("--exp-rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads for part 3")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.part in ("all", "train"):
        train_ratio(args)
    if args.part in ("all", "forward"):
        forward_ratio(args)
    if args.part in ("all", "experiment"):
        experiment_times(args.task, args.exp_steps, args.exp_rounds, args.threads)
    if args.part in ("all", "retrain"):
        retrain_ratio(args)


def train_ratio(args) -> None:
    """Part 1: tfviz.training.train against the plain seed-002 loop."""
    plain, mine = [], []
    for _ in range(args.rounds):
        plain.append(args.steps / plain_loop(args.steps))
        mine.append(args.steps / ours(args.steps))
    p_med, o_med = statistics.median(plain), statistics.median(mine)
    print(
        f"train steps/s  plain seed-002 loop {p_med:7.1f}   tfviz.training.train {o_med:7.1f}   "
        f"ratio ours/plain {o_med / p_med:.2f}  (target >= 1.00)"
    )


def forward_ratio(args) -> None:
    """Part 2: a traced forward pass against a plain one."""
    largest = max(ROOT.glob("models/*.safetensors"), key=lambda f: f.stat().st_size)
    model, meta = load_checkpoint(largest)
    task = get_task(meta.task)
    text = (task.alphabet * 16)[: task.max_len]
    for B in (1, 64):
        ids, pad = task.encode_batch([text] * B)
        runs = [forward_times(model, ids, pad, args.reps) for _ in range(args.rounds)]
        on = statistics.median(r[0] for r in runs)
        off = statistics.median(r[1] for r in runs)
        print(
            f"forward {largest.name} B={B:<3d} T={ids.shape[1]}  trace=True {on * 1e3:.3f} ms  "
            f"trace=False {off * 1e3:.3f} ms  ratio {on / off:.2f}  (target <= 1.50)"
        )


def retrain_ratio(args) -> None:
    """Part 4: time per step of retrain_w_o against train() on the same sizes, task and batch."""
    before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        largest = max(ROOT.glob("models/*.safetensors"), key=lambda f: f.stat().st_size)
        model, meta = load_checkpoint(largest)
        task = get_task(meta.task)
        whole, alone = [], []
        for _ in range(args.rounds):
            _, history = train(task, model.config, steps=args.steps, device="cpu", seed=1)
            whole.append(history["seconds"] / args.steps)
            _, history = retrain_w_o(model, task, start="identity", steps=args.steps)
            alone.append(history["seconds"] / args.steps)
        w, a = statistics.median(whole), statistics.median(alone)
        print(
            f"retrain {largest.name} ({meta.task}, {model.config.n_params:,} weights, "
            f"{args.threads} thread(s), median of {args.rounds} x {args.steps} steps): whole "
            f"model {w * 1e3:.2f} ms/step   W_o alone {a * 1e3:.2f} ms/step   ratio "
            f"whole/W_o alone {w / a:.2f}  (target >= 3.00)"
        )
        measured = step_parts(model, task, args.steps, args.rounds)
        for name, parts in measured.items():
            total = sum(parts.values())
            shares = "  ".join(f"{k} {v * 1e3:.2f} ms ({v / total:.0%})" for k, v in parts.items())
            print(f"  {name:26s} {total * 1e3:6.2f} ms: {shares}")
        # W_o alone still runs the whole forward pass on a fresh batch each step (every later
        # layer reads layer 0's W_o output), so whole / (batch + forward) bounds the ratio even
        # if its backward pass and Adam took no time at all.
        full, mine = measured["whole model"], measured["W_o alone (frozen)"]
        bound = sum(full.values()) / (mine["batch"] + mine["forward"])
        naive = sum(measured["W_o alone (naive)"].values()) / sum(mine.values())
        print(
            f"  bound with a free backward and Adam: {bound:.2f}x; freezing (requires_grad False) "
            f"against Adam on W_o with every weight still requiring grad: {naive:.2f}x faster"
        )
    finally:
        torch.set_num_threads(before)


def step_parts(model, task, steps: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median seconds per step of each part of a training step: the whole model; W_o alone as
    retrain_w_o trains it (every other weight has requires_grad False, so autograd neither
    computes their gradients nor records anything before layer 0's W_o); and W_o alone done
    naively (Adam on W_o only, but every weight still requiring grad)."""
    import numpy as np

    whole = with_w_o_start(model, "learned").requires_grad_(True)
    alone = with_w_o_start(model, "identity")
    alone_params = [p for layer in alone.layers for p in layer.attn.W_o.parameters()]
    for p in alone_params:
        p.requires_grad_()
    naive = with_w_o_start(model, "identity").requires_grad_(True)
    naive_params = [p for layer in naive.layers for p in layer.attn.W_o.parameters()]
    setups = {
        "whole model": (whole, list(whole.parameters())),
        "W_o alone (frozen)": (alone, alone_params),
        "W_o alone (naive)": (naive, naive_params),
    }
    times: dict[str, dict[str, list[float]]] = {name: {} for name in setups}
    for _ in range(rounds):
        for name, (net, params) in setups.items():
            rng = np.random.default_rng(0)
            opt = torch.optim.Adam(params, lr=1e-3, fused=True)
            net.train()
            sums = dict.fromkeys(("batch", "forward", "backward", "clip + Adam"), 0.0)
            for _ in range(steps):
                t0 = time.perf_counter()
                batch = task.sample(64, rng)
                t1 = time.perf_counter()
                loss = task.loss(net(batch.ids, batch.pad_mask, trace=False).logits, batch.target)
                t2 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                t3 = time.perf_counter()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                loss.item()
                t4 = time.perf_counter()
                for key, dt in zip(sums, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    sums[key] += dt
            for key, total in sums.items():
                times[name].setdefault(key, []).append(total / steps)
    return {
        name: {k: statistics.median(v) for k, v in parts.items()} for name, parts in times.items()
    }


if __name__ == "__main__":
    main()
