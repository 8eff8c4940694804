"""Models opened from folders (tfviz.hf), per family and per length: load time, memory, the trace
a view runs on each keystroke, and the fill-in-the-mask answer.

No real checkpoint is downloaded: for each family (BERT, RoBERTa, DistilBERT) a random model of a
real size (default MiniLM's: 6 layers, 12 heads, D = 384, d_ff = 1536, 30,522 pieces, 512
positions; --base for BERT-base's 12 x 12 x 768) is built with transformers and saved with
save_pretrained as safetensors, with tests/hf/test_hf_encoders.py's small tokenizers (the weights'
cost does not depend on what the pieces spell). Each family is then opened in a fresh
subprocess, so its load time and resident memory are its own. Per length (32, 128, 256, 512
word-pieces) the script times trace.run_trace (what a keystroke costs the server in every
view: the forward pass with every site copied out) and hf.fill_mask with W_o switched off (two
passes), as median and p95 of --calls calls, and the memory per length: one trace's numpy
arrays (what the server caches per trace) and the growth of the process's peak resident memory
while that length runs. The browser's share of a keystroke is
bench/ui_latency's business.

Usage: python -m bench.hf_families [--calls 15] [--base] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.encoder_folders import BASE, FAMILIES, MINILM, build
from bench.harness import median, percentile, rss_mib, trace_mib

LENGTHS = (32, 128, 256, 512)


def measure(folder: str, calls: int, threads: int) -> dict:
    """In this (fresh) process: open the folder, then time the trace and fill-mask per length."""
    import torch

    torch.set_num_threads(threads)
    from tests.hf.test_hf_encoders import WORDS
    from tfviz import hf
    from tfviz.core.interventions import Interventions
    from tfviz.core.trace import run_trace
    from tfviz.hf.pretrained import SentenceTask

    before = rss_mib()
    start = time.perf_counter()
    loaded = hf.open_folder(folder)
    load_s = time.perf_counter() - start
    out = {"load_s": load_s, "rss_mib": rss_mib() - before, "limit": loaded.max_pieces}
    task = SentenceTask(loaded.tokenizer, head=loaded.head)
    mask = loaded.tokenizer.specials.mask
    off = Interventions(w_o="identity")
    for n in LENGTHS:
        words = (WORDS * (n // len(WORDS) + 2))[: n * 2]
        text = " ".join(words)
        pieces = loaded.tokenizer.encode(text)  # cut to the model's limit
        if len(pieces.ids) < min(n, loaded.max_pieces):
            continue
        # Cut the text to n word-pieces (specials included), the mask at its middle.
        text = text[: pieces.spans[min(n, len(pieces.ids)) - 2][1]]
        middle = len(text) // 2
        masked = text[:middle].rsplit(" ", 1)[0] + f" {mask} " + text[middle:].split(" ", 1)[-1]
        timings = {"trace": [], "fill_mask": []}
        peak_before = rss_mib("VmHWM")
        for _ in range(calls + 1):  # the first call of each is untimed (warm-up)
            t0 = time.perf_counter()
            trace = run_trace(loaded.model, task, text, off)
            t1 = time.perf_counter()
            hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, masked, off, mask=mask)
            t2 = time.perf_counter()
            timings["trace"].append(t1 - t0)
            timings["fill_mask"].append(t2 - t1)
        # Lengths run shortest first, so the peak's growth is what this length needs beyond the
        # shorter ones (0 where they already needed as much).
        row = {
            "pieces": len(task.pieces(text).ids),
            "trace_mib": trace_mib(trace),
            "peak_growth_mib": rss_mib("VmHWM") - peak_before,
        }
        for name, values in timings.items():
            values = values[1:]
            row[name] = (median(values), percentile(values, 95))
        out[str(n)] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--base", action="store_true", help="BERT-base sizes instead of MiniLM's")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.calls, args.threads)))
        return
    sizes = BASE if args.base else MINILM
    print(f"sizes: {sizes}, {args.threads} thread(s), {args.calls} timed calls per figure")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, family in FAMILIES.items():
            folder = Path(tmp) / kind
            build(kind, folder, sizes)
            child = subprocess.run(
                [sys.executable, "-m", "bench.hf_families", "--child", str(folder),
                 "--calls", str(args.calls), "--threads", str(args.threads)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            r = json.loads(child.stdout.strip().splitlines()[-1])
            size = (folder / "model.safetensors").stat().st_size / 2**20
            print(
                f"\n{family}: {size:.0f} MiB of weights, opened in {r['load_s']:.2f} s, "
                f"resident memory +{r['rss_mib']:.0f} MiB, limit {r['limit']} word-pieces"
            )
            print(
                "  pieces   trace median / p95 (ms)   fill-mask, W_o off, median / p95 (ms)"
                "   one trace's arrays   peak memory growth"
            )
            for n in LENGTHS:
                row = r.get(str(n))
                if row is None:
                    continue
                tr, fm = row["trace"], row["fill_mask"]
                print(
                    f"  {row['pieces']:>6}   {1e3 * tr[0]:7.1f} / {1e3 * tr[1]:7.1f}"
                    f"            {1e3 * fm[0]:7.1f} / {1e3 * fm[1]:7.1f}"
                    f"                  {row['trace_mib']:7.1f} MiB"
                    f"        +{row['peak_growth_mib']:.0f} MiB"
                )


if __name__ == "__main__":
    main()
