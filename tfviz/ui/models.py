"""Which models the picker offers, and each one loaded once per process.

A checkpoint is loaded once (st.cache_resource) and shared by every browser session, so it is
never changed: the W_o switch and head ablation are forward arguments. Everything computed from
a checkpoint is cached under its file's sha256, so an edited file is a new model.

Beside the toy checkpoints the picker offers one pretrained model, all-MiniLM-L6-v2
(tfviz.hf.pretrained), when its package is installed: listed without loading it (it takes about a
second), loaded the first time someone picks it, then shared like a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from tfviz import CheckpointError, get_task, load_checkpoint, settings
from tfviz.hf import pretrained
from tfviz.refusal import cause
from tfviz.serve import heap, jobs
from tfviz.training.checkpoint import CheckpointMeta, file_digest
from tfviz.training.train import resolve_device
from tfviz.ui.i18n import t, why
from tfviz.ui.text import md_escape

ROOT = Path(__file__).resolve().parents[2]  # the app's folder: models/, user_models/
BUNDLED_DIR = ROOT / "models"
DEFAULT_MODEL = "reverse"


# Where a model comes from (ModelEntry.source) -> catalogue key of its name in the picker.
SOURCES = {
    "bundled": "sidebar.source.bundled",
    "pretrained": "sidebar.source.pretrained",
    "yours": "sidebar.source.yours",
    "uploaded": "sidebar.source.uploaded",
}
CLASS_SOURCE = "sidebar.source.class"  # a model in the user models folder that another trained


def source_key(entry: ModelEntry, mine: frozenset[str]) -> str:
    """The catalogue key of where entry comes from, as this session says it: a model in the user
    models folder is "yours" only when this session trained it (mine: tfviz.ui.jobs.trained_here);
    for everyone else it is a class model (the folder is listed for every visitor)."""
    if entry.source == "yours":
        return SOURCES["yours"] if entry.name in mine else CLASS_SOURCE
    return SOURCES.get(entry.source, CLASS_SOURCE)


@dataclass(frozen=True)
class ModelEntry:
    """A checkpoint the picker offers."""

    key: str  # "bundled:reverse", "yours:my_model", "upload:<sha256>", "pretrained:<name>" or
    # "folder:<name>" (a model folder in $TFVIZ_PRETRAINED_DIR)
    name: str
    source: str  # "bundled", "yours", "uploaded", "pretrained" or "folder"
    path: str  # "" for an upload (never written to disk) and for the pretrained model
    digest: str  # sha256 of the file (the pinned package for the pretrained model): cache key
    family: str = ""  # a Hugging Face model's family ("BERT", "RoBERTa", ...), tfviz.ui.folders


@st.cache_data(show_spinner=False, max_entries=1024)
def file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """Digest of a file, recomputed only when its modification time or size changes."""
    return file_digest(path)


# The model folders' listings and loaded models (tfviz.ui.folders), made by their module and kept
# here, where every loaded model is: each is one object shared by every session.
@st.cache_resource(show_spinner=False, max_entries=8)
def shared_listing(key: tuple, _make):
    """_make()'s listing of a folder of model folders, once per key (root, its signature)."""
    return _make()


@st.cache_resource(show_spinner=False, max_entries=8)
def shared_folder_model(key: tuple, _make):
    """_make()'s (model, meta, task) of a model folder, once per key (path, digest, device)."""
    return _make()


@st.cache_resource(show_spinner=False)
def setup_process() -> str:
    """Once per process: torch threads, and the device every model is loaded onto."""
    # torch's thread count is process-wide, so it is set here once, not in the training thread.
    # These models are tiny and run fastest on one thread; then each training job and each page
    # request takes about one core, which is what the jobs-per-core cap assumes.
    jobs.limit_torch_threads(1)
    device = str(resolve_device("auto"))
    # Streamlit runs a full gc.collect() after every script run; with torch and plotly imported
    # that walk was a large share of each keystroke (measured: bench/README.md). Freezing what
    # exists now (the libraries, never garbage) leaves only each run's own objects for it to scan.
    # No collect first: it would delay the first page, the imports leave no cyclic garbage to speak
    # of, and Streamlit's own collect after this run clears what the run leaves. Later imports
    # are frozen at the end of the run that made them (app.py's main_area).
    heap.freeze_new_imports()
    return device


@st.cache_resource(show_spinner=False, max_entries=256)
def load_model(path: str, digest: str, device: str):
    """(model, meta, task) for a checkpoint, as load_pretrained and folders.load_folder give
    theirs, or (None, why it is unusable, None): why is the CheckpointError, worded in each
    session's language by tfviz.ui.i18n.why, or an OSError's (tfviz.refusal.cause).
    Shared: never mutate it."""
    try:
        model, meta = load_checkpoint(path, device=device)
    except CheckpointError as e:
        return None, e.detached(), None
    except OSError as e:
        return None, cause(e), None
    return model, meta, get_task(meta.task)  # the checkpoint's task, checked as it loaded


# The pinned package identifies the pretrained weights: a different file means a reinstall, and
# so a restarted server with empty caches. Hashing its 90 MB would slow every server's first page.
PRETRAINED = ModelEntry(
    f"pretrained:{pretrained.NAME}",
    pretrained.NAME,
    "pretrained",
    "",
    f"pretrained:{pretrained.PIP_REQUIREMENT}",
)


@st.cache_resource(show_spinner=False, max_entries=4)
def load_pretrained(device: str):
    """(model, meta, SentenceTask) of all-MiniLM-L6-v2, or (None, why, None) (why: as
    load_model's). Shared: never mutate it."""
    try:
        model, tokenizer = pretrained.load_minilm(device)
    except pretrained.PretrainedError as e:
        return None, e.detached(), None
    except OSError as e:
        return None, cause(e), None
    record = {"source": pretrained.SOURCE, "licence": pretrained.LICENCE}
    task = pretrained.SentenceTask(tokenizer)
    return model, CheckpointMeta(task=task.name, config=model.config, record=record), task


def pretrained_available() -> pretrained.PretrainedError | None:
    """None when the pretrained model's files are installed, else why it is not offered."""
    try:
        pretrained.model_dir()  # finds the files, loads nothing
    except pretrained.PretrainedError as e:
        return e.detached()
    return None


def bundled_names() -> frozenset[str]:
    """Names a trained model may not take: the bundled ones."""
    return frozenset(p.stem for p in BUNDLED_DIR.glob("*.safetensors"))


def user_models_dir() -> Path:
    """Where trained models are saved and listed from ($TFVIZ_USER_MODELS, else user_models/)."""
    return settings.user_models_dir(ROOT)


def list_models(device: str) -> tuple[list[ModelEntry], list[str]]:
    """Every usable model (bundled first, the pretrained one, then the user models folder) and
    the skipped ones.

    Each checkpoint is loaded (once per process) so that a broken file is left out of the picker
    with a warning instead of failing when picked. The pretrained model is only looked for.
    """
    problems: list[str] = []
    entries = checkpoints_in(BUNDLED_DIR, "bundled", device, problems)
    missing = pretrained_available()
    if missing is None:
        entries.append(PRETRAINED)
    else:
        problems.append(t("minilm.not_offered", name=pretrained.NAME, why=why(missing)))
    entries += checkpoints_in(user_models_dir(), "yours", device, problems)
    return entries, problems


def checkpoints_in(folder: Path, source: str, device: str, problems: list[str]) -> list[ModelEntry]:
    """The usable checkpoints of one folder; each skipped file is added to problems."""
    entries = []
    if not folder.is_dir():
        return entries
    for path in sorted(folder.glob("*.safetensors")):
        try:
            stat = path.stat()
            digest = file_sha256(str(path), stat.st_mtime_ns, stat.st_size)
        except OSError as e:
            problems.append(t("sequence.model_skipped", name=md_escape(path.name), why=why(e)))
            continue
        model, meta, _ = load_model(str(path), digest, device)
        if model is None:
            problems.append(t("sequence.model_skipped", name=md_escape(path.name), why=why(meta)))
            continue
        entries.append(ModelEntry(f"{source}:{path.stem}", path.stem, source, str(path), digest))
    return entries
