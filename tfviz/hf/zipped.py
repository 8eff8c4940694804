"""A zipped model folder, unpacked into a private temporary folder under strict limits.

An uploaded zip is hostile until shown otherwise. Before anything is written, the zip's central
directory is checked: entry count, total declared size, each entry's compression ratio (a zip
bomb packs gigabytes of zeros into kilobytes), names that would land outside the folder (`../`,
absolute paths, drive letters, backslashes), links, encrypted entries. While unpacking, bytes are
counted again, because a zip's headers can lie about sizes. Then the folder is opened like any
other (tfviz.hf.folder), with its own checks on what is inside.
"""

from __future__ import annotations

import io
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from tfviz.hf.errors import ZipRefusedError
from tfviz.hf.files import MAX_DEPTH, MAX_FILES, refusing
from tfviz.hf.folder import LoadedModel, open_folder

MAX_UNPACKED_BYTES = 1_200_000_000  # XLM-R base in float32 (1.1 GB) and its tokenizer
MAX_RATIO = 50  # uncompressed / compressed per entry; float weights compress about 1.1x
RATIO_FREE_BYTES = 1 << 20  # entries this small may compress well (JSON, vocab.txt)
CHUNK = 1 << 20
MAX_NAME_BYTES = 255  # one file or folder name: what Linux, macOS and Windows file systems take
MAX_PATH_BYTES = 1024  # a whole entry name: well inside every file system's path limit


def quoted(name: str, most: int = 80) -> str:
    """An entry's name as a refusal quotes it: a 3,000-folder name would bury the reason."""
    return repr(name if len(name) <= most else name[: most // 2] + "…" + name[-most // 2 :])


def _refuse_name(name: str) -> ZipRefusedError | None:
    """Why an entry's name is refused, or None."""
    entry = quoted(name)
    if "\\" in name or "\x00" in name:
        return ZipRefusedError("entry_backslash", entry=entry)
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        return ZipRefusedError("entry_absolute", entry=entry)
    if ".." in path.parts:
        return ZipRefusedError("entry_dotdot", entry=entry)
    if len(name.encode("utf-8")) > MAX_PATH_BYTES:
        return ZipRefusedError("entry_path_too_long", entry=entry, most=MAX_PATH_BYTES)
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in path.parts):
        return ZipRefusedError("entry_name_too_long", entry=entry, most=MAX_NAME_BYTES)
    if len(path.parts) > MAX_DEPTH:
        return ZipRefusedError("entry_too_deep", entry=entry, most=MAX_DEPTH)
    return None


def _refuse_collision(infos: list[zipfile.ZipInfo]) -> None:
    """ZipRefusedError when one name is a file and also a folder of another entry
    ("m/config.json" and "m/config.json/x"): unpacking would fail half-way."""
    files = {i.filename.rstrip("/") for i in infos if not i.is_dir()}
    for info in infos:
        for parent in PurePosixPath(info.filename.rstrip("/")).parents:
            if str(parent) in files:
                raise ZipRefusedError(
                    "file_and_folder", file=repr(str(parent)), entry=quoted(info.filename)
                )


def check_entries(zf: zipfile.ZipFile, max_bytes: int, max_files: int) -> list[zipfile.ZipInfo]:
    """The zip's file entries, each checked from the central directory; ZipRefusedError else."""
    infos = zf.infolist()
    if len(infos) > max_files:
        raise ZipRefusedError("too_many_entries", n=len(infos), most=max_files)
    total = 0
    seen = set()
    files = []
    for info in infos:
        refused = _refuse_name(info.filename)
        if refused:
            raise refused
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ZipRefusedError("entry_link", entry=quoted(info.filename))
        if info.flag_bits & 0x1:
            raise ZipRefusedError("entry_encrypted", entry=quoted(info.filename))
        key = info.filename.rstrip("/").lower()
        if key in seen:
            raise ZipRefusedError("entry_twice", entry=quoted(info.filename))
        seen.add(key)
        if info.is_dir():
            continue
        total += info.file_size
        if total > max_bytes:
            raise ZipRefusedError("unpacks_too_large", most=max_bytes)
        if info.file_size > RATIO_FREE_BYTES and info.file_size > MAX_RATIO * max(
            info.compress_size, 1
        ):
            ratio = info.file_size / max(info.compress_size, 1)
            raise ZipRefusedError("compressed_too_much", entry=quoted(info.filename), ratio=ratio)
        files.append(info)
    _refuse_collision(infos)
    return files


def extract(zip_path: str | Path | bytes, dest: Path, max_bytes: int = MAX_UNPACKED_BYTES,
            max_files: int = MAX_FILES) -> Path:  # fmt: skip
    """Unpack zip_path (a file, or its bytes) into dest (an empty folder); the model folder
    inside it.

    The model folder is dest itself, or the zip's one top-level folder when every entry is in it.
    """
    if isinstance(zip_path, (bytes, bytearray)):  # an upload, held in memory
        zip_path = io.BytesIO(zip_path)
    try:
        zf = zipfile.ZipFile(zip_path)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as e:
        raise ZipRefusedError("not_a_zip", why=e) from None
    with zf:
        files = check_entries(zf, max_bytes, max_files)
        written = 0
        root = dest.resolve()
        for info in files:
            target = (dest / info.filename).resolve()
            if root not in target.parents:  # the name checks make this impossible; kept anyway
                raise ZipRefusedError("entry_leaves_folder", entry=quoted(info.filename))
            declared = info.file_size
            count = 0
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "xb") as out:
                    while chunk := src.read(CHUNK):
                        count += len(chunk)
                        written += len(chunk)
                        if count > declared or written > max_bytes:
                            raise ZipRefusedError(
                                "unpacks_past_header", entry=quoted(info.filename)
                            )
                        out.write(chunk)
            except (
                zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, NotImplementedError
            ) as e:  # fmt: skip
                # The checks above leave only a damaged or lying zip (or a full disk) here.
                raise ZipRefusedError("cannot_unpack", entry=quoted(info.filename), why=e) from None
    tops = {PurePosixPath(i.filename).parts[0] for i in zf.infolist()}
    if len(tops) == 1 and (dest / next(iter(tops))).is_dir():
        return dest / next(iter(tops))
    return dest


@contextmanager
def unpacked(zip_path: str | Path | bytes, **limits) -> Iterator[Path]:
    """The zip's model folder in a temporary folder that is removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="tfviz-model-"))
    try:
        yield extract(zip_path, tmp, **limits)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_zip(zip_path: str | Path | bytes, device="cpu", **limits) -> LoadedModel:
    """A zipped model folder as a LoadedModel; ZipRefusedError or another PretrainedError
    subclass saying why not. The unpacked files are gone when this returns (the model is in
    memory)."""
    with refusing(), unpacked(zip_path, **limits) as folder:
        return open_folder(folder, device=device)
