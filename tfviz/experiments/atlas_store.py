"""The atlas's rows on disk: one JSON line per finished run, keyed by its RunSpec.key.

Lossless and resumable: a row is appended and flushed to disk (fsync) the moment its run
finishes, so a sweep killed at any point loses only the runs in flight; a line torn by a kill in
mid-write is skipped on reading (and its run done again). Reading keeps the first row of a key, so
a run is counted once even if two sweeps wrote it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tfviz.experiments.atlas_cells import FORMAT

BUNDLED = Path(__file__).resolve().parents[2] / "models" / "atlas" / "runs.jsonl"
LANGUAGE = BUNDLED.with_name("language.jsonl")  # the language atlas's rows (LANGUAGE_FORMAT)
# One cell of it run again at another learning rate (how much the recipe decides): its own file.
LANGUAGE_LR = BUNDLED.with_name("language_lr.jsonl")
# The toy atlas's cells that did not train within their recipe's steps, given a longer budget
# (tfviz.cli.atlas run --untrained ... --budget N): rows as BUNDLED's, keyed with /bN.
LONGER = BUNDLED.with_name("longer.jsonl")


def read_rows(path: str | Path, fmt: str = FORMAT) -> dict[str, dict]:
    """Every whole row of format fmt in the file, by key (first one wins); {} if there is no
    file."""
    path = Path(path)
    rows: dict[str, dict] = {}
    if not path.is_file():
        return rows
    with path.open("rb") as f:
        for line in f:
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                continue  # a line torn by a kill, or not ours: its run is simply not done
            if isinstance(row, dict) and row.get("format") == fmt and "key" in row:
                rows.setdefault(str(row["key"]), row)
    return rows


class RowWriter:
    """Appends rows to a JSON-lines file, each on disk before append returns."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = self.path.open("ab")
        # A file that ends mid-line (a torn write) gets a newline first, so the next row is whole.
        if self._f.tell() > 0:
            with self.path.open("rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    self._f.write(b"\n")

    def append(self, row: dict) -> None:
        self._f.write(json.dumps(row, allow_nan=False, sort_keys=True).encode() + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def made_path(rows: str | Path) -> Path:
    """The file beside a rows file that says what made its rows (note_made)."""
    rows = Path(rows)
    return rows.with_name(rows.stem + ".made.json")


def read_made(rows: str | Path) -> list[dict]:
    """What made the rows: one entry per sweep started on them (note_made); [] if none noted."""
    try:
        made = json.loads(made_path(rows).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return made if isinstance(made, list) else []


def note_made(rows: str | Path, commit: str, torch_version: str) -> None:
    """Add (commit, torch) to the rows' record unless already there: a resumed sweep's rows may
    come from several commits, and the README names each."""
    made = read_made(rows)
    entry = {"commit": commit, "torch": torch_version}
    if entry not in made:
        path = made_path(rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([*made, entry], indent=1) + "\n", encoding="utf-8")


def made_by(made: list[dict]) -> str:
    """Which commit and torch made the rows (note_made)."""
    if not made:
        return "Made by: not recorded."
    said = [
        f"commit {m['commit']} with torch {m['torch']}" + (f" ({m['note']})" if "note" in m else "")
        for m in made
    ]
    return "Made by: " + "; ".join(said) + "."
