"""A RoBERTa folder saved by the slow RobertaTokenizer: vocab.json + merges.txt, no tokenizer.json.

tfviz builds the tokenizer RobertaTokenizerFast would build from the two files (byte-level BPE,
<s> ... </s>, "<mask>" one special piece swallowing the space before it), so the folder reads the
same ids as transformers' RobertaTokenizer and as tfviz's own tokenizer.json path, and the model
matches transformers' as test_hf_encoders checks it. Folders with half of the pair, or a WordPiece
family with the pair, are refused saying what is missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer

from tests.hf import test_hf_encoders as enc
from tfviz import hf
from tfviz.hf import tokenizer_files
from tfviz.hf.tokenizer import PieceTokenizer

transformers = enc.transformers  # the oracle; test_hf_encoders skips (or fails in CI) without it

BPE_TEXTS = [
    "the cat sat on the mat .",
    "the cat <mask> .",
    "<mask> a dog ran <mask>",
    "the<mask>cat",
    "中文 好 cats",
    "  leading and trailing spaces  ",
    " the quick brown fox jumps over the lazy dog",
]


def _mask(text: str) -> str | None:
    return "<mask>" if "<mask>" in text else None


def _to_bpe_files(folder: Path) -> None:
    """vocab.json + merges.txt from the folder's tokenizer.json, which is then removed."""
    Tokenizer.from_file(str(folder / "tokenizer.json")).model.save(str(folder))
    (folder / "tokenizer.json").unlink()


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    """(tokenizer.json folder, vocab.json + merges.txt folder, transformers model)."""
    root = tmp_path_factory.mktemp("hf_bpe")
    model = enc._build("roberta", root / "json")
    shutil.copytree(root / "json", root / "bpe")
    _to_bpe_files(root / "bpe")
    return root / "json", root / "bpe", model


@pytest.fixture(scope="module")
def opened(roberta):
    with_json, with_bpe, _ = roberta
    return hf.open_folder(with_json), hf.open_folder(with_bpe)


@pytest.fixture
def bpe_copy(roberta, tmp_path):
    dest = tmp_path / "bpe"
    shutil.copytree(roberta[1], dest)
    return dest


def test_bpe_files_read_the_ids_of_transformers_and_of_tokenizer_json(roberta, opened):
    _, with_bpe, _ = roberta
    assert sorted(p.name for p in with_bpe.glob("*.json")) == ["config.json", "vocab.json"]
    from_json, from_bpe = (loaded.tokenizer for loaded in opened)
    # transformers' RobertaTokenizer on the same two files. Its "<mask>" has lstrip, as in
    # roberta-base's tokenizer.json and transformers 4's RobertaTokenizer(Fast) default
    # (transformers 5 reading bare files leaves it off, so it is passed here).
    ref = transformers.RobertaTokenizer.from_pretrained(
        str(with_bpe),
        mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True),
    )
    assert from_bpe.byte_level and from_bpe.mask_strip == (True, False)
    assert from_bpe.vocab_size == from_json.vocab_size
    for text in BPE_TEXTS:
        got = from_bpe.encode(text, mask=_mask(text))
        want = from_json.encode(text, mask=_mask(text))
        assert list(got.ids) == ref(text)["input_ids"], (text, got.pieces)
        assert got == want, text  # ids, shown pieces, labels, spans, notes: all the same
    # A typed "<s>" is plain text, as on the tokenizer.json path.
    assert from_bpe.encode("a <s> b") == from_json.encode("a <s> b")
    cut = from_bpe.encode("the cat " * 100)
    assert cut.truncated and cut == from_json.encode("the cat " * 100)


def test_a_bpe_files_folder_equals_transformers_model(roberta, opened, tmp_path, monkeypatch):
    _, with_bpe, model = roberta
    loaded = opened[1]
    assert loaded.family == "RoBERTa" and loaded.head is not None
    enc.test_hidden_states_attention_and_mlm_logits_equal_transformers(
        "roberta", {"roberta": (with_bpe, model)}, {"roberta": loaded}
    )
    # Listed without building the tokenizer, as folders with tokenizer.json or vocab.txt are.
    with monkeypatch.context() as m:
        m.setattr(PieceTokenizer, "from_bpe_files", None)
        info = hf.describe_folder(with_bpe)
    assert info.family == "RoBERTa" and info.masked_lm
    # A zipped upload goes through the same folder loader.
    zipped = hf.open_zip(enc._zip_folder(with_bpe, tmp_path / "m.zip").read_bytes())
    batch = loaded.tokenizer.batch(BPE_TEXTS[:3])
    assert zipped.tokenizer.batch(BPE_TEXTS[:3]).items == batch.items


@pytest.mark.parametrize("gone, kept", [("merges.txt", "vocab.json"), ("vocab.json", "merges.txt")])
def test_half_of_the_bpe_pair_is_refused_naming_the_missing_file(bpe_copy, gone, kept):
    (bpe_copy / gone).unlink()
    message = f"has {kept} but no {gone}: RoBERTa's byte-level BPE tokenizer needs both"
    with pytest.raises(hf.MissingFileError, match=message):
        hf.open_folder(bpe_copy)
    with pytest.raises(hf.MissingFileError, match=message):
        hf.describe_folder(bpe_copy)


def test_a_roberta_folder_without_any_tokenizer_names_all_it_reads(bpe_copy):
    (bpe_copy / "vocab.json").unlink()
    (bpe_copy / "merges.txt").unlink()
    with pytest.raises(
        hf.MissingFileError, match=r"RoBERTa needs tokenizer.json or vocab.json \+ merges.txt"
    ):
        hf.open_folder(bpe_copy)


def test_a_wordpiece_family_with_bpe_files_is_still_refused(roberta, tmp_path):
    bert = tmp_path / "bert"
    enc._build("bert", bert)
    (bert / "vocab.txt").unlink()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(roberta[1] / name, bert / name)
    for read in (hf.open_folder, hf.describe_folder):
        with pytest.raises(
            hf.MissingFileError, match="no tokenizer: BERT needs tokenizer.json or vocab.txt$"
        ):
            read(bert)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt"])
def test_bpe_files_past_the_tokenizer_size_limit_are_refused(bpe_copy, monkeypatch, name):
    limit = max((bpe_copy / n).stat().st_size for n in ("vocab.json", "merges.txt"))
    monkeypatch.setattr(tokenizer_files, "MAX_TOKENIZER_BYTES", limit)
    with open(bpe_copy / name, "a", encoding="utf-8") as f:
        f.write(" " * (limit + 1 - (bpe_copy / name).stat().st_size))
    size = limit + 1
    with pytest.raises(hf.TooLargeError, match=f"{name} has {size:,} bytes"):
        hf.open_folder(bpe_copy)


def test_unreadable_bpe_files_are_a_tokenizer_error(bpe_copy):
    (bpe_copy / "vocab.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(hf.TokenizerError, match="not a byte-level BPE tokenizer"):
        hf.open_folder(bpe_copy)


def test_tokenizer_json_wins_over_bpe_files(roberta, bpe_copy, opened):
    shutil.copy(roberta[0] / "tokenizer.json", bpe_copy / "tokenizer.json")
    (bpe_copy / "merges.txt").write_text("not merges at all\n", encoding="utf-8")
    loaded = hf.open_folder(bpe_copy)
    assert loaded.tokenizer.encode(BPE_TEXTS[0]) == opened[0].tokenizer.encode(BPE_TEXTS[0])


def test_the_mask_strip_a_tokenizer_config_names_is_kept(bpe_copy, opened):
    config = {"mask_token": {"content": "<mask>", "lstrip": False, "rstrip": False}}
    (bpe_copy / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = hf.open_folder(bpe_copy).tokenizer
    assert tok.mask_strip == (False, False)
    text = "the cat <mask> ."
    got = tok.encode(text, mask="<mask>")
    assert len(got.ids) == len(opened[1].tokenizer.encode(text, mask="<mask>").ids) + 1  # "Ġ"
