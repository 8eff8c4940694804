"""Sharded safetensors (model.safetensors.index.json and its shards, as save_pretrained writes a
large model) open like one model.safetensors, and an index that names a missing shard, a file
outside the folder or one tensor twice is refused before any tensor is read.

The tiny BERT of test_hf_encoders is saved again with a small max_shard_size so that it shards;
transformers is the oracle, as there.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from tests.hf.test_hf_encoders import TEXTS, TOL, _build  # skips without transformers (fails in CI)
from tfviz import hf
from tfviz.hf import files as hf_files

INDEX = hf_files.WEIGHTS_INDEX


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """(folder, transformers model) of a tiny BERT saved in shards of at most 20 kB."""
    folder = tmp_path_factory.mktemp("shards") / "bert"
    ref = _build("bert", folder)
    (folder / hf_files.WEIGHTS).unlink()
    ref.save_pretrained(folder, safe_serialization=True, max_shard_size="20KB")
    assert not (folder / hf_files.WEIGHTS).exists()  # sharded, not one file
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    index = json.loads((folder / INDEX).read_text())
    assert len(shards) > 1 and set(index["weight_map"].values()) == {p.name for p in shards}
    return folder, ref


@pytest.fixture
def copy(sharded, tmp_path):
    """A copy of the sharded folder to break."""
    dst = tmp_path / "bert"
    shutil.copytree(sharded[0], dst)
    return dst


def _index(folder: Path) -> dict:
    return json.loads((folder / INDEX).read_text())


def _write_index(folder: Path, data: dict) -> None:
    (folder / INDEX).write_text(json.dumps(data))


def test_a_sharded_folder_equals_transformers(sharded):
    folder, ref = sharded
    loaded = hf.open_folder(folder)
    batch = loaded.tokenizer.batch(TEXTS)
    with torch.no_grad():
        out = ref(
            input_ids=batch.ids,
            attention_mask=(~batch.pad_mask).long(),
            output_attentions=True,
            output_hidden_states=True,
        )
    trace = loaded.model(batch.ids, batch.pad_mask).trace
    for i, lt in enumerate(trace.layers):
        assert (lt.resid_out - out.hidden_states[i + 1]).abs().max() <= TOL
        assert (lt.attn - out.attentions[i]).abs().max() <= TOL
    logits = hf.masked_lm_logits(loaded.model, loaded.head, batch.ids, batch.pad_mask)
    assert (logits - out.logits).abs().max() <= TOL
    info = hf.describe_folder(folder)
    shards = folder.glob("model-*-of-*.safetensors")
    assert info.masked_lm and info.weights_bytes == sum(p.stat().st_size for p in shards)


def test_a_zipped_sharded_folder_opens_like_the_folder(sharded, tmp_path):
    folder, _ = sharded
    z = tmp_path / "m.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"model/{path.name}")
    loaded, want = hf.open_zip(z.read_bytes()), hf.open_folder(folder)
    batch = loaded.tokenizer.batch(TEXTS)
    torch.testing.assert_close(
        loaded.model(batch.ids, batch.pad_mask, trace=False).logits,
        want.model(batch.ids, batch.pad_mask, trace=False).logits,
        atol=0,
        rtol=0,
    )


def test_a_missing_shard_is_refused(copy):
    shard = _index(copy)["weight_map"]["bert.embeddings.word_embeddings.weight"]
    (copy / shard).unlink()
    with pytest.raises(hf.MissingFileError, match=f"names the shard {shard}, which is not"):
        hf.open_folder(copy)
    with pytest.raises(hf.MissingFileError, match="not in the folder"):
        hf.describe_folder(copy)


@pytest.mark.parametrize(
    "shard",
    ["../outside.safetensors", "sub/model.safetensors", "..\\outside.safetensors", "/etc/x"],
)
def test_a_shard_named_outside_the_folder_is_refused(copy, shard):
    (copy.parent / "outside.safetensors").write_bytes(
        (copy / next(copy.glob("model-*"))).read_bytes()
    )
    (copy / "sub").mkdir()
    shutil.copy(next(copy.glob("model-*")), copy / "sub" / "model.safetensors")
    data = _index(copy)
    data["weight_map"]["bert.embeddings.word_embeddings.weight"] = shard
    _write_index(copy, data)
    with pytest.raises(hf.UnsafeFileError, match="shard"):
        hf.open_folder(copy)


def test_a_shard_that_links_outside_the_folder_is_refused(copy, tmp_path):
    data = _index(copy)
    shard = data["weight_map"]["bert.embeddings.word_embeddings.weight"]
    outside = tmp_path / "elsewhere.safetensors"
    (copy / shard).rename(outside)
    (copy / shard).symlink_to(outside)  # a plain name in the index, a file elsewhere
    with pytest.raises(hf.UnsafeFileError, match="link to a file outside the folder"):
        hf.open_folder(copy)


def test_a_tensor_named_twice_is_refused(copy):
    text = (copy / INDEX).read_text()
    name = "bert.embeddings.word_embeddings.weight"
    shard = _index(copy)["weight_map"][name]
    # JSON keeps the last of two equal keys; the index must not be read that way.
    text = text.replace('"weight_map": {', f'"weight_map": {{"{name}": "{shard}", ', 1)
    (copy / INDEX).write_text(text)
    assert text.count(f'"{name}"') == 2
    with pytest.raises(
        hf.ConfigError, match="key 'bert.embeddings.word_embeddings.weight' is written twice"
    ):
        hf.open_folder(copy)


def test_a_tensor_in_two_shards_or_in_the_wrong_shard_is_refused(copy):
    data = _index(copy)
    name = "bert.embeddings.word_embeddings.weight"
    home = data["weight_map"][name]
    other = next(s for s in data["weight_map"].values() if s != home)
    data["weight_map"][name] = other  # the index says one shard, the headers another
    _write_index(copy, data)
    # Refused either way: the shard it names lacks it, or (when its own shard is still named
    # for other tensors) that shard holds a tensor the index puts elsewhere.
    said = f"(puts {name} in {other}, which lacks it|{home} holds {name})"
    with pytest.raises(hf.WeightsError, match=said):
        hf.open_folder(copy)
    # Both shards hold it (the index as saved): one name, two tensors.
    data["weight_map"][name] = home
    _write_index(copy, data)
    from safetensors.torch import load_file, save_file

    tensors = load_file(copy / other)
    tensors[name] = load_file(copy / home)[name]
    save_file(tensors, copy / other, metadata={"format": "pt"})
    with pytest.raises(hf.WeightsError, match=f"{name} is in two shards"):
        hf.open_folder(copy)


def test_shards_larger_in_total_than_the_config_are_refused_unread(copy):
    shards = sorted(copy.glob("model-*-of-*.safetensors"))
    for shard in shards:
        with open(shard, "r+b") as f:
            f.truncate(1 << 20)  # sparse: 1 MB each is within the limit, their total is not
    total = f"{len(shards) << 20:,}"
    with pytest.raises(hf.TooLargeError, match=f"the shards .* have {total} bytes"):
        hf.open_folder(copy)


def test_an_index_without_a_weight_map_is_refused(copy):
    _write_index(copy, {"metadata": {}})
    with pytest.raises(hf.WeightsError, match="no weight_map"):
        hf.open_folder(copy)
