"""Pretrained encoders in the Hugging Face layout (tfviz.hf): the server's folder of model folders
($TFVIZ_PRETRAINED_DIR) and zipped model folders uploaded in one session.

The server's folder is listed from config.json and each safetensors header only (hf.list_folder),
so the picker shows every model without loading one; an unusable folder is named once, with the
library's reason. A model is loaded the first time someone picks it and then shared by every
session, like MiniLM: it is never changed (the W_o switch and head ablation are forward
arguments). The bundled language models (models/language/) and those trained in the Train tab
(folders of the user models folder, tfviz.serve.work.LanguageWork) are listed the same way, for
every server. A zipped folder uploaded by a student is opened by hf.open_zip, which refuses zip
bombs, path traversal, links, pickles and code, and is kept in that session only (tfviz.ui.uploads).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import streamlit as st

from tfviz import hf, settings
from tfviz.core.interventions import head_name
from tfviz.hf import pretrained
from tfviz.refusal import Refusal
from tfviz.training.checkpoint import CheckpointMeta
from tfviz.ui.i18n import t, why
from tfviz.ui.kinds import kind_of
from tfviz.ui.labels import layout_word, size_text
from tfviz.ui.models import (
    BUNDLED_DIR,
    ModelEntry,
    shared_folder_model,
    shared_listing,
    user_models_dir,
)
from tfviz.ui.text import md_escape

SOURCE = "folder"  # ModelEntry.source of a model from the server's folder
KEY_PREFIX = "folder:"
# tfviz's own language models (tfviz.training.language), bundled as folders: listed first, in
# every server's picker, with or without $TFVIZ_PRETRAINED_DIR.
LANGUAGE_DIR = BUNDLED_DIR / "language"
BUNDLED_KEY_PREFIX = "bundled-lm:"
# Language models trained in the Train tab (tfviz.serve.work.LanguageWork): folders of the user
# models folder, beside the toy checkpoints, listed for every visitor.
YOURS_KEY_PREFIX = "yours-lm:"
LANGUAGE_MODEL_TYPE = "tfviz-lm"  # their config.json's model_type (tfviz.hf.decoders)
# A zip may unpack to this many times the upload limit: float weights compress about 1.1 times,
# a tokenizer.json about 4 times; hf.zipped refuses a single entry compressed past 50 times.
UNPACK_FACTOR = 8


def _stat(path: Path) -> tuple[int, int]:
    try:
        s = path.stat()
    except OSError:
        return (0, 0)
    return (s.st_mtime_ns, s.st_size)


def weights_stamp(folder: Path) -> tuple:
    """What stands for a model folder's weights: model.safetensors's (mtime, size) when it is
    there (it wins over an index, as in hf.shards.weight_files), else, for a sharded folder, the
    (name, mtime, size) of model.safetensors.index.json and of every .safetensors file beside it:
    the shards the index may name (weight_files refuses any other), found with one directory
    listing and without reading the index, so a replaced, added or removed shard is seen."""
    single = folder / hf.files.WEIGHTS
    index = folder / hf.files.WEIGHTS_INDEX
    stamp = _stat(single)
    if stamp != (0, 0) or _stat(index) == (0, 0):
        return stamp
    try:
        with os.scandir(folder) as it:
            names = sorted(
                e.name for e in it if e.name.endswith(".safetensors") and not e.name.startswith(".")
            )
    except OSError:
        names = []
    return tuple(
        (name, *_stat(folder / name))
        for name in [hf.files.WEIGHTS_INDEX, *names[: hf.files.MAX_FILES]]
    )


def stamp_key(stamp: tuple) -> str:
    """The weights stamp as part of a model's digest: "mtime:size" for one file, a short hash of
    every file's time and size for shards."""
    if len(stamp) == 2 and all(isinstance(x, int) for x in stamp):
        return f"{stamp[0]}:{stamp[1]}"
    return hashlib.sha256(repr(stamp).encode()).hexdigest()[:16]


def signature(root: Path) -> tuple:
    """What the listing depends on: each subfolder's name, its config's time and size and its
    weights stamp (weights_stamp: model.safetensors, or the index and shards of a sharded
    folder). A few stat calls per run: a changed folder is read again, an unchanged one not."""
    try:
        subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return ()
    # Names as hf.list_folder gives them (hf.files.shown): a folder name that is not UTF-8 would
    # otherwise reach Streamlit's cache key and fail every visitor's page.
    return tuple(
        (hf.files.shown(p.name), _stat(p / "config.json"), weights_stamp(p))
        for p in subs[: hf.files.MAX_FILES]
    )


def listed(root: str, signature: tuple) -> list[hf.FolderInfo | hf.Refused]:
    """hf.list_folder of the server's folder, read again only when its signature changes.
    Shared by every session (tfviz.ui.models.shared_listing); FolderInfo and Refused are
    frozen."""
    return shared_listing((root, signature), lambda: hf.list_folder(root))


def folder_entries(problems: list[str]) -> list[ModelEntry]:
    """The bundled language models (models/language/), the language models trained in the app
    (folders of the user models folder), then the usable models of $TFVIZ_PRETRAINED_DIR; each
    refused folder (or a bad setting) is added to problems, with its reason."""
    entries = root_entries(LANGUAGE_DIR, problems, BUNDLED_KEY_PREFIX)
    entries += root_entries(
        user_models_dir(), problems, YOURS_KEY_PREFIX, model_type=LANGUAGE_MODEL_TYPE
    )
    try:
        root = settings.pretrained_dir()
    except ValueError as e:
        problems.append(t("folder.bad_setting", why=why(e)))
        return entries
    if root is None:
        return entries
    return entries + root_entries(root, problems, KEY_PREFIX)


def root_entries(
    root: Path, problems: list[str], prefix: str, model_type: str | None = None
) -> list[ModelEntry]:
    """The usable model folders under root as picker entries keyed prefix + name; only those of
    model_type when given (the user models folder: tfviz's own language models)."""
    if not root.is_dir():
        return []
    sig = signature(root)
    try:
        found = listed(str(root), sig)
    except hf.PretrainedError as e:  # the folder went away between the check and the listing
        problems.append(t("folder.bad_setting", why=why(e)))
        return []
    entries = []
    stamps = {name: weights for name, _, weights in sig}
    for item in found:
        if isinstance(item, hf.Refused):
            problems.append(t("folder.refused", name=md_escape(item.name), why=why(item.error)))
            continue
        if model_type is not None and item.model_type != model_type:
            continue
        # The weights files' times and sizes stand for their contents (hashing a 400 MB file on
        # every server's first page would be slow); an edited folder is then a new model.
        digest = f"{prefix}{item.name}:{stamp_key(stamps.get(item.name, (0, 0)))}"
        entries.append(
            ModelEntry(
                f"{prefix}{item.name}", item.name, SOURCE, str(item.path), digest, item.family
            )  # fmt: skip
        )
    return entries


def option_source(entry: ModelEntry, lang: str) -> str | None:
    """What the picker shows in brackets after such a model's name: its family (and "uploaded"
    for a zip); None for a tfviz checkpoint or MiniLM."""
    if not entry.family:
        return None
    if entry.key.startswith(BUNDLED_KEY_PREFIX):
        return t("folder.option_bundled", lang=lang)
    if entry.key.startswith(YOURS_KEY_PREFIX):
        # The same words in every session: this is called from the picker's format_func, which
        # may be asked again outside the session's run (AppTest), where its state is not read.
        return t("folder.option_lm_class", lang=lang)
    if entry.source == SOURCE:
        return t("folder.option", family=entry.family, lang=lang)
    return t("folder.option_uploaded", family=entry.family, lang=lang)


def meta_and_task(
    loaded: hf.LoadedModel, origin: str
) -> tuple[CheckpointMeta, pretrained.SentenceTask]:
    """The CheckpointMeta (its record holds what the sidebar says about the model) and the task
    every view reads the model through."""
    if loaded.model.config.causal:
        task = hf.NextTokenTask(loaded.tokenizer)
    else:
        task = pretrained.SentenceTask(loaded.tokenizer, head=loaded.head)
    record = {
        "source": origin,
        "family": loaded.family,
        "model_type": loaded.model_type,
        "licence": loaded.licence,
        "n_params": loaded.n_params,
        "max_pieces": loaded.max_pieces,
        "masked_lm": loaded.head is not None,
    }
    return CheckpointMeta(task=task.name, config=loaded.model.config, record=record), task


class Unreadable(Refusal):
    """A server folder that the file system would not read (key "folder.unreadable")."""

    PREFIX = "folder."


def load_folder(path: str, digest: str, device: str):
    """(model, meta, task) of a server folder's model, or (None, why, None): why is the refusal
    (each session words it in its own language: tfviz.ui.i18n.why) or the words of an OSError.
    Loaded once per process and shared by every session (tfviz.ui.models.shared_folder_model):
    never mutate it."""
    return shared_folder_model((path, digest, device), lambda: open_folder(path, device))


def open_folder(path: str, device: str):
    """load_folder's value, loaded now."""
    try:
        loaded = hf.open_folder(path, device=device)
    except hf.PretrainedError as e:
        return None, e.detached(), None
    except OSError as e:  # worded when shown, in each session's language (catalogue folder.*)
        return None, Unreadable("unreadable", why=e), None
    bundled = Path(path).parent.resolve() == LANGUAGE_DIR.resolve()
    meta, task = meta_and_task(loaded, "bundled" if bundled else "folder")
    if loaded.model_type == hf.decoders.TFVIZ_MODEL_TYPE:  # tfviz's own: its training record
        record = hf.files.read_json(Path(path) / "config.json").get("record", {})
        meta.record["training"] = record if isinstance(record, dict) else {}
    return loaded.model, meta, task


def open_zip_upload(data: bytes, file_name: str, device: str, limit_mb: int):
    """(entry, model, meta, task) of an uploaded zipped model folder; hf.PretrainedError (the
    library's message) when it is refused."""
    digest = hashlib.sha256(data).hexdigest()
    loaded = hf.open_zip(data, device=device, max_bytes=UNPACK_FACTOR * limit_mb * 1024 * 1024)
    meta, task = meta_and_task(loaded, "upload")
    name = file_name[:-4] if file_name.lower().endswith(".zip") else file_name
    entry = ModelEntry(f"upload:{digest}", name[:60] or file_name, "uploaded", "", digest,
                       loaded.family)  # fmt: skip
    return entry, loaded.model, meta, task


def folder_info(meta: CheckpointMeta, task: pretrained.SentenceTask, device: str) -> None:
    """What the sidebar says about such a model: what it does, its family, licence, sizes, its
    word-piece limit and the device."""
    c, record = meta.config, meta.record
    what = kind_of(task).folder_what  # what such a model does, in the catalogue's keys
    st.markdown(t("sidebar.task", name=md_escape(t(f"folder.task_{what}"))))
    ours = record.get("model_type") == hf.decoders.TFVIZ_MODEL_TYPE  # a character model
    st.caption(md_escape(t("folder.kind_char" if ours else f"folder.kind_{what}")))
    trained = record.get("training") or {}
    if ours and "valid_loss" in trained:
        best = trained.get("induction_best", {})
        st.caption(md_escape(t(
            "folder.trained", steps=f"{trained['steps_done']:,}",
            loss=f"{trained['valid_loss']:.3f}",
            score=f"{best.get('score', 0):.2f}",
            head=head_name(best.get("layer", 0), best.get("head", 0)),
            drop=f"{trained.get('in_context_drop', 0):.2f}",
        )))  # fmt: skip
    if c.causal and c.n_kv_heads:
        st.caption(md_escape(t("folder.kv_heads", kv=c.kv_heads, heads=c.n_heads)))
    licence = record.get("licence") or t("folder.no_licence")
    origin = {"folder": "folder.from_server", "bundled": "folder.from_bundle"}.get(
        record.get("source"), "folder.from_upload"
    )
    norm = layout_word("norm", c.norm)  # "post" -> post-norm, 后归一化
    st.text(
        t(
            "folder.facts",
            family=record.get("family", "?"),
            model_type=record.get("model_type", "?"),
            params=f"{record.get('n_params', 0):,}",
            licence=licence,
        )
        + "\n"
        + t(origin)
    )
    st.text(
        size_text(c)
        + "\n"
        + t("folder.chars" if ours else "folder.pieces", norm=norm, pieces=task.max_pieces)
        + "\n"
        + t("sidebar.device", device=device.upper())
    )
