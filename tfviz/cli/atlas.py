"""The W_o atlas's command line: `python -m tfviz.cli.atlas run`, on Dask distributed.

    python -m tfviz.cli.atlas run [--grid core|full] [--seeds 5] [--tasks sort reverse]
                                  [--cells sort/L1/noffn/H4/D64/post ...] [--budget STEPS]
                                  [--out models/atlas/runs.jsonl] [--workers N]
                                  [--scheduler tcp://host:8786] [--plan]
    python -m tfviz.cli.atlas run --untrained [partly|never] --budget 3000 [--arms learned]
    python -m tfviz.cli.atlas run --language [--seeds 5] [--cells language/L2/noffn/H4/D64 ...]
                                  [--budget STEPS] [--out models/atlas/language.jsonl] ...

Each run of the plan (tfviz.experiments.atlas.plan) not already in --out is submitted to Dask as
tfviz.experiments.atlas.run_one; each finished row is appended to --out at once
(tfviz.experiments.atlas_store). Without --scheduler a LocalCluster is started here, one worker per
core with one thread each (torch set to one thread in every run), and closed when the sweep ends or
is stopped. With --scheduler the same code runs on that cluster (its workers need tfviz installed).
A worker that dies is replaced (the LocalCluster's nanny starts a new one) and Dask runs its tasks
again elsewhere; a killed sweep loses only the runs in flight, and running the same command again
continues from --out. `--plan` prints the number of runs still to do and an estimate of the time,
and starts nothing. `python -m tfviz.cli.atlas report` writes models/atlas/README.md from the rows
(tfviz.experiments.atlas_report). `--language` runs the language atlas instead
(tfviz.experiments.language_atlas.run_language: every cell and arm on the bundled corpus, a fixed
budget of steps) into models/atlas/language.jsonl, the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from tfviz.experiments import atlas
from tfviz.experiments.atlas_cells import FORMAT, LANGUAGE_FORMAT
from tfviz.experiments.atlas_store import BUNDLED, LANGUAGE, RowWriter, note_made, read_rows


def todo(specs: list, out: Path, fmt: str = FORMAT) -> list:
    """The specs (RunSpec or LanguageRunSpec) whose rows of format fmt are not in out yet (once
    each, in plan order)."""
    done = read_rows(out, fmt)
    seen: set[str] = set()
    left = []
    for spec in specs:
        if spec.key not in done and spec.key not in seen:
            seen.add(spec.key)
            left.append(spec)
    return left


# The code a row depends on: a change elsewhere (the app's pages) does not change what runs make.
ROW_CODE = ("tfviz/core", "tfviz/training", "tfviz/experiments", "tfviz/analysis")


def _commit() -> str:
    """The checkout's commit (with "+changes" if the code rows depend on differs from it): what
    the rows were made by, for the README. "unknown" outside a git checkout."""
    import subprocess

    here = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", *ROW_CODE],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")  # fmt: skip


def _torch_version() -> str:
    import torch

    return torch.__version__


def local_cluster(workers: int):
    """The LocalCluster a sweep runs on: one process a worker, one thread each."""
    import dask
    from dask.distributed import LocalCluster

    # Dask's nanny starts each worker with MALLOC_TRIM_THRESHOLD_=65536, which turns off glibc's
    # adaptive mmap threshold: every activation tensor of a run (~0.5 MB) is then mmapped and
    # unmapped afresh, and a run took longer than outside Dask (bench/atlas_dask.py). None
    # unsets it. The profiler's 10 ms stack samples are not needed here either.
    dask.config.set(
        {
            "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
            "distributed.worker.profile.enabled": False,
            # A run holds the GIL in a Python loop: the worker's own 20 ms ticks and 100 ms memory
            # checks take it from the run's thread many times a second. A sweep needs neither.
            "distributed.admin.tick.interval": "500ms",
            "distributed.worker.memory.monitor-interval": "2s",
            "distributed.admin.system-monitor.interval": "2s",
        }
    )
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        # Torch in each worker keeps to one thread (run_one sets it too): two processes of two
        # threads each on two cores collapse throughput.
        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )


def sweep(
    specs: list[atlas.RunSpec],
    out: Path,
    workers: int | None = None,
    scheduler: str | None = None,
    echo=print,
    language: bool = False,
) -> int:
    """Run the specs not yet in out on Dask, appending each row as it comes. Returns rows written.

    A LocalCluster (workers processes, one thread each) unless a scheduler address is given.
    language: the specs are the language atlas's (run by language_atlas.run_language).
    """
    from dask.distributed import Client, as_completed

    if language:
        from tfviz.experiments.language_atlas import run_language as run
    else:
        run = atlas.run_one
    left = todo(specs, out, LANGUAGE_FORMAT if language else FORMAT)
    if not left:
        echo("nothing to do: every run of the plan is in " + str(out))
        return 0
    note_made(out, _commit(), _torch_version())
    cluster = None if scheduler is not None else local_cluster(workers or os.cpu_count() or 1)
    written = 0
    try:
        with Client(cluster if cluster is not None else scheduler) as client, RowWriter(out) as w:
            futures = [
                # pure=False: a run is never merged with another; retries: a failure in the run
                # itself is tried again (a dead worker's tasks are moved by Dask on its own).
                client.submit(run, s.to_dict(), key=f"atlas-{s.key}", retries=2)
                for s in left
            ]
            start = time.perf_counter()
            for future in as_completed(futures):
                try:
                    row = future.result()
                except Exception as e:  # noqa: BLE001 - one failed run must not end the sweep
                    echo(f"run {future.key} failed: {e!r}")
                    continue
                w.append(row)
                written += 1
                rate = written / (time.perf_counter() - start) * 60
                echo(f"{written}/{len(left)} {row['key']} ({row['seconds']:.1f} s; {rate:.1f}/min)")
                future.release()
    finally:
        if cluster is not None:
            cluster.close()
    return written


def duration(seconds: float) -> str:
    """Seconds as the plan says them: whole seconds under two minutes, whole minutes under an
    hour, hours to a tenth above."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "report":
        from tfviz.experiments import atlas_report

        print(atlas_report.write(args.rows.parent / "README.md", args.rows))
        return 0

    if args.language:
        return _language(args)
    args.out = args.out or BUNDLED
    try:
        specs = _toy_specs(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    left = todo(specs, args.out)
    if args.plan:
        cores = args.workers or os.cpu_count() or 1
        seconds = atlas.estimate_seconds(left)
        where = "the chosen cells" if args.cells else f"the {args.grid} grid"
        print(
            f"{len(specs)} runs in {where} ({len({s.cell for s in specs})} cells, {args.seeds} "
            f"seeds); {len(specs) - len(left)} done in {args.out}, {len(left)} to run: about "
            f"{duration(seconds)} of one core, {duration(seconds / cores)} on {cores} workers "
            f"(runs that reach their target stop early)"
        )
        return 0
    return _sweep(specs, args)


def _parser() -> argparse.ArgumentParser:
    """The command line: `run` (the sweep or its plan) and `report`."""
    p = argparse.ArgumentParser(prog="python -m tfviz.cli.atlas", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the sweep (or print its plan)")
    r.add_argument("--grid", choices=tuple(atlas.GRIDS), default="core")
    r.add_argument(
        "--language",
        action="store_true",
        help="the language atlas (cells as language/L2/noffn/H4/D64; rows in language.jsonl)",
    )
    r.add_argument("--seeds", type=int, default=5)
    r.add_argument("--tasks", nargs="+", choices=tuple(atlas.ATLAS_TASKS))
    r.add_argument(
        "--cells",
        nargs="+",
        metavar="KEY",
        help="only these cells (keys as sort/L1/noffn/H4/D64/post)",
    )
    r.add_argument("--budget", type=int, help="steps per run (default: each task's recipe)")
    r.add_argument(
        "--untrained",
        nargs="?",
        const="all",
        choices=("all", "partly", "never"),
        help="only the cells whose learned arm missed its target in some seed of the bundled rows "
        "(partly: reached it in some seeds; never: in none)",
    )
    r.add_argument("--arms", nargs="+", choices=atlas.ARMS, help="only these arms")
    r.add_argument("--out", type=Path, help="rows file (default: the bundled one)")
    r.add_argument("--workers", type=int, help="LocalCluster workers (default: one per core)")
    r.add_argument("--scheduler", help="address of a running Dask scheduler, tcp://host:8786")
    r.add_argument("--plan", action="store_true", help="print the runs left and an estimate")
    rep = sub.add_parser("report", help="write models/atlas/README.md from the rows")
    rep.add_argument("--rows", type=Path, default=BUNDLED)
    return p


def _toy_specs(args) -> list:
    """`run`'s runs of the toy atlas: the untrained cells, the chosen cells or a grid's, at the
    budget and in the arms asked for; ValueError for a cell or task that does not exist."""
    if args.untrained:
        from tfviz.experiments import atlas_stats

        results = atlas_stats.analyse(read_rows(BUNDLED))
        untrained = [
            r.cell
            for r in results.values()
            if not r.trained
            and {"all": True, "partly": r.learned_reached > 0, "never": r.learned_reached == 0}[
                args.untrained
            ]
        ]
        specs = atlas.plan_cells(untrained, args.seeds)
    elif args.cells:
        specs = atlas.plan_cells([atlas.Cell.from_key(k) for k in args.cells], args.seeds)
    else:
        specs = atlas.plan(args.grid, args.seeds, tuple(args.tasks) if args.tasks else None)
    if args.budget is not None:
        specs = [atlas.RunSpec(s.cell, s.arm, s.seed, args.budget) for s in specs]
    if args.arms:
        specs = [s for s in specs if s.arm in args.arms]
    return specs


def _sweep(specs: list, args, language: bool = False) -> int:
    # A polite kill (SIGTERM) stops the sweep as Ctrl-C does: the cluster is closed, no worker
    # is left behind, and every finished row is already on disk.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        written = sweep(specs, args.out, args.workers, args.scheduler, language=language)
    except KeyboardInterrupt:
        print(f"stopped; finished rows are in {args.out}: run the same command to continue")
        return 130
    print(f"{written} rows written to {args.out}")
    return 0


def _language(args) -> int:
    """`run --language`: the language atlas's plan, or its sweep."""
    from tfviz.experiments import language_atlas
    from tfviz.experiments.atlas_cells import LanguageCell

    args.out = args.out or LANGUAGE
    try:
        chosen = [LanguageCell.from_key(k) for k in args.cells] if args.cells else None
        steps = language_atlas.STEPS if args.budget is None else args.budget
        specs = language_atlas.plan(args.seeds, chosen, steps)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.plan:
        left = todo(specs, args.out, LANGUAGE_FORMAT)
        cores = args.workers or os.cpu_count() or 1
        seconds = language_atlas.estimate_seconds(left)
        print(
            f"{len(specs)} runs of the language atlas ({len({s.cell for s in specs})} cells, "
            f"{args.seeds} seeds, {steps} steps each); {len(specs) - len(left)} done in "
            f"{args.out}, {len(left)} to run: about {duration(seconds)} of one core, "
            f"{duration(seconds / cores)} on {cores} workers"
        )
        return 0
    return _sweep(specs, args, language=True)


if __name__ == "__main__":  # the guard a LocalCluster's worker processes need
    raise SystemExit(main())
