"""Time of each analysis in tfviz/analysis/ relative to one plain forward pass; prints ratios.

The model is the largest bundled checkpoint, the input T=16 tokens. Trace-based analyses get one
example (what the app shows for a typed input); the ones that run the model over fresh examples
(head importance, keep-top-k, ablation before/after W_o) get their default n=256 examples of the
same length. Each round times a plain forward pass (trace=False, B=1; median of 20 calls) and then
the analysis, so machine noise falls on both; the ratio reported is the median over rounds.

Usage: python -m bench.analysis_speed [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from bench.harness import seconds
from tfviz import analysis as A
from tfviz import get_task, load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
T = 16


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    largest = max(ROOT.glob("models/*.safetensors"), key=lambda f: f.stat().st_size)
    model, meta = load_checkpoint(largest)
    task = get_task(meta.task)
    chars = T - int(task.bos)  # BOS takes one of the T positions
    ids, pad = task.encode_batch([(task.alphabet * T)[:chars]])
    assert ids.shape == (1, T)
    lengths = dict(min_len=chars, max_len=chars)
    c = model.config
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {largest.name} "
        f"(task {task.name}, D={c.d_model} H={c.n_heads} L={c.n_layers}), T={T}"
    )

    with torch.no_grad():
        trace = model(ids, pad).trace

    def plain_forward():
        with torch.no_grad():
            model(ids, pad, trace=False)

    def traced_forward():
        with torch.no_grad():
            model(ids, pad, trace=True)

    scores = A.head_importance(model, task, **lengths).scores("loss")
    half = c.n_layers * c.n_heads // 2
    cases = {
        "forward, trace=True (B=1)": traced_forward,
        "norm_attention (B=1)": lambda: A.norm_attention(model, trace),
        "norm_attention_summed (B=1)": lambda: A.norm_attention_summed(model, trace),
        "rollout_from_trace raw (B=1)": lambda: A.rollout_from_trace(model, trace, "raw"),
        "rollout_from_trace norm (B=1)": lambda: A.rollout_from_trace(model, trace, "norm"),
        "head_importance (n=256)": lambda: A.head_importance(model, task, **lengths),
        "accuracy_keeping_top_k (n=256)": lambda: A.accuracy_keeping_top_k(
            model, task, scores, half, **lengths
        ),
        "keep_top_k_curve (n=256, all k)": lambda: A.keep_top_k_curve(
            model, task, scores, **lengths
        ),
        "compare_ablation (n=256)": lambda: A.compare_ablation(model, task, 0, 0, **lengths),
        "compare_ablation (B=1, typed input)": lambda: A.compare_ablation(
            model, task, 0, 0, batch=task.batch_from_texts([(task.alphabet * T)[:chars]])
        ),
        "ov_circuits": lambda: A.ov_circuits(model),
        "composition_scores": lambda: A.composition_scores(model),
        "w_o_mixing": lambda: A.w_o_mixing(model),
    }
    for fn in (plain_forward, *cases.values()):  # warm-up: first calls pay one-off costs
        fn()
    base_all, rows = [], []
    for name, fn in cases.items():
        ratios, times = [], []
        for _ in range(args.rounds):
            base = seconds(plain_forward, calls=20)
            spent = seconds(fn)
            base_all.append(base)
            ratios.append(spent / base)
            times.append(spent)
        rows.append((name, statistics.median(times), statistics.median(ratios)))
    print(f"plain forward pass (trace=False, B=1): {statistics.median(base_all) * 1e3:.3f} ms\n")
    print(f"{'analysis':<38} {'median ms':>10} {'x forward':>10}")
    for name, spent, ratio in rows:
        print(f"{name:<38} {spent * 1e3:>10.2f} {ratio:>10.1f}")


if __name__ == "__main__":
    main()
