"""Uploads (issue "Classroom-ready"): size-limited, validated before use, visible to one session."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from streamlit.testing.v1 import AppTest

from tests.conftest import start_app
from tests.support import plain
from tfviz import CheckpointError
from tfviz.serve import checks
from tfviz.ui.i18n import translate

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
SORT = (ROOT / "models" / "sort.safetensors").read_bytes()
REVERSE = (ROOT / "models" / "reverse.safetensors").read_bytes()
MIME = "application/octet-stream"


pytestmark = pytest.mark.usefixtures("fresh_app")
start = start_app


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="upload").set_value((name, data, MIME)).run()
    assert not at.exception, at.exception
    return at


def checkpoint_parts(data: bytes) -> tuple[dict, dict]:
    """(tensors, tfviz metadata) of a checkpoint file."""
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(json.loads(data[8 : 8 + n])["__metadata__"]["tfviz"])
    return st_load(data), meta


def rebuild(tensors: dict, meta: dict | None) -> bytes:
    return st_save(tensors, metadata=None if meta is None else {"tfviz": json.dumps(meta)})


def wrong_shape_checkpoint() -> bytes:
    tensors, meta = checkpoint_parts(SORT)
    name = next(k for k in tensors if k.endswith("W_o.weight"))
    tensors[name] = tensors[name][:, :-1].contiguous()
    return rebuild(tensors, meta)


def with_nan() -> bytes:
    tensors, meta = checkpoint_parts(SORT)
    name = next(k for k in tensors if k.endswith("W_o.weight"))
    tensors[name] = tensors[name].clone()
    tensors[name][0, 0] = float("nan")
    return rebuild(tensors, meta)


def config_change(**changes) -> bytes:
    tensors, meta = checkpoint_parts(SORT)
    meta["config"].update(changes)
    return rebuild(tensors, meta)


def torch_saved() -> bytes:
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, buffer)
    return buffer.getvalue()


BAD_FILES = {
    "renamed-pickle": (lambda: pickle.dumps({"weights": [1, 2, 3]}), "pickle"),
    "torch-save-zip": (torch_saved, "zip archive"),
    "truncated": (lambda: SORT[: len(SORT) // 2], "truncated"),
    "empty": (lambda: b"", "too short"),
    "garbage": (lambda: b"hello, I am a model" * 10, "not a safetensors file"),
    "no-metadata": (lambda: rebuild(checkpoint_parts(SORT)[0], None), "no tfviz metadata"),
    "unknown-task": (
        lambda: rebuild(checkpoint_parts(SORT)[0], {**checkpoint_parts(SORT)[1], "task": "x"}),
        "task",
    ),
    "wrong-shape": (wrong_shape_checkpoint, "has shape"),
    "extra-tensor": (
        lambda: rebuild(
            {**checkpoint_parts(SORT)[0], "evil": torch.zeros(1)}, checkpoint_parts(SORT)[1]
        ),
        "unexpected tensors: evil",
    ),
    "nan": (with_nan, "NaN"),
    "over-config-limit": (lambda: config_change(d_model=4096), "d_model must be between"),
    # Within every config limit, but 50 M parameters: refused before any model is built.
    "over-parameter-budget": (
        lambda: config_change(d_model=1024, n_heads=8, d_ff=4096, n_layers=4),
        "parameters",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_gets_a_clear_error_and_changes_nothing(case, tmp_path):
    make, expected = BAD_FILES[case]
    at = start()
    before = at.selectbox(key="model").options
    upload(at, "model.safetensors", make())
    assert len(at.error) == 1, [e.value for e in at.error]
    message = plain(at.error[0].value)
    assert message.startswith("model.safetensors was not loaded: ")
    assert expected in message
    assert "Traceback" not in message and len(message) < 400
    assert at.selectbox(key="model").options == before  # not offered
    assert at.selectbox(key="model").value == "bundled:reverse"
    assert at.code and "right answer" in at.code[0].value  # the page still works
    assert not (tmp_path / "user_models").exists()


def test_the_parameter_budget_is_checked_before_a_model_is_built(monkeypatch):
    built = []
    monkeypatch.setattr(
        "tfviz.training.checkpoint.Transformer", lambda config: built.append(config)
    )
    data = config_change(d_model=1024, n_heads=8, d_ff=4096, n_layers=12)
    with pytest.raises(CheckpointError, match=r"has [\d,]+ parameters; .* at most 5,000,000"):
        checks.load_upload(data, max_bytes=20 * 2**20)
    assert built == []  # a 300 kB file cannot make the server allocate 150 M parameters


def test_load_upload_refuses_a_real_model_over_a_smaller_budget():
    model, meta = checks.load_upload(SORT, max_bytes=len(SORT))
    n = sum(p.numel() for p in model.parameters())
    assert meta.config.n_params == n
    with pytest.raises(CheckpointError, match=f"has {n:,} parameters"):
        checks.load_upload(SORT, max_bytes=len(SORT), max_params=n - 1)
    with pytest.raises(CheckpointError, match="the limit is"):
        checks.load_upload(SORT, max_bytes=len(SORT) - 1)


def test_a_good_upload_is_picked_and_shown_with_its_name_literally(tmp_path):
    at = start()
    name = "<img src=x onerror=alert(1)> **sort** [x](y).safetensors"
    upload(at, name, SORT)
    assert not at.error
    key = "upload:" + hashlib.sha256(SORT).hexdigest()
    picker = at.selectbox(key="model")
    assert picker.value == key
    assert "<img src=x onerror=alert(1)> **sort** [x](y) (uploaded)" in picker.options
    success = at.success[0].value
    assert plain(success).startswith(f"Loaded {name}: a sort model")
    assert not re.search(r"(?<!\\)[<>*\[\]]", success)  # every markup character escaped
    assert "1 1 2 3 4 5 6 9" in at.code[0].value  # the uploaded sort model answers
    at.text_input(key="sequence").set_value("97531").run()
    assert not at.exception and "1 3 5 7 9" in at.code[0].value
    assert not (tmp_path / "user_models").exists()  # never written to the shared folder


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_upload_s_link_says_truthfully_that_others_get_the_default_model(lang):
    at = start(lang=lang)
    captions = [c.value for c in at.caption]
    promise = [translate(lang, f"share.link.{k}") for k in ("caption", "relative")]
    assert any(c in captions for c in promise)  # a bundled model: the link opens it
    upload(at, "mine.safetensors", SORT)
    captions = [c.value for c in at.caption]
    assert not any(c in captions for c in promise)  # not "whoever opens it sees this model"
    truthful = [translate(lang, f"share.link.{k}_upload") for k in ("caption", "relative")]
    assert any(c in captions for c in truthful), captions
    # And it is true: the link, opened in another session, gives the default model and a note.
    link = [c.value for c in at.code if c.value.startswith("?")][0]
    other = AppTest.from_file(APP, default_timeout=60)
    for key, values in parse_qs(link[1:]).items():
        other.query_params[key] = values[0]
    other.run()
    assert not other.exception
    assert other.selectbox(key="model").value == "bundled:reverse"
    notes = [plain(w.value) for w in other.warning]
    assert notes[0] == translate(lang, "share.notice.upload"), notes


def test_an_upload_is_visible_only_in_the_session_that_uploaded_it(tmp_path):
    mine, theirs = start(), start()
    upload(mine, "mine.safetensors", SORT)
    theirs.run()
    assert not theirs.exception
    assert not [k for k in theirs.selectbox(key="model").options if "uploaded" in k]
    assert theirs.selectbox(key="model").value == "bundled:reverse"
    fresh_session = start()
    assert "mine (uploaded)" not in fresh_session.selectbox(key="model").options
    assert "mine (uploaded)" in mine.selectbox(key="model").options
    assert not (tmp_path / "user_models").exists()


def test_an_upload_stays_after_the_uploader_is_cleared_and_a_bad_one_does_not_replace_it():
    at = start()
    upload(at, "mine.safetensors", SORT)
    key = at.selectbox(key="model").value
    upload(at, "bad.safetensors", b"\x80\x04" + b"junk" * 10)
    assert "pickle" in plain(at.error[0].value)
    assert at.selectbox(key="model").value == key  # still showing the good upload
    at.file_uploader(key="upload").set_value(None).run()
    assert not at.exception and not at.error and not at.success
    assert at.selectbox(key="model").value == key


def test_a_session_keeps_at_most_three_uploads():
    at = start()
    files = [REVERSE, SORT] + [config_free_copy(i) for i in range(2)]
    for i, data in enumerate(files):
        upload(at, f"m{i}.safetensors", data)
        assert not at.error, at.error[0].value
    uploaded = [o for o in at.selectbox(key="model").options if o.endswith("(uploaded)")]
    assert uploaded == ["m1 (uploaded)", "m2 (uploaded)", "m3 (uploaded)"]  # the oldest went


def config_free_copy(i: int) -> bytes:
    """The sort model with a different training record: other bytes, so another digest."""
    tensors, meta = checkpoint_parts(SORT)
    meta["record"]["copy"] = i
    return rebuild(tensors, meta)


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setenv("TFVIZ_MAX_UPLOAD_MB", "1")
    at = start()
    assert at.file_uploader(key="upload").proto.max_upload_size_mb == 1
    upload(at, "big.safetensors", SORT + b"\0" * (2**20))
    message = plain(at.error[0].value)
    assert "big.safetensors was not loaded: the file is 1.3 MB; uploads may be at most 1 MB" in (
        message
    )


def test_the_default_limit_is_20_mb():
    at = start()
    assert at.file_uploader(key="upload").proto.max_upload_size_mb == 20
    assert at.file_uploader(key="upload").allowed_type == [".safetensors", ".zip"]


@pytest.mark.parametrize("setting", ["lots", "0", "-3", "1.5", "١٢"])
def test_a_bad_upload_limit_setting_is_reported(monkeypatch, setting):
    monkeypatch.setenv("TFVIZ_MAX_UPLOAD_MB", setting)
    at = start()
    assert not at.file_uploader
    assert "TFVIZ_MAX_UPLOAD_MB must be a whole number" in plain(at.error[0].value)
    assert at.code  # the rest of the page works


def test_odd_file_names_are_cut_and_shown_literally():
    at = start()
    upload(at, "x" * 10_000 + ".safetensors", SORT)
    assert len(plain(at.success[0].value)) < 300
    assert "x" * 57 + "... (uploaded)" in at.selectbox(key="model").options
    # (A name with a NUL byte is refused by Streamlit itself before the script runs.)
    upload(at, "a\tb\n# c `d` $e$.safetensors", REVERSE)
    assert not at.exception and not at.error
    assert plain(at.success[0].value).startswith("Loaded a\tb\n# c `d` $e$.safetensors: ")
    assert "a\tb\n# c `d` $e$ (uploaded)" in at.selectbox(key="model").options
    upload(at, ".safetensors", b"junk" * 10)
    assert plain(at.error[0].value).startswith(".safetensors was not loaded: not a safetensors")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_upload_label_names_every_kind_of_file_the_uploader_takes(lang):
    from tfviz.ui.i18n import translate
    from tfviz.ui.uploads import UPLOAD_TYPES

    label = translate(lang, "uploads.label")
    assert len(UPLOAD_TYPES) > 1
    for kind in UPLOAD_TYPES:
        assert f".{kind}" in label, (kind, label)
    # A zip is a model folder: the label says so, not only the extension.
    assert {"en": "folder", "zh": "文件夹"}[lang] in label, label
