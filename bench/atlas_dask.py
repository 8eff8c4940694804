"""The atlas sweep on Dask against the same runs without it, in one run of this script.

    python -m bench.atlas_dask [--runs 8] [--budget 200] [--language]

Times N real atlas runs (reverse, one layer without FFN, 4 heads, D=64, seeds 0..N-1, a fixed
budget of steps, which they never stop before) three ways: one after another in this process
with no Dask (the reference), on a LocalCluster of 1 worker, and on one of 2 workers (one
thread each, as tfviz.cli.atlas.local_cluster starts them). Each process is warmed by one tiny
run first (importing torch and tfviz is paid once per worker and sweep, as the cluster's start
is). Prints:
- runs per minute with 2 workers / with 1 (target >= 1.8 on 2 idle cores);
- Dask's overhead per run: (1 worker's wall time - the reference's) / N, as a share of a run
  (target <= 5%); the cluster's start is printed apart, as it is paid once per sweep;
- whether every row from Dask equals the reference's row, all but its "seconds" (target: yes).
With --language the runs are the language atlas's (tfviz.experiments.language_atlas.run_language:
a character model of the bundled corpus, attention only, 2 layers, 4 heads, D 64, the learned
arm, seeds 0..N-1, --budget steps each; default 300).
Run it on an idle machine: a sweep running beside it takes the cores it measures.
"""

from __future__ import annotations

import argparse
import os
import time

# The reference runs as a worker does: tfviz.cli.atlas.local_cluster starts its workers with one
# OpenMP thread, which alone made a run ~13% faster than torch.set_num_threads(1) after import.
os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

from tfviz.cli.atlas import local_cluster  # noqa: E402
from tfviz.experiments import atlas  # noqa: E402 (after the environment torch reads at import)


def language_specs(n: int, budget: int) -> list[dict]:
    from tfviz.experiments import language_atlas as la

    cell = la.LanguageCell(2, False, 4, 64)
    return [la.LanguageRunSpec(cell, "learned", seed, budget).to_dict() for seed in range(n)]


def warm_language() -> None:
    """As warm, for the language atlas: the corpus read and torch's first calls, once a process."""
    from tfviz.experiments import language_atlas as la

    la.run_language(la.LanguageRunSpec(la.LanguageCell(2, False, 2, 16), "learned", 0, 2).to_dict())


def specs(n: int, budget: int) -> list[dict]:
    # Reverse with one layer and no FFN never reaches its target (the atlas's own finding), so
    # every run makes all its steps with the real run_one, checks of the target included.
    cell = atlas.Cell("reverse", n_layers=1, ffn=False, n_heads=4, d_model=64)
    return [atlas.RunSpec(cell, "learned", seed, budget).to_dict() for seed in range(n)]


def warm() -> None:
    """One tiny run: imports and torch's first-call costs, paid once per process and sweep."""
    atlas.run_one(atlas.RunSpec(atlas.Cell("sort", 1, False, 2, 16), "learned", 0, 2).to_dict())


def on_dask(todo: list[dict], workers: int, run, warm) -> tuple[list[dict], float, float]:
    """Rows (in todo's order), the cluster's start time and the runs' wall time."""
    from dask.distributed import Client

    began = time.perf_counter()
    with local_cluster(workers) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        client.run(warm)  # each worker imports torch and tfviz and runs once, as the reference did
        started = time.perf_counter()
        futures = [client.submit(run, s, pure=False) for s in todo]
        rows = client.gather(futures)
        wall = time.perf_counter() - started
    return rows, started - began, wall


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--budget", type=int, help="steps a run (default 200; 300 with --language)")
    p.add_argument("--language", action="store_true", help="the language atlas's runs")
    args = p.parse_args()
    if args.language:
        from tfviz.experiments.language_atlas import run_language as run

        args.budget = args.budget or 300
        todo, warm_up = language_specs(args.runs, args.budget), warm_language
        what = "language, L2, attention only, H4, D64"
    else:
        run, warm_up = atlas.run_one, warm
        args.budget = args.budget or 200
        todo = specs(args.runs, args.budget)
        what = "reverse, L1, no FFN, H4, D64"

    warm_up()
    start = time.perf_counter()
    reference = [run(s) for s in todo]
    direct = time.perf_counter() - start
    if not args.language:
        assert all(r["steps_to_target"] is None for r in reference), "a run stopped early"

    rows1, start1, wall1 = on_dask(todo, 1, run, warm_up)
    rows2, start2, wall2 = on_dask(todo, 2, run, warm_up)

    def same(rows):
        drop = "seconds"
        return all(
            {k: v for k, v in a.items() if k != drop} == {k: v for k, v in b.items() if k != drop}
            for a, b in zip(rows, reference, strict=True)
        )

    per_run = direct / args.runs
    overhead = (wall1 - direct) / args.runs
    print(f"{args.runs} runs of {args.budget} steps ({what}), one thread each")
    print(f"no Dask, one after another: {direct:.1f} s ({per_run:.2f} s a run)")
    print(f"LocalCluster, 1 worker: {wall1:.1f} s (+ {start1:.1f} s to start the cluster)")
    print(f"LocalCluster, 2 workers: {wall2:.1f} s (+ {start2:.1f} s to start the cluster)")
    print(f"runs per minute, 2 workers / 1 worker: {wall1 / wall2:.2f} (target >= 1.8)")
    print(
        f"Dask's overhead per run: {overhead * 1000:.0f} ms = {overhead / per_run:+.1%} of a run "
        f"(target <= 5%)"
    )
    print(
        f"rows equal to the runs without Dask (all but seconds): 1 worker {same(rows1)}, "
        f"2 workers {same(rows2)}"
    )


if __name__ == "__main__":  # LocalCluster's worker processes import this module: keep the guard
    main()
