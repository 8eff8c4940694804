"""A sweep of one atlas cell started from the app: the command it runs and the runs it plans.

The sweep is a kind of job under the server's one job manager (tfviz.serve.work.AtlasSweep): it
runs `python -m tfviz.cli.atlas run --cells CELL --seeds N --out FILE --workers 1` in a process
of its own (its own LocalCluster of one worker, torch on one thread) and reads the rows it writes
(tfviz.experiments.atlas_store.read_rows). No Dask cluster is ever started inside the Streamlit
process. This module builds the command and counts the runs; it starts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tfviz.experiments import atlas

ROOT = Path(__file__).resolve().parents[2]  # where the command runs: `-m tfviz...` finds tfviz
# The command's own process keeps torch to one thread too (its workers do: cli.atlas.local_cluster)
CHILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def planned_runs(cell: str, seeds: int) -> int:
    """The runs a sweep of the cell plans (every arm, seed by seed); ValueError for a key that
    names no atlas cell or a seed count that is not a positive whole number."""
    return len(atlas.plan_cells([atlas.Cell.from_key(cell)], seeds))


def sweep_command(cell: str, seeds: int, out: Path, budget: int | None = None) -> list[str]:
    """The atlas command line that sweeps one cell into out, on one worker; budget: steps a run
    (None: each task's recipe, as the bundled atlas)."""
    cmd = [sys.executable, "-m", "tfviz.cli.atlas", "run", "--cells", cell]
    cmd += ["--seeds", str(seeds), "--out", str(out), "--workers", "1"]
    if budget is not None:
        cmd += ["--budget", str(budget)]
    return cmd
