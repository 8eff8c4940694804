"""A corpus of hostile model folders and zips (issue 30): each is refused with a message naming
its problem, the listing of a server folder holding all of them still shows every good model
beside them, and a real server stays healthy with that folder.

Every case starts from a good tiny BERT folder (tests/hf/test_hf_encoders.py's builder, with
transformers) and breaks one thing: JSON nested 200,000 deep, the wrong types in config.json,
names that are not UTF-8, links that loop, thousands of folders or files, NaN weights, empty
files, shapes that disagree... A case is refused either when the folder is listed (nothing past
config.json and the safetensors header is read then) or only when it is opened (a tokenizer, a
tensor's values); `stage` says which, and the test holds both to it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from bench.harness import free_port, healthy, stop_server, wait_healthy
from bench.session import Stats, one_page_load
from tests.conftest import ROOT
from tests.hf.test_hf_encoders import _build  # skips without transformers (fails under CI=true)
from tfviz import hf, settings
from tfviz.hf import files as hf_files
from tfviz.hf import zipped

DEEP = "[" * 200_000  # 200 kB: under every JSON size limit, far past the parser's recursion


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], None]  # breaks a copy of the good folder
    error: type[hf.PretrainedError]
    says: str  # a regular expression the refusal must match
    stage: str = "list"  # "list": refused when listed (and opened); "open": only when opened


def config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def edit_config(**changes) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        data = config(folder) | changes
        (folder / "config.json").write_text(json.dumps(data))

    return make


def write(name: str, data: bytes | str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)

    return make


def edit_tensors(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        tensors = load_file(folder / "model.safetensors")
        change(tensors)
        save_file(tensors, folder / "model.safetensors")

    return make


def sharded(index: dict | str) -> Callable[[Path], None]:
    """The weights as one shard named by an index (model.safetensors renamed)."""

    def make(folder: Path) -> None:
        (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
        text = index if isinstance(index, str) else json.dumps(index)
        (folder / "model.safetensors.index.json").write_text(text)

    return make


def first_weight(folder_tensors: dict) -> str:
    return next(k for k in sorted(folder_tensors) if k.endswith("word_embeddings.weight"))


def set_value(value: float):
    def change(tensors: dict) -> None:
        name = first_weight(tensors)
        tensors[name] = tensors[name].clone()
        tensors[name][0, 0] = value

    return change


def deep_folders(levels: int) -> Callable[[Path], None]:
    """levels folders nested in one another: made level by level through file descriptors,
    since the whole path is longer than the system takes in one call."""

    def make(folder: Path) -> None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            for _ in range(levels):
                os.mkdir("d", dir_fd=fd)
                inner = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)

    return make


def remove_deep(path: Path) -> None:
    """shutil.rmtree recurses once per level and cannot remove deep_folders' tree: undone level
    by level from the bottom, again through file descriptors."""
    fds = [os.open(path, os.O_RDONLY)]
    try:
        while "d" in os.listdir(fds[-1]):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        while len(fds) > 1:
            os.close(fds.pop())
            os.rmdir("d", dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


def many_files(n: int) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        for i in range(n):
            (folder / f"f{i}.txt").write_text("x")

    return make


def fifo(folder: Path) -> None:
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")


def link_loop(folder: Path) -> None:
    (folder / "a.json").symlink_to(folder / "b.json")
    (folder / "b.json").symlink_to(folder / "a.json")


def config_is_a_folder(folder: Path) -> None:
    (folder / "config.json").unlink()
    (folder / "config.json").mkdir()


def not_utf8_file_name(folder: Path) -> None:
    os.close(os.open(os.fsencode(folder) + b"/notes-\xff\xfe.json", os.O_CREAT | os.O_WRONLY))


def huge_header(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 60) + b"{}")


def deep_header(folder: Path) -> None:
    header = DEEP.encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)


def truncated_weights(folder: Path) -> None:
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def bigger_vocabulary(folder: Path) -> None:
    with open(folder / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("".join(f"extra{i}\n" for i in range(500)))


def drop_tensor(tensors: dict) -> None:
    del tensors[first_weight(tensors)]


def add_tensor(tensors: dict) -> None:
    tensors["bert.encoder.layer.9.secret.weight"] = torch.zeros(2, 2)


def int_tensor(tensors: dict) -> None:
    name = first_weight(tensors)
    tensors[name] = tensors[name].to(torch.int64)


def wrong_shape(tensors: dict) -> None:
    name = first_weight(tensors)
    tensors[name] = tensors[name][:, :16].contiguous()


def bare_literal(key: str, literal: str) -> Callable[[Path], None]:
    """config.json with key set to NaN or Infinity: bare literals Python's json reads."""

    def make(folder: Path) -> None:
        text = json.dumps(config(folder) | {key: 0.5}).replace("0.5", literal)
        (folder / "config.json").write_text(text)

    return make


FOLDERS = [
    # JSON nested past Python's recursion: RecursionError used to escape every check
    Case("config-deep", write("config.json", DEEP), hf.ConfigError, r"config\.json is nested"),
    Case("index-deep", sharded(DEEP), hf.ConfigError, r"index\.json is nested"),
    Case("tokconfig-deep", write("tokenizer_config.json", DEEP), hf.ConfigError, "nested"),
    Case("sbert-deep", write("sentence_bert_config.json", DEEP), hf.ConfigError, "nested"),
    Case("special-deep", write("special_tokens_map.json", DEEP), hf.ConfigError, "nested", "open"),
    Case("tokenizer-deep", write("tokenizer.json", DEEP), hf.TokenizerError, "nested", "open"),
    Case("config-70-deep", write("config.json", "[" * 70 + "]" * 70), hf.ConfigError, "nested"),
    # config.json: not JSON, wrong encodings, wrong shapes of data
    Case("config-empty", write("config.json", b""), hf.ConfigError, "not readable JSON"),
    Case("config-list", write("config.json", "[1, 2]"), hf.ConfigError, "not a JSON object"),
    Case("config-null", write("config.json", "null"), hf.ConfigError, "not a JSON object"),
    Case("config-number", write("config.json", "5"), hf.ConfigError, "not a JSON object"),
    Case(
        "config-latin1",
        write("config.json", '{"n": "caf\xe9"}'.encode("latin-1")),
        hf.ConfigError,
        "not UTF-8",
    ),  # fmt: skip
    Case(
        "config-utf16",
        write("config.json", '{"model_type": "bert"}'.encode("utf-16")),
        hf.ConfigError,
        "not UTF-8",
    ),  # fmt: skip
    Case("config-bom", write("config.json", b"\xef\xbb\xbf{}"), hf.ConfigError, "not readable"),
    Case(
        "config-twice",
        write("config.json", '{"model_type": "bert", "model_type": "gpt2"}'),
        hf.ConfigError,
        "'model_type' is written twice",
    ),  # fmt: skip
    Case(
        "config-2mb",
        write("config.json", "{}" + " " * (2 << 20)),
        hf.TooLargeError,
        "bytes; at most",
    ),  # fmt: skip
    Case("no-model-type", edit_config(model_type=None), hf.UnknownFamilyError, "model_type=None"),
    Case("model-type-list", edit_config(model_type=["bert"]), hf.UnknownFamilyError, "model_type"),
    Case(
        "model-type-huge",
        edit_config(model_type="x" * 500_000),
        hf.UnknownFamilyError,
        "model_type='xxx",
    ),  # fmt: skip
    Case("heads-string", edit_config(num_attention_heads="4"), hf.ConfigError, "config"),
    Case("hidden-float", edit_config(hidden_size=32.5), hf.ConfigError, "config"),
    Case("hidden-negative", edit_config(hidden_size=-32), hf.PretrainedError, "config"),
    Case("hidden-bool", edit_config(hidden_size=True), hf.PretrainedError, "config"),
    Case("layers-huge", edit_config(num_hidden_layers=10**30), hf.TooLargeError, "config"),
    Case("heads-5", edit_config(num_attention_heads=5), hf.ConfigError, "config"),
    Case("vocab-zero", edit_config(vocab_size=0), hf.PretrainedError, "config"),
    Case("eps-nan", bare_literal("layer_norm_eps", "NaN"), hf.ConfigError, "norm_eps"),
    Case("hidden-infinity", bare_literal("hidden_size", "Infinity"), hf.ConfigError, "config"),
    Case(
        "remote-code",
        edit_config(auto_map={"AutoModel": "x.Model"}),
        hf.UnsafeFileError,
        "auto_map",
    ),  # fmt: skip
    Case(
        "remote-tokenizer",
        write("tokenizer_config.json", '{"auto_map": {"a": "b"}}'),
        hf.UnsafeFileError,
        "auto_map",
        "open",
    ),  # fmt: skip
    # the files themselves
    Case("config-folder", config_is_a_folder, hf.MissingFileError, "no config.json"),
    Case("config-fifo", fifo, hf.UnsafeFileError, "not a regular file"),
    Case("link-loop", link_loop, hf.UnsafeFileError, "link to nothing"),
    Case("python-file", write("modeling.py", "import os"), hf.UnsafeFileError, "holds code"),
    Case("nested-code", write("a/b/hook.so", b"\x7fELF"), hf.UnsafeFileError, "holds code"),
    Case(
        "pickle-only",
        lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"),
        hf.UnsafeFileError,
        "pickle",
    ),  # fmt: skip
    Case("300-files", many_files(300), hf.TooLargeError, "more than 256 files"),
    Case("3000-folders-deep", deep_folders(3000), hf.TooLargeError, "nested more than 8"),
    Case("not-utf8-name", not_utf8_file_name, hf.UnsafeFileError, r"not UTF-8 text"),
    # the weights
    Case("weights-empty", write("model.safetensors", b""), hf.WeightsError, "not a readable"),
    Case(
        "weights-garbage",
        write("model.safetensors", os.urandom(4096)),
        hf.WeightsError,
        "not a readable",
    ),  # fmt: skip
    Case("header-huge", huge_header, hf.WeightsError, "not a readable"),
    Case("header-deep", deep_header, hf.WeightsError, "not a readable"),
    Case("weights-truncated", truncated_weights, hf.WeightsError, "not a readable"),
    Case(
        "weights-bigger",
        write("model.safetensors", b"\0" * (40 << 20)),
        hf.TooLargeError,
        "bytes; a model of this config",
    ),  # fmt: skip
    Case("tensor-missing", edit_tensors(drop_tensor), hf.WeightsError, "missing"),
    Case("tensor-unexpected", edit_tensors(add_tensor), hf.WeightsError, "unexpected"),
    Case("tensor-shape", edit_tensors(wrong_shape), hf.WeightsError, "has shape"),
    Case("tensor-int", edit_tensors(int_tensor), hf.WeightsError, "int64", "open"),
    Case("tensor-nan", edit_tensors(set_value(float("nan"))), hf.WeightsError, "NaN", "open"),
    Case("tensor-inf", edit_tensors(set_value(float("inf"))), hf.WeightsError, "inf", "open"),
    Case("index-not-map", sharded({"weight_map": ["x"]}), hf.WeightsError, "no weight_map"),
    Case(
        "index-outside",
        sharded({"weight_map": {"a": "../x.safetensors"}}),
        hf.UnsafeFileError,
        "outside the folder",
    ),  # fmt: skip
    Case(
        "index-missing-shard",
        sharded({"weight_map": {"a": "gone.safetensors"}}),
        hf.MissingFileError,
        "not in the folder",
    ),  # fmt: skip
    # the tokenizer
    Case("vocab-empty", write("vocab.txt", b""), hf.TokenizerError, r"no \[UNK\]", "open"),
    Case(
        "vocab-binary",
        write("vocab.txt", b"\xff\xfe\x00garbage"),
        hf.TokenizerError,
        "not readable text",
        "open",
    ),  # fmt: skip
    Case(
        "tokenizer-garbage",
        write("tokenizer.json", '{"model": 5}'),
        hf.TokenizerError,
        "cannot be read",
        "open",
    ),  # fmt: skip
    Case("vocab-bigger", bigger_vocabulary, hf.TokenizerError, "pieces, the model only", "open"),
    Case(
        "no-tokenizer", lambda f: (f / "vocab.txt").unlink(), hf.MissingFileError, "no tokenizer"
    ),  # fmt: skip
]


GOOD = ("good-bert", "good-ünï-名")


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("good") / "bert"
    _build("bert", folder)
    return folder


@pytest.fixture(scope="module")
def corpus(good, tmp_path_factory):
    """The server's folder: every hostile case and the good models side by side."""
    root = tmp_path_factory.mktemp("hostile_root")
    try:
        for case in FOLDERS:
            shutil.copytree(good, root / case.name)
            case.make(root / case.name)
        for name in (*GOOD, "good-\udcff-name"):  # the last one's name is not UTF-8 on disk
            shutil.copytree(good, root / name)  # written with the byte 0xff (os.fsencode)
        yield root
    finally:  # always: pytest's own clean-up of old temporary folders recurses per level
        if (root / "3000-folders-deep").exists():
            remove_deep(root / "3000-folders-deep")


def test_the_corpus_is_large_and_names_each_case_once():
    names = [c.name for c in FOLDERS] + [c.name for c in ZIPS]
    assert len(FOLDERS) >= 40 and len(ZIPS) >= 12
    assert len(set(names)) == len(names)
    assert {c.stage for c in FOLDERS} == {"list", "open"}


def check(error: BaseException, case: Case) -> None:
    message = str(error)
    assert isinstance(error, case.error), (case.name, type(error), message)
    assert re.search(case.says, message), (case.name, message)
    assert message == hf_files.shown(message), "a message a page cannot encode"
    assert len(message) <= hf_files.MAX_MESSAGE, (case.name, len(message))
    said_in_chinese(error, case.name)


def said_in_chinese(error: hf.PretrainedError, name: str) -> None:
    """A Chinese page says the refusal in Chinese: the catalogue's sentence for its code, with
    the same values, as encodable and as short as the English."""
    zh = error.text("zh")
    assert re.search(r"[\u4e00-\u9fff]", zh) and zh != str(error), (name, zh)
    assert "⟦" not in zh, (name, zh)  # a code the catalogue lacks
    assert zh == hf_files.shown(zh) and len(zh) <= hf_files.MAX_MESSAGE, (name, zh)


@pytest.mark.parametrize("case", FOLDERS, ids=lambda c: c.name)
def test_each_hostile_folder_is_refused_naming_its_problem(corpus, case):
    with pytest.raises(hf.PretrainedError) as opened:
        hf.open_folder(corpus / case.name)
    check(opened.value, case)
    if case.stage == "list":
        with pytest.raises(hf.PretrainedError) as described:
            hf.describe_folder(corpus / case.name)
        check(described.value, case)
    else:
        assert hf.describe_folder(corpus / case.name).family == "BERT"  # listed; refused on open


def test_the_listing_shows_every_good_model_beside_every_hostile_one(corpus):
    listed = {item.name: item for item in hf.list_folder(corpus)}
    for name in GOOD:
        shown = hf_files.shown(name)
        assert isinstance(listed[shown], hf.FolderInfo), listed[shown]
        assert hf.open_folder(listed[shown].path).family == "BERT"
    bad_name = listed["good-\\xff-name"]  # written so a page can show it, and refused
    assert isinstance(bad_name, hf.Refused) and "not UTF-8" in bad_name.reason
    for case in FOLDERS:
        item = listed[case.name]
        if case.stage == "list":
            assert isinstance(item, hf.Refused), case.name
            assert re.search(case.says, item.reason), (case.name, item.reason)
            said_in_chinese(item.error, case.name)  # the listing keeps the code, not the English
        else:
            assert isinstance(item, hf.FolderInfo), (case.name, item)


def test_every_kind_of_refusal_is_met_in_the_corpus():
    """Each PretrainedError the package exports is what some hostile case gets (so none is
    dead), and the last resort, UnreadableError, is what any other failure becomes."""
    kinds = {
        obj
        for name in hf.__all__
        if isinstance(obj := getattr(hf, name), type) and issubclass(obj, hf.PretrainedError)
    }
    met = {c.error for c in FOLDERS} | {c.error for c in ZIPS} | {hf.UnreadableError}
    assert kinds - {hf.PretrainedError} <= met, kinds - met


def test_an_error_no_check_names_stays_in_its_folder(corpus, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a reader met a value nobody expected")

    monkeypatch.setattr(hf.folder, "plan_weights", broken)
    with pytest.raises(hf.UnreadableError, match="KeyError"):
        hf.describe_folder(corpus / "good-bert")
    listed = {item.name: item for item in hf.list_folder(corpus)}
    assert isinstance(listed["good-bert"], hf.Refused)
    assert "cannot be read (KeyError" in listed["good-bert"].reason


# ---- zips -----------------------------------------------------------------------------------


def zip_of(entries: list[tuple[str, bytes]], **infos) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            for key, value in infos.get(name, {}).items():
                setattr(info, key, value)
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def zip_folder(folder: Path, extra: list[tuple[str, bytes]] = (), deep_config=False) -> bytes:
    entries = [
        (
            f"m/{p.name}",
            DEEP.encode() if deep_config and p.name == "config.json" else p.read_bytes(),
        )
        for p in sorted(folder.iterdir())
        if p.is_file()
    ]
    return zip_of(entries + list(extra))


@dataclass(frozen=True)
class ZipCase:
    name: str
    make: Callable[[Path], bytes]  # the zip's bytes, from the good folder
    error: type[hf.PretrainedError]
    says: str


LINK = {"m/link": {"external_attr": 0o120777 << 16}}
ZIPS = [
    ZipCase(
        "file-and-folder",
        lambda g: zip_folder(g, [("m/config.json/x", b"{}")]),
        hf.ZipRefusedError,
        "'m/config.json' both as a file and as the folder",
    ),  # fmt: skip
    ZipCase(
        "folder-then-file",
        lambda g: zip_of([("m/a/b", b"1"), ("m/a", b"2")]),
        hf.ZipRefusedError,
        "both as a file and as the folder",
    ),  # fmt: skip
    ZipCase(
        "name-too-long",
        lambda g: zip_folder(g, [("m/" + "n" * 300, b"1")]),
        hf.ZipRefusedError,
        "longer than 255 bytes",
    ),  # fmt: skip
    ZipCase(
        "path-too-long",
        lambda g: zip_of([("m/" + "/".join(["a" * 200] * 6), b"1")]),
        hf.ZipRefusedError,
        "longer than 1024 bytes",
    ),  # fmt: skip
    ZipCase(
        "zip-3000-folders-deep",
        lambda g: zip_of([("d/" * 3000 + "x", b"1")]),
        hf.ZipRefusedError,
        "longer than|nested more than",
    ),  # fmt: skip
    ZipCase(
        "9-folders-deep",
        lambda g: zip_of([("d/" * 9 + "x", b"1")]),
        hf.ZipRefusedError,
        "nested more than 8",
    ),  # fmt: skip
    ZipCase("traversal", lambda g: zip_of([("m/../../x", b"1")]), hf.ZipRefusedError, r"'\.\.'"),
    ZipCase("absolute", lambda g: zip_of([("/etc/x", b"1")]), hf.ZipRefusedError, "absolute"),
    ZipCase("backslash", lambda g: zip_of([("m\\..\\x", b"1")]), hf.ZipRefusedError, "backslash"),
    ZipCase(
        "link",
        lambda g: zip_of([("m/link", b"/etc/passwd")], **LINK),
        hf.ZipRefusedError,
        "is a link",
    ),  # fmt: skip
    ZipCase(
        "twice-by-case",
        lambda g: zip_of([("m/A.json", b"1"), ("m/a.json", b"2")]),
        hf.ZipRefusedError,
        "twice",
    ),  # fmt: skip
    ZipCase(
        "bomb", lambda g: zip_of([("m/zeros", b"\0" * (8 << 20))]), hf.ZipRefusedError, "zip bomb"
    ),  # fmt: skip
    ZipCase("not-a-zip", lambda g: b"PK\x03\x04 not really", hf.ZipRefusedError, "not a readable"),
    ZipCase("truncated", lambda g: zip_folder(g)[:-100], hf.ZipRefusedError, "not a readable"),
    ZipCase("empty-zip", lambda g: zip_of([]), hf.MissingFileError, "no model.safetensors"),
    ZipCase(
        "same-name-twice",
        lambda g: zip_folder(g, [("m/config.json", b"{}")]),
        hf.ZipRefusedError,
        "twice",
    ),  # fmt: skip
    ZipCase(
        "deep-config-inside",
        lambda g: zip_folder(g, [], deep_config=True),
        hf.ConfigError,
        r"config\.json is nested",
    ),  # fmt: skip
]


@pytest.mark.filterwarnings("ignore:Duplicate name")  # same-name-twice writes one on purpose
@pytest.mark.parametrize("case", ZIPS, ids=lambda c: c.name)
def test_each_hostile_zip_is_refused_and_leaves_nothing_on_disk(good, case, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the unzip writes
    with pytest.raises(hf.PretrainedError) as refused:
        hf.open_zip(case.make(good), max_bytes=64 << 20)
    message = str(refused.value)
    assert isinstance(refused.value, case.error), (case.name, message)
    assert re.search(case.says, message), (case.name, message)
    assert len(message) <= hf_files.MAX_MESSAGE
    said_in_chinese(refused.value, case.name)
    assert list(scratch.iterdir()) == [], "the unzip left files behind"


def test_a_good_zip_still_opens(good, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert hf.open_zip(zip_folder(good)).family == "BERT"
    assert list(tmp_path.iterdir()) == []
    assert zipped.MAX_DEPTH == hf_files.MAX_DEPTH


# ---- the app and a real server --------------------------------------------------------------


@pytest.mark.usefixtures("fresh_app")
def test_the_app_lists_good_models_and_says_why_for_each_hostile_one(corpus, monkeypatch):
    from tests.conftest import start_app

    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(corpus))
    at = start_app()
    options = at.selectbox(key="model").options
    assert "good-bert (BERT)" in options and "good-ünï-名 (BERT)" in options, options
    warnings = "\n".join(w.value.replace("\\", "") for w in at.warning)
    for case in FOLDERS:
        if case.stage == "list":
            assert case.name in warnings, case.name
            assert not any(o.startswith(f"{case.name} (") for o in options)
    opened = start_app(model="folder:tensor-nan")  # listed, refused when opened: said, not raised
    assert any("NaN" in e.value for e in opened.error), [e.value for e in opened.error]
    good_one = start_app(model="folder:good-bert")
    assert not good_one.error


def test_a_real_server_serves_pages_and_stays_healthy_beside_the_corpus(corpus, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, TFVIZ_USER_MODELS=str(tmp_path / "user_models"))
    env[settings.PRETRAINED_DIR_ENV] = str(corpus)
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
               f"--server.port={port}", "--server.headless=true"]  # fmt: skip
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_healthy(url, proc, 90), (tmp_path / "server.log").read_text()[-3000:]
        for _ in range(2):  # the first page lists the folder; the second reads the cached list
            stats = Stats()
            asyncio.run(one_page_load(f"ws://127.0.0.1:{port}/_stcore/stream", 90, stats))
            assert stats.page_loads and not stats.errors, stats.errors
        time.sleep(0.5)
        assert healthy(url) and proc.poll() is None
    finally:
        stop_server(proc)
    assert "Traceback" not in (tmp_path / "server.log").read_text()
