"""Checkpoints: one .safetensors file per model; config, task and training record as JSON metadata.

Why safetensors: loading one never runs code. We still check every byte we rely on before building a
model, so a renamed pickle, a truncated download or a file from another project fails with a
CheckpointError that says what is wrong, not a stack trace from deep inside a parser. Files are
written to a temporary name in the same folder and renamed into place, so a crash mid-write leaves
the previous file intact and two writers of one name never interleave.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.core.tasks import TASKS, get_task
from tfviz.messages import Refused, say
from tfviz.refusal import Refusal
from tfviz.settings import MAX_CHECKPOINT_BYTES, MAX_PARAMS

FORMAT = "tfviz/1"
META_KEY = "tfviz"
MAX_HEADER = 1024 * 1024
MAX_LOSS_POINTS = 500  # loss curve kept in the metadata, averaged down to this many points


class CheckpointError(Refusal, ValueError):
    """A file that is not a usable tfviz checkpoint (or timeline): a code and values, worded by
    the catalogue (keys "refusal.checkpoint.<code>"); str() is the English."""

    PREFIX = "refusal.checkpoint."


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint says about its model."""

    task: str
    config: ModelConfig
    record: dict = field(default_factory=dict)  # training settings and loss curve
    metrics: dict = field(default_factory=dict)  # measured on fresh data when it was saved


def save_checkpoint(
    path: str | Path,
    model: Transformer,
    task: str,
    record: dict | None = None,
    metrics: dict | None = None,
    overwrite: bool = True,
) -> Path:
    """Write model + metadata to path atomically (temporary file, fsync, rename). Returns path.

    overwrite=False refuses (FileExistsError) when path exists, in the same atomic step as the
    write, so two servers sharing a folder can never replace each other's model of one name.
    """
    path = Path(path)
    get_task(task).check_config(model.config)
    record = dict(record or {})
    if "loss" in record:
        record["loss"], record["loss_every"] = _downsample(record["loss"])
    meta = {
        "format": FORMAT,
        "task": task,
        "config": model.config.to_dict(),
        "record": record,
        "metrics": metrics or {},
    }
    tensors = {
        k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()
    }
    data = st_save(tensors, metadata={META_KEY: json.dumps(meta, allow_nan=False)})
    write_atomic(path, data, overwrite)
    return path


def write_atomic(path: Path, data: bytes, overwrite: bool = True) -> None:
    """Replace path with data so that readers see the old file or the new one, never a part.

    overwrite=False: link the finished temporary file to path instead of renaming it over path;
    link fails with FileExistsError if path exists, even when another process created it a
    moment ago (a check-then-rename could not promise that).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; a model file is as readable as any other
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # FileExistsError if the name is taken
            os.unlink(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename or link in folder durable: without it, a power cut (or a node lost with its
    page cache) after the save may bring back the folder without the new name, though the job
    said "saved". A process killed with -9 loses nothing either way (the kernel holds the
    change); what it can leave is only the writer's own `.NAME.*.tmp`, which no reader opens.

    Best effort: the file is in place already, so a folder that cannot be synced (some network
    file systems refuse fsync on a directory) must not turn a finished save into a reported
    failure.
    """
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _downsample(values: list[float]) -> tuple[list[float], int]:
    every = max(1, math.ceil(len(values) / MAX_LOSS_POINTS))
    points = [
        sum(values[i : i + every]) / len(values[i : i + every])
        for i in range(0, len(values), every)
    ]
    return [round(v, 6) for v in points], every


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes: a cache key that changes whenever the model does."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_checkpoint(
    source: str | Path | bytes,
    max_bytes: int = MAX_CHECKPOINT_BYTES,
    device: str | torch.device = "cpu",
    max_params: int = MAX_PARAMS,
) -> tuple[Transformer, CheckpointMeta]:
    """Load a checkpoint from a path or from bytes (an upload), checking everything first.

    Returns (model in eval mode with gradients off, CheckpointMeta).
    Raises CheckpointError with a specific message for anything that is not a valid tfviz model.
    """
    data = _read(source, max_bytes)
    header = _parse_header(data)
    meta = _parse_meta(header)
    # Checked before anything is built: a small file may name a huge model in its metadata.
    if meta.config.n_params > max_params:
        raise CheckpointError("too_big", n=meta.config.n_params, most=max_params)
    tensors = _load_tensors(data)
    model = Transformer(meta.config)
    check_state(tensors, model.state_dict())
    model.load_state_dict(tensors, strict=True)
    model.eval().requires_grad_(False)
    return model.to(device), meta


def check_state(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """CheckpointError unless tensors has exactly expected's names, shapes, float32, all finite."""
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        values = {}
        if missing:
            values["missing"] = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        if extra:
            values["extra"] = ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else "")
        raise CheckpointError(
            "tensors_missing_extra" if missing and extra
            else "tensors_missing" if missing else "tensors_extra",
            **values,
        )  # fmt: skip
    for name, want in expected.items():
        got = tensors[name]
        if tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(
                "wrong_shape", tensor=name, found=tuple(got.shape), shape=tuple(want.shape)
            )
        if got.dtype != torch.float32:
            raise CheckpointError("not_float32", tensor=name, dtype=got.dtype)
        if not torch.isfinite(got).all():
            raise CheckpointError("not_finite", tensor=name)


def _read(source: str | Path | bytes, max_bytes: int) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise CheckpointError("no_file", path=path)
        size = path.stat().st_size
        if size > max_bytes:
            raise CheckpointError("too_large", size=size / 1e6, limit=max_bytes / 1e6)
        data = path.read_bytes()
    if len(data) > max_bytes:
        raise CheckpointError("too_large", size=len(data) / 1e6, limit=max_bytes / 1e6)
    return data


def _parse_header(data: bytes) -> dict:
    if data[:2] == b"PK":
        raise CheckpointError("zip_pickle")
    if len(data) < 10:
        raise CheckpointError("too_short", size=len(data))
    n = int.from_bytes(data[:8], "little")
    if n > MAX_HEADER or data[8:9] != b"{":
        if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
            raise CheckpointError("pickle")
        raise CheckpointError("not_safetensors")
    if 8 + n > len(data):
        raise CheckpointError("truncated_header", n=n, follow=len(data) - 8)
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError("header_not_json", why=e) from None
    if not isinstance(header, dict):
        raise CheckpointError("header_not_object")
    ends = [
        info.get("data_offsets", [0, 0])[1]
        for key, info in header.items()
        if key != "__metadata__" and isinstance(info, dict)
    ]
    body = len(data) - 8 - n
    if ends and max(ends) > body:
        raise CheckpointError("truncated_data", n=max(ends), there=body)
    return header


def _parse_meta(header: dict) -> CheckpointMeta:
    raw = (header.get("__metadata__") or {}).get(META_KEY)
    if raw is None:
        raise CheckpointError("no_metadata")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CheckpointError("metadata_not_json", why=e) from None
    if not isinstance(meta, dict):
        raise CheckpointError("metadata_not_object")
    if meta.get("format") != FORMAT:
        raise CheckpointError("bad_format", found=repr(meta.get("format")), reads=repr(FORMAT))
    try:
        task = get_task(meta.get("task"))
    except ValueError:
        raise CheckpointError(
            "unknown_task", task=repr(meta.get("task")), known=list(TASKS)
        ) from None
    try:
        config = ModelConfig.from_dict(meta.get("config"))
        task.check_config(config)
    except (TypeError, ValueError) as e:
        raise CheckpointError("bad_config", why=e) from None
    record, metrics = meta.get("record", {}), meta.get("metrics", {})
    if not isinstance(record, dict) or not isinstance(metrics, dict):
        raise CheckpointError("record_not_object")
    return CheckpointMeta(task=task.name, config=config, record=record, metrics=metrics)


def _load_tensors(data: bytes) -> dict[str, torch.Tensor]:
    try:
        return st_load(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError("data_unreadable", why=e) from None


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_RESERVED = {
    "con",
    "prn",
    "aux",
    "nul",
    *(f"com{i}" for i in range(10)),
    *(f"lpt{i}" for i in range(10)),
}
SUFFIX = ".safetensors"


def safe_model_path(folder: str | Path, name: str, reserved: set[str] | frozenset = frozenset()):
    """The path of model `name` inside folder, or tfviz.messages.Refused (a ValueError) saying
    why the name is refused.

    Names are 1-64 characters of letters, digits, '_', '-' and '.', not starting with '.' or '-',
    not a device name reserved by Windows, not one of `reserved` (e.g. the bundled models), and
    the result always lies directly inside folder: '../x', '/etc/x' and 'a/b' are refused.
    """
    if not isinstance(name, str):
        raise Refused(say("name_not_text"))
    stem = name.strip()
    if stem.lower().endswith(SUFFIX):
        stem = stem[: -len(SUFFIX)]
    if not stem:
        raise Refused(say("name_empty"))
    if len(stem) > 64:
        raise Refused(say("name_too_long", n=str(len(stem))))  # as typed: no separators
    bad = sorted({ch for ch in stem if ch not in _NAME_CHARS})
    if bad:
        raise Refused(say("name_bad_chars", chars=" ".join(repr(ch) for ch in bad[:5])))
    if stem[0] in ".-" or ".." in stem:
        raise Refused(say("name_bad_dots"))
    if stem.lower().split(".")[0] in _RESERVED or stem.lower() in {r.lower() for r in reserved}:
        raise Refused(say("name_reserved", name=repr(stem)))
    folder = Path(folder).resolve()
    path = (folder / (stem + SUFFIX)).resolve()
    if path.parent != folder:  # belt and braces: the character rules already forbid this
        raise Refused(say("name_outside"))
    return path
