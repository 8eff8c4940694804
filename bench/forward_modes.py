"""A traced forward pass under each W_o switch, against the learned pass, in one run.

The app runs a traced pass (trace=True, as the views draw it) every time a student switches W_o.
A switched pass may cost at most 1.2x a learned one (issue 18): the map a mode applies (the
identity, zeros, W_o's head-diagonal blocks, its rank-k truncation) is built once per weights and
mode (tfviz.core.wo.effective, through Interventions.resolve) and shared by the pass, its trace, its
numpy copy (tfviz.core.trace) and the analyses, so no SVD or truncation is computed twice for one
switch.

For the bundled toy model `reverse` (T = 16) and for all-MiniLM-L6-v2 (T = 32 word-pieces), each
round times the learned pass and every switched pass, alternating, as the median of --calls calls;
a mode's ratio is the median over rounds of (mode / learned). The first switched pass of a mode
pays for building its map once (reported apart, as "first").

Usage: python -m bench.forward_modes [--rounds 7] [--calls 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from bench.harness import seconds
from tfviz.core import wo
from tfviz.core.interventions import Interventions
from tfviz.hf import pretrained as P
from tfviz.training.checkpoint import load_checkpoint

MODELS = Path(__file__).resolve().parent.parent / "models"
MODES = ("identity", "zero", wo.BLOCK_DIAGONAL, "rank:4", "rank:16")
TARGET = 1.2
TEXT = "Attention lets every word look at every other word, and W_o mixes what the heads found. "


def models() -> list[tuple[str, torch.nn.Module, torch.Tensor]]:
    toy, _ = load_checkpoint(MODELS / "reverse.safetensors")
    toy.eval()
    gen = torch.Generator().manual_seed(0)
    toy_ids = torch.randint(0, toy.config.vocab_size, (1, 16), generator=gen)
    minilm, tok = P.load_minilm("cpu")
    pieces = tok.encode(TEXT * 4).ids
    minilm_ids = torch.tensor([[*pieces[:31], tok.sep_id]])
    return [("reverse T=16", toy, toy_ids), ("MiniLM T=32", minilm, minilm_ids)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    worst = 0.0
    for name, model, ids in models():

        def traced(iv: Interventions, model=model, ids=ids) -> None:
            with torch.no_grad():
                model(ids, interventions=iv, trace=True)

        switched = {m: Interventions(w_o=m) for m in MODES}
        first = {}
        for mode, iv in switched.items():
            start = time.perf_counter()
            traced(iv)
            first[mode] = time.perf_counter() - start
        traced(Interventions())
        ratios: dict[str, list[float]] = {m: [] for m in MODES}
        learned_s = []
        for _ in range(args.rounds):
            for mode, iv in switched.items():
                base = seconds(lambda: traced(Interventions()), args.calls)
                ratios[mode].append(seconds(lambda iv=iv: traced(iv), args.calls) / base)
                learned_s.append(base)
        print(f"{name}: learned {statistics.median(learned_s) * 1e3:.2f} ms (traced, B=1)")
        for mode in MODES:
            r = statistics.median(ratios[mode])
            worst = max(worst, r)
            print(
                f"  {mode:<15} {r:5.2f}x learned  (first pass {first[mode] * 1e3:7.1f} ms)  "
                f"{'met' if r <= TARGET else 'NOT met'} (<= {TARGET})"
            )
    print(f"worst ratio {worst:.2f} (target <= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
