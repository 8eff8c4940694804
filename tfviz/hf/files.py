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

MAX_FILES = 256  # files in a model folder (a Hugging Face folder has about a dozen)
MAX_JSON_BYTES = 1 << 20  # config.json, tokenizer_config.json and the like
# A Hugging Face folder nests a file at most two or three folders deep (1_Pooling/config.json);
# os.walk recurses once per level (3,000 levels raise RecursionError in Python 3.11) and a path
# that deep passes the file system's limits, so deeper ones are refused before they are walked.
MAX_DEPTH = 8
MAX_FOLDERS = 256  # subfolders walked: thousands of empty ones would be a slow listing
MAX_JSON_DEPTH = 64  # nesting of any JSON read (tokenizer.json: about 6)
MAX_MESSAGE = 400  # characters of a refusal: a 1 MB model_type is not echoed whole
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
        raise MissingFileError(f"{shown(folder.name)} is not a folder")
    if str(folder) != shown(str(folder)):  # safetensors opens only UTF-8 paths
        raise UnsafeFileError(
            f"the folder's name {shown(folder.name)!r} is not UTF-8 text; rename the folder"
        )
    files: dict[str, Path] = {}
    folders = 0
    # Walked with a stack, not os.walk: its recursion is what a deeply nested folder exhausts.
    stack = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name, reverse=True)
        except OSError as e:
            raise UnsafeFileError(f"a subfolder cannot be read ({e.strerror or e})") from None
        for entry in entries:
            path = Path(entry.path)
            rel = path.relative_to(folder).as_posix()
            if rel != shown(rel):
                raise UnsafeFileError(
                    f"the file name {shown(rel)!r} is not UTF-8 text; rename it or remove it"
                )
            if entry.is_dir(follow_symlinks=False):  # links to folders are not followed
                folders += 1
                if depth + 1 >= MAX_DEPTH:
                    raise TooLargeError(
                        f"{rel} is nested more than {MAX_DEPTH} folders deep; a model folder "
                        "keeps its files at most a few folders down"
                    )
                if folders > MAX_FOLDERS:
                    raise TooLargeError(
                        f"the folder holds more than {MAX_FOLDERS} subfolders; a model folder has "
                        "a few"
                    )
                stack.append((path, depth + 1))
                continue
            if entry.is_symlink() and not path.exists():
                raise UnsafeFileError(f"{rel} is a link to nothing (or a loop of links)")
            if not path.is_file():  # a FIFO or device would block or never end when read
                raise UnsafeFileError(f"{rel} is not a regular file")
            files[rel] = path
            if len(files) > MAX_FILES:
                raise TooLargeError(
                    f"the folder holds more than {MAX_FILES} files; a model folder has a dozen"
                )
    code = [rel for rel in files if rel.lower().endswith(CODE_SUFFIXES)]
    if code:
        raise UnsafeFileError(
            f"the folder holds code ({', '.join(code[:3])}); tfviz never runs a model's own "
            "code: remove it, tfviz needs only config.json, model.safetensors and the tokenizer"
        )
    pickles = [rel for rel in files if rel.lower().endswith(PICKLE_SUFFIXES)]
    if WEIGHTS not in files and WEIGHTS_INDEX not in files:
        if pickles:
            raise UnsafeFileError(
                f"the weights are a pickle ({', '.join(pickles[:3])}), which can run code when "
                f"loaded; tfviz reads only {WEIGHTS}. Convert them with safetensors first."
            )
        raise MissingFileError(f"the folder has no {WEIGHTS} (nor {WEIGHTS_INDEX})")
    for name in ("config.json",):
        if name not in files:
            raise MissingFileError(f"the folder has no {name}")
    return files


@contextmanager
def refusing() -> Iterator[None]:
    """Every error reading a folder raises becomes a PretrainedError: the named checks' own, an
    OSError as "cannot be read", anything else as UnreadableError naming its kind. One hostile
    folder then costs its own entry, never the listing beside it or the page."""
    try:
        yield
    except PretrainedError as e:
        if len(str(e)) > MAX_MESSAGE or str(e) != shown(str(e)):  # a name quoted from the folder
            raise type(e)(shown(str(e))[:MAX_MESSAGE]) from None
        raise
    except OSError as e:
        raise UnreadableError(f"a file cannot be read ({e.strerror or type(e).__name__})") from e
    except Exception as e:  # noqa: BLE001 - the folder is hostile; its error stays its own
        why = shown(str(e))[:200]
        raise UnreadableError(f"the folder cannot be read ({type(e).__name__}: {why})") from e


def shown(text: str) -> str:
    """text safe to put in a message: a file name that is not UTF-8 comes from the file system
    with lone surrogates ("\\udcff"), which a web page cannot encode; they are written as
    escapes ("\\xff") instead."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def loads_json(text: str, name: str, error: type[PretrainedError] = ConfigError):
    """JSON text parsed with every way it can fail turned into `error` naming the file: not
    JSON, a key written twice (json keeps the last silently), nesting deeper than
    MAX_JSON_DEPTH (a 400 kB file of "[" exhausts the parser's recursion: RecursionError, not a
    ValueError)."""

    def no_repeats(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise ValueError(f"the key {shown(key)!r} is written twice")
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=no_repeats)
    except RecursionError:  # deeper than the parser goes: deeper than MAX_JSON_DEPTH too
        data = TOO_DEEP
    except ValueError as e:
        raise error(f"{name} is not readable JSON ({shown(str(e))[:200]})") from None
    if data is TOO_DEEP or json_depth(data) > MAX_JSON_DEPTH:
        raise error(f"{name} is nested more than {MAX_JSON_DEPTH} levels deep; refused unread")
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
        raise TooLargeError(f"{path.name} has {size:,} bytes; at most {limit:,} are read")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{path.name} is not UTF-8 text") from None
    except OSError as e:
        raise error(f"{path.name} cannot be read ({e.strerror or e})") from None
    data = loads_json(text, path.name, error)
    if not isinstance(data, dict):
        raise error(f"{path.name} is not a JSON object")
    return data


def refuse_remote_code(data: dict, name: str) -> None:
    for key in REMOTE_CODE_KEYS:
        if key in data:
            raise UnsafeFileError(
                f"{name} has {key}: the model wants its own code run to load it; tfviz never "
                "runs a model's code and opens only the BERT, RoBERTa and DistilBERT it knows"
            )


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
