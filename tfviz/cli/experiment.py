"""The experiment's command line: `python -m tfviz.cli.experiment`, as README.md and bench/README.md
document it.

`--task sum --seeds 5 [--steps N] [--out FILE]` prints the table and the verdict; `--all`
recomputes models/experiments/<task>.json for every task and models/experiments/README.md;
`--against block_diagonal --add` trains only the block-diagonal runs and adds them to the files;
`--readme` only rewrites the README from the JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from tfviz.core.tasks import get_task, list_tasks
from tfviz.experiments import experiment
from tfviz.experiments.experiment import (
    AGAINST,
    DEFAULTS,
    EXPERIMENTS,
    ExperimentResult,
    Progress,
    default_path,
    run_experiment,
)
from tfviz.experiments.experiment_report import format_table, verdict, write_readme


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tfviz.cli.experiment", description=experiment.__doc__.split("\n")[0]
    )
    p.add_argument("--task", help="task name: " + ", ".join(list_tasks()))
    p.add_argument("--all", action="store_true", help="every task, into models/experiments/")
    p.add_argument("--readme", action="store_true", help="only rewrite the README from the JSON")
    p.add_argument("--seeds", type=int, default=DEFAULTS["seeds"])
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    p.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    p.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    p.add_argument("--eval-n", type=int, default=DEFAULTS["eval_n"])
    for key, value in DEFAULTS["sizes"].items():
        p.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    p.add_argument(
        "--against",
        nargs="+",
        choices=AGAINST,
        default=["identity"],
        help="what the learned W_o is compared with (default identity: W_o off)",
    )
    p.add_argument(
        "--add",
        action="store_true",
        help="train only the --against runs and add them to the existing result file",
    )
    p.add_argument("--out", type=Path, help="write the result JSON here")
    p.add_argument("--folder", type=Path, default=EXPERIMENTS, help="folder for --all/--readme")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: see below)"
    )
    args = p.parse_args(argv)
    # These models are tiny: a second thread buys little, and on a shared 2-core machine torch's
    # spinning worker threads made a run several times slower in CPU time. The library leaves
    # this alone.
    torch.set_num_threads(max(1, args.threads))
    if args.readme:
        print(write_readme(args.folder))
        return 0
    if not args.all and not args.task:
        p.error("give --task NAME, --all or --readme")
    try:
        tasks = list_tasks() if args.all else [get_task(args.task).name]
    except ValueError as e:
        p.error(str(e))
    conditions = tuple(args.against) if args.add else ("learned", *args.against)
    kwargs = dict(
        conditions=conditions,
        seeds=args.seeds,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_n=args.eval_n,
        **{key: getattr(args, key) for key in DEFAULTS["sizes"]},
    )
    for name in tasks:
        out = default_path(name, args.folder) if args.all else args.out
        if args.add and (out is None or not out.is_file()):
            p.error(f"--add needs an existing result to add to; {out} is not one")
        began = time.perf_counter()
        result = _run_with_bar(name, kwargs, args.quiet)
        seconds = time.perf_counter() - began
        if args.add:
            result = ExperimentResult.load(out).merged(result)
        print(f"\n## {name} ({seconds:.1f} s wall, {len(conditions)} conditions)", flush=True)
        for against in result.against:
            print(f"\n{format_table(result, against)}\n\n{verdict(result, against)}", flush=True)
        if out is not None:
            result.save(out)
            print(f"-> {out}", flush=True)
    if args.all:
        print(write_readme(args.folder))
    return 0


def _run_with_bar(name: str, kwargs: dict, quiet: bool) -> ExperimentResult:
    from tqdm import tqdm

    seeds, conditions = kwargs["seeds"], kwargs["conditions"]
    total = (seeds if isinstance(seeds, int) else len(seeds)) * len(conditions) * kwargs["steps"]
    bar = tqdm(total=total, desc=name, file=sys.stderr, disable=quiet, dynamic_ncols=True)

    def show(p: Progress) -> None:
        bar.update(1)
        if p.step == p.steps:
            bar.set_postfix(run=f"{p.run}/{p.runs}", loss=f"{p.loss:.4f}")

    try:
        return run_experiment(name, on_progress=show, **kwargs)
    finally:
        bar.close()


if __name__ == "__main__":
    raise SystemExit(main())
