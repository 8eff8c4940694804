"""Decoder folders (tfviz.hf), per family and per length: load time, memory, and the traced
forward a keystroke costs, against transformers' own forward on the same ids in the same process.

No real checkpoint is downloaded: for each family a random model of a real model's sizes is built
with transformers and saved with save_pretrained as safetensors, beside a small byte-level BPE
tokenizer.json (what the weights cost does not depend on what the pieces spell):

- gpt2: GPT-2 small (12 layers, 12 heads, D = 768, d_ff = 3072, 50,257 tokens, 1,024 positions,
  head tied); --small: DistilGPT2's 6 layers.
- llama: SmolLM-135M (30 layers, 9 query heads sharing 3 key/value heads, D = 576, d_ff = 1536,
  49,152 tokens, head tied).
- qwen2: Qwen2-0.5B (24 layers, 14 query heads sharing 2 key/value heads, D = 896, d_ff = 4864,
  151,936 tokens, q/k/v biases, head tied).

Each folder is opened in a fresh subprocess, so its load time and resident memory are its own:
first by tfviz (hf.open_folder), then by transformers (from_pretrained, eager attention, float32).
Per length (32 and 256 tokens; the ids are drawn directly from the tokenizer's pieces, so the
count is exact, with the beginning-of-sequence token first where the family puts one) the child
times, call for call by turns (which goes first alternates), after one untimed call of each:

- tfviz: trace.run_trace on a task that hands it those ids and answers from token ids, as
  hf.NextTokenTask does: the forward pass with every site the views read as numpy arrays
  (attention, z, concat, attn_out, the residual stream: views of the trace's stacked tensors),
  and the top 5 next tokens with their probabilities at every position (trace.head_top_next):
  what the server runs for a decoder folder's typed text in every view (the call
  bench/hf_families.py times for encoders);
- transformers: model(input_ids, output_attentions=True, output_hidden_states=True,
  use_cache=False) under torch.no_grad(): its logits, every layer's attention and hidden state,
  as tensors (no copy to numpy); no key/value cache, which tfviz does not build either.

It prints the median and p95 of --calls calls of each (wall clock), their ratio (tfviz /
transformers; the issue's target: <= 1.0), the ratio of the two medians of this process's CPU
time per call (on a machine shared with other jobs, the wall clock also holds their share), the
largest difference between the two models' attention weights (a sanity check that both ran the
same model: random weights give nearly even patterns; tests/hf/test_hf_decoders.py is the real
check),
and the memory: the resident memory each side's open and first forward added, private and
file-backed apart (a tensor read as it is stored stays a view of the memory-mapped safetensors
file), and per length one trace's numpy arrays (what the server caches per trace),
transformers' returned tensors, and each side's peak resident memory growth over one call (freed
heap handed back and the peak reset before each: malloc_trim, /proc/self/clear_refs), and the
memory tfviz keeps after the timed calls for the next trace (tfviz.core.buffers: a trace's
memory once nothing holds it; it is resident, not handed back). The last line is every figure
as JSON.

Usage: python -m bench.hf_decoders [--calls 7] [--small] [--families gpt2,llama,qwen2]
       [--threads 1]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.decoder_folders import FAMILIES, NAMED, SIZES, SMALL_GPT2, build
from bench.harness import median, percentile, rss_mib, trace_mib

LENGTHS = (32, 256)


def resident() -> dict[str, float]:
    """Resident memory now: all, private and file-backed (MiB)."""
    return {"all": rss_mib(), "private": rss_mib("RssAnon"), "file": rss_mib("RssFile")}


def grown(before: dict[str, float]) -> dict[str, float]:
    """How far each part of resident() grew since `before`."""
    return {k: v - before[k] for k, v in resident().items()}


def release() -> None:
    """Collect garbage and hand freed heap memory back to the system (glibc's malloc_trim), so
    that a measurement does not reuse, unseen, what an earlier one freed."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to hand back
        pass


def reset_peak() -> bool:
    """Set the peak resident memory (VmHWM) back to the current one (Linux 4.0+); False where
    that cannot be done (then a peak's growth is the growth beyond every earlier peak)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_growth(call) -> tuple[object, float]:
    """call()'s result, and how far the process's peak resident memory rose above the resident
    memory before it (MiB)."""
    release()
    reset_peak()
    before = rss_mib()
    result = call()
    return result, rss_mib("VmHWM") - before


def output_mib(out) -> float:
    """What transformers' output holds: logits, hidden states and attentions (tensors)."""
    n = out.logits.nbytes
    n += sum(t.nbytes for t in out.hidden_states) + sum(t.nbytes for t in out.attentions)
    return n / 2**20


def timing_ids(tokenizer, n: int, seed: int = 0) -> list[int]:
    """n token ids: the beginning-of-sequence token first where the family frames a text with
    it, then pieces of the tokenizer's drawn at random (no special one)."""
    import random

    rng = random.Random(seed)
    specials = {tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.unk_id}
    plain = [i for i in range(tokenizer.vocab_size) if i not in specials]
    first = list(tokenizer.before)
    return first + [rng.choice(plain) for _ in range(n - len(first))]


class IdsTask:
    """What trace.run_trace asks of a task, for fixed ids: the text is only their cache key, so
    a timed call is the forward pass and its copies, with no tokenizer in it."""

    kind = "text"
    model_kind = "decoder"

    def __init__(self, ids: list[int]):
        self.ids = ids

    def validate(self, text: str) -> str:
        return text

    def labels(self, text: str) -> list[str]:
        return [f"{n}:{i}" for n, i in enumerate(self.ids)]

    def encode_batch(self, texts: list[str], device=None):
        import torch

        ids = torch.tensor([self.ids], device=device or "cpu")
        return ids, torch.zeros_like(ids, dtype=torch.bool)

    def answer_from_logits(self, logits, length: int) -> list[str]:
        return []

    def answer_from_ids(self, ids) -> list[str]:
        # What NextTokenTask does, without its tokenizer: run_trace then takes the same path.
        return [str(int(i)) for i in ids]

    def solve_tokens(self, text: str) -> list[str]:
        return []


def summary(values: list[float]) -> tuple[float, float]:
    """(median, p95) of the timed calls."""
    return median(values), percentile(values, 95)


def measure(folder: str, calls: int, threads: int, lengths=LENGTHS) -> dict:
    """In this (fresh) process: open the folder with tfviz, then with transformers; per length,
    time tfviz's traced forward and transformers' forward on the same ids, by turns."""
    import torch

    torch.set_num_threads(threads)
    import transformers

    from tfviz import hf
    from tfviz.core import buffers
    from tfviz.core.interventions import Interventions
    from tfviz.core.trace import run_trace

    def ours(task):
        return run_trace(loaded.model, task, "timed", learned)

    def reference(ids):
        with torch.no_grad():
            return theirs(
                input_ids=ids, output_attentions=True, output_hidden_states=True,
                use_cache=False,
            )  # fmt: skip

    learned = Interventions()
    # Resident memory: after opening, and after one forward on the shortest length (what a
    # folder read lazily, as transformers' memory-mapped weights are, touches only then).
    release()
    before = resident()
    start = time.perf_counter()
    loaded = hf.open_folder(folder)
    out = {"load_s": time.perf_counter() - start, "open_rss": grown(before)}
    first = IdsTask(timing_ids(loaded.tokenizer, min(lengths)))
    ours(first)
    release()
    out["rss"] = grown(before)
    cfg = loaded.model.config
    out["params"] = sum({id(p): p.numel() for p in loaded.model.parameters()}.values())
    out["sizes"] = dict(layers=cfg.n_layers, heads=cfg.n_heads, kv_heads=cfg.kv_heads,
                        hidden=cfg.d_model, ff=cfg.d_ff, vocab=cfg.vocab_size)  # fmt: skip
    release()
    before = resident()
    start = time.perf_counter()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ).eval()
    out["hf_load_s"] = time.perf_counter() - start
    out["hf_open_rss"] = grown(before)
    reference(torch.tensor([first.ids]))
    release()
    out["hf_rss"] = grown(before)
    out["hf_params"] = sum(p.numel() for p in theirs.parameters())

    for n in lengths:
        if n > loaded.max_pieces:
            continue
        task = IdsTask(timing_ids(loaded.tokenizer, n, seed=n))
        ids = torch.tensor([task.ids])
        # The untimed first call of each: its peak memory, and the two answers compared.
        trace, grew = peak_growth(lambda task=task: ours(task))
        ref, hf_grew = peak_growth(lambda ids=ids: reference(ids))
        diff = max(
            float((torch.from_numpy(trace.attn[i]) - a[0]).abs().max())
            for i, a in enumerate(ref.attentions)
        )
        row = {
            "tokens": int(trace.attn.shape[-1]),
            "trace_mib": trace_mib(trace),
            "hf_output_mib": output_mib(ref),
            "peak_growth_mib": grew,
            "hf_peak_growth_mib": hf_grew,
            "attn_max_diff": diff,
        }
        del trace, ref
        wall = {"tfviz": [], "transformers": []}
        cpu = {"tfviz": [], "transformers": []}
        for call in range(calls):
            turns = [("tfviz", ours, task), ("transformers", reference, ids)]
            for name, fn, arg in turns if call % 2 == 0 else turns[::-1]:
                c0, t0 = time.process_time(), time.perf_counter()
                result = fn(arg)
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                del result
        for name in ("tfviz", "transformers"):
            row[name] = summary(wall[name])
            row[f"{name}_cpu"] = median(cpu[name])
        row["kept_mib"] = buffers.kept_bytes() / 2**20
        row["ratio_median"] = row["tfviz"][0] / row["transformers"][0]
        row["ratio_p95"] = row["tfviz"][1] / row["transformers"][1]
        # This process's CPU time: what other jobs on a shared machine take is not in it.
        row["ratio_cpu"] = row["tfviz_cpu"] / row["transformers_cpu"]
        out[str(n)] = row
    return out


def mib(grew: dict[str, float]) -> str:
    """A resident() growth as printed: all (private + file-backed)."""
    return f"+{grew['all']:.0f} MiB ({grew['private']:.0f} private + {grew['file']:.0f} file)"


def table(kind: str, r: dict, weights_mib: float) -> list[str]:
    """The lines printed for one family (its lengths as a markdown table)."""
    s = r["sizes"]
    kv = f" ({s['kv_heads']} key/value)" if s["kv_heads"] != s["heads"] else ""
    lines = [
        f"\n{FAMILIES[kind]} at {r.get('as', 'these')} sizes: {s['layers']} layers, "
        f"{s['heads']} heads{kv}, D {s['hidden']}, d_ff {s['ff']}, {s['vocab']} tokens; "
        f"{r['hf_params'] / 1e6:.1f} M parameters ({weights_mib:.0f} MiB of weights)",
        f"open: tfviz {r['load_s']:.2f} s, transformers {r['hf_load_s']:.2f} s",
        f"resident after opening and one forward: tfviz {mib(r['rss'])}, "
        f"transformers {mib(r['hf_rss'])}",
        "",
        "| tokens | tfviz median / p95 (ms) | transformers median / p95 (ms) "
        "| tfviz / transformers: median, p95, CPU | one trace / hf output (MiB) "
        "| peak growth tfviz / hf (MiB) | kept for the next trace (MiB) | max attn diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in LENGTHS:
        row = r.get(str(n))
        if row is None:
            continue
        ours, theirs = row["tfviz"], row["transformers"]
        lines.append(
            f"| {row['tokens']} | {1e3 * ours[0]:.1f} / {1e3 * ours[1]:.1f} "
            f"| {1e3 * theirs[0]:.1f} / {1e3 * theirs[1]:.1f} "
            f"| {row['ratio_median']:.2f}, {row['ratio_p95']:.2f}, {row['ratio_cpu']:.2f} "
            f"| {row['trace_mib']:.1f} / {row['hf_output_mib']:.1f} "
            f"| +{row['peak_growth_mib']:.0f} / +{row['hf_peak_growth_mib']:.0f} "
            f"| {row['kept_mib']:.0f} "
            f"| {row['attn_max_diff']:.0e} |"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--small", action="store_true", help="GPT-2 at DistilGPT2's 6 layers")
    p.add_argument("--families", default=",".join(FAMILIES), help="gpt2,llama,qwen2")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.calls, args.threads)))
        return
    kinds = [k.strip() for k in args.families.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in FAMILIES]
    if unknown:
        raise SystemExit(f"--families: {unknown} not among {', '.join(FAMILIES)}")
    sizes = dict(SIZES, gpt2=SMALL_GPT2) if args.small else SIZES
    print(
        f"{args.threads} thread(s), {args.calls} timed calls of each per length, by turns; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            folder = Path(tmp) / kind
            start = time.perf_counter()
            build(kind, folder, sizes[kind])
            built_s = time.perf_counter() - start
            child = subprocess.run(
                [sys.executable, "-m", "bench.hf_decoders", "--child", str(folder),
                 "--calls", str(args.calls), "--threads", str(args.threads)],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
            if child.returncode:
                print(f"\n{FAMILIES[kind]}: the child failed\n{child.stderr[-3000:]}")
                continue
            r = json.loads(child.stdout.strip().splitlines()[-1])
            weights = sum(f.stat().st_size for f in folder.glob("*.safetensors")) / 2**20
            r["weights_mib"], r["built_s"] = weights, built_s
            r["as"] = "DistilGPT2" if args.small and kind == "gpt2" else NAMED[kind]
            results[kind] = r
            print("\n".join(table(kind, r, weights)), flush=True)
            for f in folder.iterdir():  # the next family's weights need the disk
                f.unlink()
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    print(json.dumps({"calls": args.calls, "threads": args.threads, "results": results}))


if __name__ == "__main__":
    main()
