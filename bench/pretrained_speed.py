"""all-MiniLM-L6-v2 in tfviz's Encoder: load time, resident memory, and the cost of the trace.

Prints, from one run: the time load_minilm takes in this fresh process and how much the process's
resident memory grew; then, at T = 32 and 128 word-pieces (B = 1, the app's typed sentence), a
forward pass with trace=True against trace=False (torch's fused attention, nothing kept). Each
round times both, alternating, as the median of several calls, so machine noise falls on both;
the ratio reported is the median over rounds. Target: trace=True / trace=False <= 1.5.

Usage: python -m bench.pretrained_speed [--rounds 7] [--calls 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.harness import rss_mib, seconds
from tfviz.hf import pretrained as P

TEXT = (
    "Attention lets every word look at every other word, and the output projection mixes what "
    "the heads found before it is added back to the residual stream. "
) * 8  # well over 128 word-pieces


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    before = rss_mib()
    start = time.perf_counter()
    model, tok = P.load_minilm("cpu")
    load_s = time.perf_counter() - start
    grown = rss_mib() - before
    n = sum(t.numel() for t in model.parameters())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {P.NAME}, "
        f"{n:,} parameters ({n * 4 / 2**20:.0f} MiB float32)"
    )
    print(f"load_minilm: {load_s:.2f} s, resident memory +{grown:.0f} MiB (first call here)")
    start = time.perf_counter()
    P.load_minilm("cpu")
    print(f"load_minilm again (cached): {(time.perf_counter() - start) * 1e6:.0f} us\n")

    pieces = tok.encode(TEXT)
    for T in (32, 128):
        ids = torch.tensor([[*pieces.ids[: T - 1], tok.sep_id]])  # [CLS] ... [SEP], (1, T)
        assert ids.shape == (1, T)

        def traced(ids=ids):
            with torch.no_grad():
                model(ids, trace=True)

        def plain(ids=ids):
            with torch.no_grad():
                model(ids, trace=False)

        traced(), plain()  # warm-up: first calls pay one-off costs
        ratios, t_on, t_off = [], [], []
        for _ in range(args.rounds):
            off = seconds(plain, args.calls)
            on = seconds(traced, args.calls)
            t_on.append(on)
            t_off.append(off)
            ratios.append(on / off)
        print(
            f"forward B=1 T={T:<4} trace=True {statistics.median(t_on) * 1e3:7.2f} ms  "
            f"trace=False {statistics.median(t_off) * 1e3:7.2f} ms  "
            f"ratio {statistics.median(ratios):.2f}  (target <= 1.50)"
        )


if __name__ == "__main__":
    main()
