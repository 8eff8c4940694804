"""A class's first training: every task trained with the Train tab's defaults, through the app's
own job (tfviz.serve.work.TrainWork: training, the timeline's snapshots, the evaluation on fresh
examples and the save), on several seeds; prints the metric reached and the seconds taken.

Targets (the first-hour issue): reverse and sort >= 95% token accuracy; every other task the
bundled model's level less 5 points (sum: MAE <= 0.5, the bundled target), on 3 seeds; each run
under 30 s on one core of the project's 2-core machine.

Usage: python -m bench.train_defaults [--seeds 0 1 2] [--tasks reverse sort ...] [--steps N]
(--steps overrides every task's default, to look at fewer steps than the default.)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from tfviz import list_tasks
from tfviz.core.tasks import get_task
from tfviz.serve import jobs, work
from tfviz.training.recipes import LEARNED, class_recipe, learned

LIMIT_S = 30.0


def run(task: str, seed: int, folder: Path, steps: int | None) -> tuple[float, float]:
    """(metric value, seconds) of one training with the defaults, run as the app runs it."""
    spec = work.JobSpec(task=task, name=f"{task}_{seed}", seed=seed, steps=steps)
    manager = jobs.JobManager(max_jobs=1, max_queue=0)
    job = manager.submit(work.TrainWork(spec, folder, device="cpu"))
    if not job.wait(600):
        raise RuntimeError(f"{task} seed {seed} did not finish in 10 minutes")
    snap = job.state()
    if snap.status != jobs.DONE:
        raise RuntimeError(f"{task} seed {seed}: {snap.status}: {snap.message}")
    return snap.result.metrics[get_task(task).metric], snap.seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.train_defaults")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--tasks", nargs="+", default=list_tasks(), choices=list_tasks())
    p.add_argument("--steps", type=int, default=None)
    args = p.parse_args(argv)
    jobs.limit_torch_threads(1)  # as the app: one core a job
    failed = 0
    print("task          metric           bound   steps  lr      per seed (value / seconds)")
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            recipe, metric = class_recipe(task), get_task(task).metric
            results = [run(task, seed, Path(tmp), args.steps) for seed in args.seeds]
            ok = all(learned(task, metric, v) and s < LIMIT_S for v, s in results)
            failed += not ok
            shown = "  ".join(f"{v:.4f}/{s:.1f}s" for v, s in results)
            print(
                f"{task:13s} {metric:16s} {LEARNED[task]:<7g} {args.steps or recipe.steps:<6d} "
                f"{recipe.lr:<7g} {shown}  {'ok' if ok else 'MISSED'}",
                flush=True,
            )
    print(f"{len(args.tasks) - failed} of {len(args.tasks)} tasks reached their level in < 30 s")
    return 0


if __name__ == "__main__":
    torch.manual_seed(0)
    raise SystemExit(main())
