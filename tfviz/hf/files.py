"""The files of a model folder: which are there, which are refused unread, and JSON read safely.

A model folder is hostile until shown otherwise: it may hold code or pickles, a FIFO, thousands of
files or folders nested thousands deep, JSON nested deeper than Python's parser recurses, names
that are not UTF-8. Each of these is refused here with a PretrainedError naming the problem, before
anything else reads the folder, so one bad folder can never take a listing (or a page) down.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfviz.hf.errors import (
    ConfigError,
    MissingFileError,
    PretrainedError,
    TooLargeError,
    UnreadableError,
    UnsafeFileError,
)
from tfviz.refusal import MAX_TEXT, shown  # noqa: F401 (shown re-exported: hf.files.shown)

MAX_FILES = 256  # files in a model folder (a Hugging Face folder has about a dozen)
MAX_JSON_BYTES = 1 << 20  # config.json, tokenizer_config.json and the like
# A Hugging Face folder nests a file at most two or three folders deep (1_Pooling/config.json);
# os.walk recurses once per level (3,000 levels raise RecursionError in Python 3.11) and a path
# that deep passes the file system's limits, so deeper ones are refused before they are walked.
MAX_DEPTH = 8
MAX_FOLDERS = 256  # subfolders walked: thousands of empty ones would be a slow listing
MAX_JSON_DEPTH = 64  # nesting of any JSON read (tokenizer.json: about 6)
MAX_MESSAGE = MAX_TEXT  # characters of a refusal: a 1 MB model_type is not echoed whole
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # {"weight_map": {tensor name: shard file}}
# Files that unpickle (run code) when loaded by torch, numpy or joblib. Never read here; a folder
# with one of them and no safetensors file is refused, saying why.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyd", ".so", ".dll", ".dylib")
# config.json keys that ask a loader to import code shipped with the model.
REMOTE_CODE_KEYS = ("auto_map", "trust_remote_code", "custom_pipelines")


def scan(folder: Path) -> dict[str, Path]:
    """Relative name -> path of every file in folder (subfolders included), refusing code.

    UnsafeFileError for a code file anywhere, a pickle without safetensors weights beside it, a
    name that is not UTF-8; TooLargeError for too many files or folders, or folders nested too
    deep; MissingFileError for a folder that is not one.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingFileError("not_a_folder", name=folder.name)
    if str(folder) != shown(str(folder)):  # safetensors opens only UTF-8 paths
        raise UnsafeFileError("folder_name_not_utf8", name=folder.name)
    files: dict[str, Path] = {}
    folders = 0
    # Walked with a stack, not os.walk: its recursion is what a deeply nested folder exhausts.
    stack = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name, reverse=True)
        except OSError as e:
            raise UnsafeFileError("subfolder_unreadable", why=e) from None
        for entry in entries:
            path = Path(entry.path)
            rel = path.relative_to(folder).as_posix()
            if rel != shown(rel):
                raise UnsafeFileError("file_name_not_utf8", file=rel)
            if entry.is_dir(follow_symlinks=False):  # links to folders are not followed
                folders += 1
                if depth + 1 >= MAX_DEPTH:
                    raise TooLargeError("nested_too_deep", file=rel, most=MAX_DEPTH)
                if folders > MAX_FOLDERS:
                    raise TooLargeError("too_many_folders", most=MAX_FOLDERS)
                stack.append((path, depth + 1))
                continue
            if entry.is_symlink() and not path.exists():
                raise UnsafeFileError("broken_link", file=rel)
            if not path.is_file():  # a FIFO or device would block or never end when read
                raise UnsafeFileError("not_regular_file", file=rel)
            files[rel] = path
            if len(files) > MAX_FILES:
                raise TooLargeError("too_many_files", most=MAX_FILES)
    code = [rel for rel in files if rel.lower().endswith(CODE_SUFFIXES)]
    if code:
        raise UnsafeFileError("holds_code", files=code[:3])
    pickles = [rel for rel in files if rel.lower().endswith(PICKLE_SUFFIXES)]
    if WEIGHTS not in files and WEIGHTS_INDEX not in files:
        if pickles:
            raise UnsafeFileError("pickled_weights", files=pickles[:3], weights=WEIGHTS)
        raise MissingFileError("no_weights", weights=WEIGHTS, index=WEIGHTS_INDEX)
    for name in ("config.json",):
        if name not in files:
            raise MissingFileError("no_file", file=name)
    return files


@contextmanager
def refusing() -> Iterator[None]:
    """Every error reading a folder raises becomes a PretrainedError: the named checks' own, an
    OSError as "cannot be read", anything else as UnreadableError naming its kind. One hostile
    folder then costs its own entry, never the listing beside it or the page."""
    try:
        yield
    except PretrainedError:  # its values were made encodable and clipped when it was raised
        raise
    except OSError as e:
        raise UnreadableError("file_unreadable", why=e) from e
    except Exception as e:  # noqa: BLE001 - the folder is hostile; its error stays its own
        raise UnreadableError("folder_unreadable", kind=type(e).__name__, why=e) from e


def loads_json(text: str, name: str, error: type[PretrainedError] = ConfigError):
    """JSON text parsed with every way it can fail turned into `error` naming the file: not
    JSON, a key written twice (json keeps the last silently), nesting deeper than
    MAX_JSON_DEPTH (a 400 kB file of "[" exhausts the parser's recursion: RecursionError, not a
    ValueError)."""

    def no_repeats(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise error("json_key_twice", file=name, key=repr(shown(key)))
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=no_repeats)
    except RecursionError:  # deeper than the parser goes: deeper than MAX_JSON_DEPTH too
        data = TOO_DEEP
    except ValueError as e:  # the json module's words say where the text stops being JSON
        # (a key written twice raised `error` itself: a RuntimeError, not caught here)
        raise error("not_json", file=name, why=e) from None
    if data is TOO_DEEP or json_depth(data) > MAX_JSON_DEPTH:
        raise error("json_too_deep", file=name, most=MAX_JSON_DEPTH)
    return data


TOO_DEEP = object()  # what loads_json's parse gave up on (JSON `null` is None: not this)


def json_depth(data) -> int:
    """How deeply lists and objects nest in parsed JSON (a scalar: 0), without recursion."""
    if not isinstance(data, (dict, list)):
        return 0
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        items = value.values() if isinstance(value, dict) else value
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break  # deep enough to refuse: no need to walk the rest
        stack.extend((v, depth + 1) for v in items if isinstance(v, (dict, list)))
    return deepest


def read_json(
    path: Path, limit: int = MAX_JSON_BYTES, error: type[PretrainedError] = ConfigError
) -> dict:
    """A JSON object from a small file; TooLargeError past limit, `error` when it is not UTF-8,
    not JSON, nested too deep or not an object."""
    size = path.stat().st_size
    if size > limit:
        raise TooLargeError("file_too_large", file=path.name, size=size, most=limit)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error("not_utf8", file=path.name) from None
    except OSError as e:
        raise error("cannot_read", file=path.name, why=e) from None
    data = loads_json(text, path.name, error)
    if not isinstance(data, dict):
        raise error("not_object", file=path.name)
    return data


def refuse_remote_code(data: dict, name: str) -> None:
    for key in REMOTE_CODE_KEYS:
        if key in data:
            raise UnsafeFileError("remote_code", file=name, key=key)


def licence_of(files: dict[str, Path]) -> str | None:
    """The licence a model card's front matter names ("license: apache-2.0"), else a LICENSE
    file's presence, else None."""
    if "README.md" in files and files["README.md"].stat().st_size <= MAX_JSON_BYTES:
        text = files["README.md"].read_text(encoding="utf-8", errors="replace")
        front = re.match(r"---\s*\n(.*?)\n---", text, re.S)
        if front:
            found = re.search(r"^licen[cs]e:\s*(\S.*)$", front.group(1), re.M)
            if found:
                return found.group(1).strip().strip("'\"")[:64]
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md"):
        if name in files:
            return f"see {name}"
    return None


# config.json's fields, read for every family (tfviz.hf.families, tfviz.hf.decoders)


def int_field(raw: dict, key: str, default: int | None = None) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError("needs_integer", key=key, value=repr(value))
    return value


def eps_field(raw: dict, key: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 0.1:
        raise ConfigError("bad_epsilon", key=key, value=repr(value))
    return float(value)
