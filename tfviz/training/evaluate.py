"""Measure a model on fresh examples: `python -m tfviz.training.evaluate PATH`."""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from tfviz.core import modes
from tfviz.core.tasks import Task, get_task

EVAL_SEED = 2_000_003  # far from every training seed, so evaluation data are fresh


@torch.no_grad()
def evaluate(
    model,
    task: Task | str,
    n: int = 2000,
    seed: int = EVAL_SEED,
    min_len: int | None = None,
    max_len: int | None = None,
    batch_size: int = 500,
    **switches,
) -> dict[str, float]:
    """Metrics of a model on n fresh examples, lengths uniform in [min_len, max_len].

    Returns {"accuracy"} for classification, {"token_accuracy", "sequence_accuracy"} for token
    tasks, {"mae"} (in the task's own units) for regression, plus "n" and the length range.
    Switches (w_o, ablate_heads) are passed to the forward pass.
    """
    task = get_task(task) if isinstance(task, str) else task
    rng = np.random.default_rng(seed)
    totals: dict[str, float] = {}
    for start in range(0, n, batch_size):
        batch = task.sample(min(batch_size, n - start), rng, min_len, max_len)
        logits = model(
            batch.ids.to(model.device), batch.pad_mask.to(model.device), trace=False, **switches
        ).logits.cpu()
        for key, value in task.score(logits, batch.target).items():
            totals[key] = totals.get(key, 0) + value
    out: dict[str, float] = {
        "n": n,
        "min_len": task.min_len if min_len is None else min_len,
        "max_len": task.max_len if max_len is None else max_len,
    }
    if task.kind == "token":
        out["token_accuracy"] = totals["correct"] / totals["count"]
        out["sequence_accuracy"] = totals["seq_correct"] / totals["seqs"]
    elif task.kind == "classify":
        out["accuracy"] = totals["correct"] / totals["count"]
    else:
        out["mae"] = totals["abs_err"] / totals["count"]
    return out


def main(argv: list[str] | None = None) -> int:
    from tfviz.training.checkpoint import load_checkpoint

    p = argparse.ArgumentParser(prog="python -m tfviz.training.evaluate", description=__doc__)
    p.add_argument("path")
    p.add_argument("-n", type=int, default=2000)
    p.add_argument("--min-len", type=int)
    p.add_argument("--max-len", type=int)
    p.add_argument("--w-o", default=modes.LEARNED, choices=modes.SWITCH)
    args = p.parse_args(argv)
    model, meta = load_checkpoint(args.path)
    result = evaluate(
        model, meta.task, n=args.n, min_len=args.min_len, max_len=args.max_len, w_o=args.w_o
    )
    print(json.dumps({"task": meta.task, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
