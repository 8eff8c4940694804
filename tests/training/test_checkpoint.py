"""Checkpoints round-trip exactly; every kind of bad file gets a CheckpointError saying why."""

from __future__ import annotations

import json
import pickle
import struct

import pytest
import torch
from safetensors.torch import save as st_save

from tests.conftest import make_model
from tfviz import CheckpointError, get_task, load_checkpoint, save_checkpoint
from tfviz.core.model import Encoder
from tfviz.training.checkpoint import FORMAT, write_atomic


@pytest.fixture
def saved(tmp_path):
    task = get_task("reverse")
    model = make_model(vocab_size=task.vocab_size, n_out=task.n_out, max_len=task.positions)
    path = save_checkpoint(
        tmp_path / "m.safetensors",
        model,
        "reverse",
        {"loss": [float(i) for i in range(1200)], "steps": 1200},
        {"token_accuracy": 0.5},
    )
    return model, path


def _with_meta(model, meta: dict, tensors=None) -> bytes:
    tensors = tensors if tensors is not None else dict(model.state_dict())
    return st_save(tensors, metadata={"tfviz": json.dumps(meta)})


def _meta(model, **changes) -> dict:
    meta = {
        "format": FORMAT,
        "task": "reverse",
        "config": model.config.to_dict(),
        "record": {},
        "metrics": {},
    }
    meta.update(changes)
    return meta


def test_roundtrip_is_exact_and_metadata_survives(saved):
    model, path = saved
    loaded, meta = load_checkpoint(path)
    assert meta.task == "reverse" and meta.config == model.config
    assert meta.metrics == {"token_accuracy": 0.5}
    assert len(meta.record["loss"]) <= 500 and meta.record["loss_every"] == 3
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k])
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    assert load_checkpoint(path.read_bytes())[1].task == "reverse"  # from bytes (uploads)


def test_write_is_atomic_and_leaves_no_temporary_files(saved, tmp_path):
    _, path = saved
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


def test_failed_write_keeps_the_previous_file(saved, monkeypatch):
    model, path = saved
    before = path.read_bytes()

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr("os.fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, make_model(seed=9, vocab_size=12, n_out=10, max_len=17), "reverse")
    assert path.read_bytes() == before
    assert load_checkpoint(path)[1].task == "reverse"
    assert [p.name for p in path.parent.iterdir()] == ["m.safetensors"]


def test_pickle_renamed_safetensors_is_refused_without_unpickling(tmp_path, monkeypatch, saved):
    model, _ = saved
    zipped = tmp_path / "torch.safetensors"
    torch.save(model.state_dict(), zipped)
    raw = tmp_path / "raw.safetensors"
    raw.write_bytes(pickle.dumps({"a": 1}))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    with pytest.raises(CheckpointError, match="zip archive .* never unpickles"):
        load_checkpoint(zipped)
    with pytest.raises(CheckpointError, match="Python pickle"):
        load_checkpoint(raw)


@pytest.mark.parametrize(
    "cut, message",
    [(4, "too short"), (60, "truncated: the header needs"), (-100, "truncated: tensor data needs")],
)
def test_truncated_file_is_refused(saved, cut, message):
    data = saved[1].read_bytes()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(data[:cut])


def test_random_bytes_and_missing_file_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load_checkpoint(b"hello, this is certainly not a model file")
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_checkpoint(tmp_path / "nope.safetensors")


def test_bad_json_header_is_refused():
    body = b'{"a": '
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(struct.pack("<Q", len(body)) + body + b"0" * 8)


def test_missing_metadata_is_refused(saved):
    model, _ = saved
    with pytest.raises(CheckpointError, match="no tfviz metadata"):
        load_checkpoint(st_save(dict(model.state_dict())))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"task": "addition"}, "unknown task 'addition'"),
        ({"format": "other/9"}, "unsupported checkpoint format"),
        ({"config": {"vocab_size": 12}}, "invalid model config"),
        ({"task": "sum"}, "invalid model config.*task 'sum' needs"),
    ],
)
def test_bad_metadata_is_refused(saved, changes, message):
    model, _ = saved
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(_with_meta(model, _meta(model, **changes)))


def test_missing_extra_and_misshaped_tensors_are_refused(saved):
    model, _ = saved
    sd = dict(model.state_dict())
    missing = {k: v for k, v in sd.items() if k != "head.weight"}
    with pytest.raises(CheckpointError, match="missing tensors: head.weight"):
        load_checkpoint(_with_meta(model, _meta(model), missing))
    with pytest.raises(CheckpointError, match="unexpected tensors: spy"):
        load_checkpoint(_with_meta(model, _meta(model), {**sd, "spy": torch.zeros(2)}))
    bad_shape = {**sd, "head.weight": torch.zeros(3, 3)}
    with pytest.raises(CheckpointError, match=r"head.weight has shape \(3, 3\)"):
        load_checkpoint(_with_meta(model, _meta(model), bad_shape))
    nan = {**sd, "head.bias": torch.full_like(sd["head.bias"], float("nan"))}
    with pytest.raises(CheckpointError, match="NaN"):
        load_checkpoint(_with_meta(model, _meta(model), nan))


def test_over_large_file_and_over_large_model_are_refused(saved):
    model, path = saved
    with pytest.raises(CheckpointError, match="limit is"):
        load_checkpoint(path, max_bytes=1000)
    huge = {**model.config.to_dict(), "d_model": 8192}
    with pytest.raises(CheckpointError, match="d_model must be between"):
        load_checkpoint(_with_meta(model, _meta(model, config=huge)))


def test_two_writers_of_one_name_leave_a_loadable_file(tmp_path):
    import threading

    task = get_task("reverse")
    models = [
        make_model(seed=s, vocab_size=task.vocab_size, n_out=task.n_out, max_len=task.positions)
        for s in range(4)
    ]
    path = tmp_path / "same.safetensors"
    threads = [
        threading.Thread(target=save_checkpoint, args=(path, m, "reverse"))
        for m in models
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    loaded, _ = load_checkpoint(path)
    assert any(torch.equal(loaded.head.weight, m.head.weight) for m in models)
    assert [p.name for p in tmp_path.iterdir()] == ["same.safetensors"]


def test_write_atomic_creates_folders(tmp_path):
    write_atomic(tmp_path / "a" / "b.bin", b"xyz")
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"xyz"


def test_huge_model_named_in_a_small_file_is_refused_before_it_is_built(saved, monkeypatch):
    model, _ = saved
    huge = {**model.config.to_dict(), "d_model": 1024, "d_ff": 4096, "n_layers": 12}
    monkeypatch.setattr(
        "tfviz.training.checkpoint.Transformer", lambda cfg: pytest.fail("built the model")
    )
    with pytest.raises(
        CheckpointError, match=r"has 151,\d{3},\d{3} parameters; .* at most 5,000,000"
    ):
        load_checkpoint(_with_meta(model, _meta(model, config=huge)))


def test_a_save_that_must_not_overwrite_keeps_the_existing_file(tmp_path):
    from tfviz.training.checkpoint import write_atomic

    target = tmp_path / "taken.safetensors"
    target.write_bytes(b"first")
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second", overwrite=False)
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["taken.safetensors"]  # no temp file left
    write_atomic(tmp_path / "free.safetensors", b"new", overwrite=False)
    assert (tmp_path / "free.safetensors").read_bytes() == b"new"


_RACE = """
import sys
from pathlib import Path
from tfviz.training.checkpoint import write_atomic
folder, me, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
won = 0
for i in range(rounds):
    go = folder / f"go{i}"
    while not go.exists():  # both writers start each round together
        pass
    try:
        write_atomic(folder / f"model{i}.safetensors", me.encode() * 1000, overwrite=False)
        won += 1
    except FileExistsError:
        pass
print(won)
"""


def test_two_processes_saving_one_new_name_never_both_win(tmp_path):
    import subprocess
    import sys

    rounds = 30
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE, str(tmp_path), name, str(rounds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for i in range(rounds):
        (tmp_path / f"go{i}").touch()
    wins = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(wins) == rounds  # exactly one writer per name
    for i in range(rounds):
        data = (tmp_path / f"model{i}.safetensors").read_bytes()
        assert data in (b"a" * 1000, b"b" * 1000)  # whole, one writer's
    assert not list(tmp_path.glob("*.tmp"))


# ---- a causal toy model (the Train form's box) ------------------------------------------------


def _causal(task_name: str):
    task = get_task(task_name)
    config = task.model_config(d_model=16, n_heads=2, n_layers=1, d_ff=32, causal=True)
    torch.manual_seed(0)
    return task, Encoder(config).eval()


def test_a_causal_model_round_trips_with_its_causal_config(tmp_path):
    task, model = _causal("balanced")
    assert model.config.causal and model.config.pool == "last"  # read at the last token
    path = save_checkpoint(tmp_path / "c.safetensors", model, "balanced", {"steps": 1}, {})
    loaded, meta = load_checkpoint(path)
    assert meta.config == model.config and meta.config.causal
    data = path.read_bytes()
    header = json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])
    stored = json.loads(header["__metadata__"]["tfviz"])["config"]  # the file's own metadata
    assert stored["causal"] is True and stored["pool"] == "last"
    ids, pad = task.encode_batch(["(())", "()(", ")"])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, pad).logits, model(ids, pad).logits)
        attn = loaded(ids, pad).trace.layers[0].attn
    assert not attn.triu(1).any()  # the reloaded model is causal too


def test_a_checkpoint_written_before_the_causal_field_loads_as_an_encoder(saved):
    model, _ = saved
    old = {k: v for k, v in model.config.to_dict().items() if k != "causal"}
    _, meta = load_checkpoint(_with_meta(model, _meta(model, config=old)))
    assert meta.config.causal is False and meta.config == model.config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"causal": False}, "task 'balanced' needs pool='first', the model has 'last'"),
        ({"pool": "first"}, "task 'balanced' needs pool='last', the model has 'first'"),
    ],
)
def test_a_pooled_task_s_pool_must_match_causal(changes, message):
    _, model = _causal("balanced")
    config = {**model.config.to_dict(), **changes}
    meta = {**_meta(model, config=config), "task": "balanced"}
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(_with_meta(model, meta))
