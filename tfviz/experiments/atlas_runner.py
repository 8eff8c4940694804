"""A sweep started from the app: the atlas's CLI in a process of its own, never in the server's.

The server starts `python -m tfviz.cli.atlas run --cells ... --workers 1` (its own LocalCluster
of one worker, one torch thread) in a new process group and polls the rows it writes; a classroom
server runs at most `limit` such sweeps at once, so a class cannot fill its cores with them. No
Dask cluster is ever started inside the Streamlit process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tfviz.experiments import atlas
from tfviz.experiments.atlas_store import read_rows

ROOT = Path(__file__).resolve().parents[2]


class Busy(RuntimeError):
    """Every slot for app-started sweeps is taken."""


@dataclass
class Sweep:
    """One app-started sweep: its process, its rows' file and how many runs it plans."""

    owner: str  # the session that started it
    cell: str
    seeds: int
    out: Path
    runs: int
    process: subprocess.Popen

    def rows(self) -> dict[str, dict]:
        return read_rows(self.out)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def failed(self) -> bool:
        """Ended with an error before writing every row."""
        return not self.running and self.process.returncode != 0 and len(self.rows()) < self.runs


class Runner:
    """Starts and stops app-started sweeps, at most `limit` at once across every session."""

    def __init__(self, limit: int = 1, budget: int | None = None):
        self.limit = limit
        self.budget = budget  # steps per run; None: each task's recipe (tests set a few)
        self._lock = threading.Lock()
        self._sweeps: dict[str, Sweep] = {}

    def start(self, owner: str, cell: str, seeds: int, out: Path) -> Sweep:
        """A new sweep of one cell for owner (replacing its ended one). Busy if every slot is
        taken; ValueError for a bad cell or seed count, before anything starts."""
        runs = len(atlas.plan_cells([atlas.Cell.from_key(cell)], seeds))
        with self._lock:
            mine = self._sweeps.get(owner)
            if mine is not None and mine.running:
                raise Busy("this session's sweep is still running")
            if sum(s.running for s in self._sweeps.values()) >= self.limit:
                raise Busy("every slot for sweeps on this server is taken")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.unlink(missing_ok=True)  # a new sweep of this session starts from nothing
            cmd = [sys.executable, "-m", "tfviz.cli.atlas", "run", "--cells", cell]
            cmd += ["--seeds", str(seeds), "--out", str(out), "--workers", "1"]
            if self.budget is not None:
                cmd += ["--budget", str(self.budget)]
            with open(out.with_suffix(".log"), "wb") as log:
                process = subprocess.Popen(
                    cmd,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: stop() reaches its workers too
                )
            sweep = Sweep(owner, cell, seeds, out, runs, process)
            self._sweeps[owner] = sweep
            return sweep

    def of(self, owner: str) -> Sweep | None:
        with self._lock:
            return self._sweeps.get(owner)

    def stop(self, owner: str, timeout: float = 10.0) -> None:
        """Stop owner's sweep: SIGTERM (the CLI closes its cluster), then SIGKILL to the group."""
        sweep = self.of(owner)
        if sweep is None or not sweep.running:
            return
        try:
            os.killpg(sweep.process.pid, signal.SIGTERM)
            sweep.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
        try:
            os.killpg(sweep.process.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
        sweep.process.wait(timeout)
