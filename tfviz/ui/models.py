"""Which checkpoints the picker offers, and each one loaded once per process.

A checkpoint is loaded once (st.cache_resource) and shared by every browser session, so it is
never changed: the W_o switch and head ablation are forward arguments. Everything computed from
a checkpoint is cached under its file's sha256, so an edited file is a new model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from tfviz import CheckpointError, load_checkpoint, settings
from tfviz.checkpoint import file_digest

ROOT = Path(__file__).resolve().parents[2]  # the app's folder: models/, user_models/
BUNDLED_DIR = ROOT / "models"
DEFAULT_MODEL = "reverse"


@dataclass(frozen=True)
class ModelEntry:
    """A checkpoint the picker offers."""

    key: str  # "bundled:reverse", "yours:my_model" or "upload:<sha256>", unique in the picker
    name: str
    source: str  # "bundled", "yours" or "uploaded"
    path: str  # "" for an upload: it is never written to disk
    digest: str  # sha256 of the file: the cache key of everything computed from it


@st.cache_data(show_spinner=False, max_entries=1024)
def file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """Digest of a file, recomputed only when its modification time or size changes."""
    return file_digest(path)


@st.cache_resource(show_spinner=False, max_entries=256)
def load_model(path: str, digest: str, device: str):
    """(model, meta) for a checkpoint, or (None, why it is unusable). Shared: never mutate it."""
    try:
        return load_checkpoint(path, device=device)
    except (CheckpointError, OSError) as e:
        return None, str(e)


def bundled_names() -> frozenset[str]:
    """Names a trained model may not take: the bundled ones."""
    return frozenset(p.stem for p in BUNDLED_DIR.glob("*.safetensors"))


def user_models_dir() -> Path:
    """Where trained models are saved and listed from ($TFVIZ_USER_MODELS, else user_models/)."""
    return settings.user_models_dir(ROOT)


def list_models(device: str) -> tuple[list[ModelEntry], list[str]]:
    """Every usable checkpoint (bundled first, then the user models folder) and the skipped ones.

    Each is loaded (once per process) so that a broken file is left out of the picker with a
    warning instead of failing when picked.
    """
    entries, problems = [], []
    for folder, source in ((BUNDLED_DIR, "bundled"), (user_models_dir(), "yours")):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.safetensors")):
            try:
                stat = path.stat()
                digest = file_sha256(str(path), stat.st_mtime_ns, stat.st_size)
            except OSError as e:
                problems.append(f"skipped {path.name}: {e.strerror}")
                continue
            model, meta = load_model(str(path), digest, device)
            if model is None:
                problems.append(f"skipped {path.name}: {meta}")
                continue
            entries.append(
                ModelEntry(f"{source}:{path.stem}", path.stem, source, str(path), digest)
            )
    return entries, problems
