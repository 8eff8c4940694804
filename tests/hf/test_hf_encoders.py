"""Bring-your-own encoders (tfviz.hf) equal transformers' own models, and hostile folders and zips
are refused before anything runs.

For each family a tiny random model is built with transformers (2 layers, 4 heads, D = 32), every
parameter perturbed so that a dropped or misplaced bias shows, saved with save_pretrained as
safetensors, with a small tokenizer of its kind (a WordPiece vocab.txt for BERT and DistilBERT, a
byte-level BPE tokenizer.json for RoBERTa, a Unigram one for XLM-R). tfviz opens the folder and
must match transformers' hidden states, attention weights and masked-LM logits to 1e-4 on a padded
batch. transformers is the oracle only: without it these tests skip, except under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tfviz import hf
from tfviz.core.interventions import Interventions
from tfviz.core.tasks import InputError
from tfviz.hf import files as hf_files
from tfviz.hf import tokenizer as tokenizer_mod
from tfviz.hf import zipped

IN_CI = os.environ.get("CI", "").lower() == "true"
try:
    import transformers
except ImportError:  # pragma: no cover - the oracle is a test-only dependency
    if IN_CI:
        raise
    pytest.skip("transformers (the oracle) is not installed", allow_module_level=True)

TOL = 1e-4
TEXTS = [
    "the cat sat on the mat .",
    "a dog ran",
    "the quick brown fox jumps over the lazy dog and the cat",
]
MASKED = "the cat sat on the [MASK] ."
WORDS = (
    "the a cat dog sat ran on mat quick brown fox jumps over lazy and is was it "
    "he she they we you i of to in for with at by from up down out 中 文 好"
).split()
SIZES = dict(hidden=32, layers=2, heads=4, ff=64)


def _perturb(model: torch.nn.Module, seed: int) -> None:
    """Every parameter (biases and LayerNorms included) away from its tidy initial value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def _vocab_txt(folder: Path) -> int:
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "[", "]"]
    pieces += WORDS + ["##s", "##ed", "##ing", "##er"] + list("abcdefghijklmnopqrstuvwxyz")
    pieces += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    (folder / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    return len(pieces)


def _bpe_tokenizer_json(folder: Path) -> int:
    """RoBERTa's kind: byte-level BPE, <s> <pad> </s> <unk> <mask> as ids 0..4."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator([" ".join(WORDS)] * 5 + TEXTS * 5, trainer)
    # As roberta-base's tokenizer.json has it: "<mask>" swallows the space before it.
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.save(str(folder / "tokenizer.json"))
    return tok.get_vocab_size()


def _unigram_tokenizer_json(folder: Path) -> int:
    """XLM-R's kind: a Unigram model over Metaspace ("▁") pieces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        unk_token="<unk>", show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator([" ".join(WORDS)] * 5 + TEXTS * 5, trainer)
    tok.save(str(folder / "tokenizer.json"))
    return tok.get_vocab_size()


def _build(kind: str, folder: Path):
    """A tiny transformers model of this kind saved in folder; returns the model (eval)."""
    T = transformers
    folder.mkdir(parents=True)
    common = dict(attn_implementation="eager")
    if kind in ("bert", "bert-untied", "bert-gelu-new", "bert-encoder-only"):
        V = _vocab_txt(folder)
        act = "gelu_new" if kind == "bert-gelu-new" else "gelu"
        cfg = T.BertConfig(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64, hidden_act=act,
            # Older checkpoints keep the decoder as its own tensor, cls.predictions.decoder.*
            tie_word_embeddings=kind != "bert-untied", **common,
        )  # fmt: skip
        cls = T.BertModel if kind == "bert-encoder-only" else T.BertForMaskedLM
    elif kind == "roberta":
        V = _bpe_tokenizer_json(folder)
        cfg = T.RobertaConfig(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=66, type_vocab_size=1,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, **common,
        )  # fmt: skip
        cls = T.RobertaForMaskedLM
    elif kind == "xlm-roberta":
        V = _unigram_tokenizer_json(folder)
        cfg = T.XLMRobertaConfig(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=66, type_vocab_size=1,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, **common,
        )  # fmt: skip
        cls = T.XLMRobertaForMaskedLM
    elif kind in ("distilbert", "distilbert-relu"):
        V = _vocab_txt(folder)
        cfg = T.DistilBertConfig(
            vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
            max_position_embeddings=64, activation="relu" if kind.endswith("relu") else "gelu",
            **common,
        )  # fmt: skip
        cls = T.DistilBertForMaskedLM
    else:
        raise ValueError(kind)
    torch.manual_seed(0)
    model = cls(cfg)
    _perturb(model, seed=len(kind))
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


KINDS = ["bert", "bert-untied", "bert-gelu-new", "bert-encoder-only", "roberta", "xlm-roberta",
         "distilbert", "distilbert-relu"]  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_models")
    return {kind: (root / kind, _build(kind, root / kind)) for kind in KINDS}


@pytest.fixture(scope="module")
def opened(built):
    return {kind: hf.open_folder(folder) for kind, (folder, _) in built.items()}


def _reference(ref, batch, kind):
    """transformers' outputs for the batch: hidden states, attentions, and MLM logits."""
    kwargs = dict(
        input_ids=batch.ids,
        attention_mask=(~batch.pad_mask).long(),
        output_attentions=True,
        output_hidden_states=True,
    )
    with torch.no_grad():
        return ref(**kwargs)


def _real(kind, batch):
    """(B, T) positions compared: every one, except RoBERTa's padding, whose position id
    transformers sets to padding_idx (no real token reads it; tfviz keeps only real rows)."""
    if kind in ("roberta", "xlm-roberta"):
        return ~batch.pad_mask
    return torch.ones_like(batch.pad_mask)


@pytest.mark.parametrize("kind", KINDS)
def test_hidden_states_attention_and_mlm_logits_equal_transformers(kind, built, opened):
    _, ref = built[kind]
    loaded = opened[kind]
    batch = loaded.tokenizer.batch(TEXTS)
    assert batch.pad_mask.any() and not batch.pad_mask.all(dim=1).any()  # padded, no empty row
    out = _reference(ref, batch, kind)
    keep = _real(kind, batch)  # (B, T)
    trace = loaded.model(batch.ids, batch.pad_mask).trace
    assert len(trace.layers) == 2 and loaded.model.config.n_heads == 4
    diffs = []

    def close(got, want, where):
        d = (got - want)[where].abs().max().item()
        diffs.append(d)
        assert d <= TOL, (kind, d)

    close(trace.embed, out.hidden_states[0], keep)
    for i, lt in enumerate(trace.layers):
        close(lt.resid_out, out.hidden_states[i + 1], keep)
        # Attention rows of real queries (all of them outside RoBERTa), every key.
        close(lt.attn.transpose(1, 2), out.attentions[i].transpose(1, 2), keep)
    if loaded.head is None:
        assert kind == "bert-encoder-only" and loaded.model.config.pool == "mean"
    else:
        logits = hf.masked_lm_logits(loaded.model, loaded.head, batch.ids, batch.pad_mask)
        assert logits.shape == out.logits.shape
        close(logits, out.logits, keep)
    print(f"{kind}: max |tfviz - transformers| = {max(diffs):.2e}")


@pytest.mark.parametrize("kind", KINDS)
def test_w_o_identities_hold_for_every_family(kind, opened):
    loaded = opened[kind]
    batch = loaded.tokenizer.batch(TEXTS)
    for lt in loaded.model(batch.ids, batch.pad_mask).trace.layers:
        terms = lt.head_contributions()  # (B, H, T, D)
        torch.testing.assert_close(terms.sum(1) + lt.b_o, lt.attn_out, atol=1e-5, rtol=0)
    for lt in loaded.model(batch.ids, batch.pad_mask, w_o="identity").trace.layers:
        assert torch.equal(lt.attn_out, lt.concat)


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_fast_path_equals_traced_path_under_switches(kind, opened):
    loaded = opened[kind]
    batch = loaded.tokenizer.batch(TEXTS)
    iv = Interventions(w_o={1: "identity"}, ablate_heads=[(0, 3)])
    slow = loaded.model(batch.ids, batch.pad_mask, iv).logits
    fast = loaded.model(batch.ids, batch.pad_mask, iv, trace=False).logits
    real = ~batch.pad_mask
    torch.testing.assert_close(fast[real], slow[real], atol=1e-5, rtol=0)


def test_a_headless_bert_is_a_sentence_model_for_the_sentence_task(opened):
    from tfviz.hf import pretrained

    loaded = opened["bert-encoder-only"]
    task = pretrained.SentenceTask(loaded.tokenizer)
    task.check_config(loaded.model.config)
    pair = pretrained.compare_similarity(
        loaded.model, task, TEXTS[0], TEXTS[1], Interventions(w_o="identity")
    )
    assert -1 <= pair.learned <= 1 and pair.switched != pytest.approx(pair.learned, abs=1e-6)
    assert task.labels(TEXTS[1]) == ["[CLS]", "a", "dog", "ran", "[SEP]"]


@pytest.mark.parametrize("kind", ["bert", "roberta", "bert-encoder-only"])
def test_a_traced_sentence_embeds_as_its_own_forward_pass(kind, opened):
    """A folder encoder's trace keeps its output, per token (T, D) or mean-pooled (D,) for a
    headless one; pooled, it is the sentence embedding embed_each computes (the app's sentence
    A, issue 44)."""
    from tfviz.core.trace import run_trace
    from tfviz.hf import pretrained

    loaded = opened[kind]
    task = pretrained.SentenceTask(loaded.tokenizer)
    iv = Interventions(w_o={0: "identity"})
    trace = run_trace(loaded.model, task, TEXTS[2], iv)
    cfg = loaded.model.config
    tokens = () if cfg.pool == "mean" else (len(trace.labels),)
    assert trace.output.shape == (*tokens, cfg.d_model)
    alone = pretrained.embed_each(loaded.model, task, (TEXTS[2],), iv)[0].numpy()
    np.testing.assert_allclose(pretrained.trace_embedding(trace.output), alone, atol=1e-6, rtol=0)


def test_families_configs_and_key_maps(opened):
    by = {k: v for k, v in opened.items()}
    assert [by[k].family for k in ("bert", "roberta", "xlm-roberta", "distilbert")] == [
        "BERT", "RoBERTa", "RoBERTa", "DistilBERT",
    ]  # fmt: skip
    assert by["bert-gelu-new"].model.config.activation == "gelu_tanh"
    assert by["distilbert-relu"].model.config.activation == "relu"
    assert by["distilbert"].model.config.type_vocab_size == 0
    # RoBERTa: 66 positions in the file, the first pad_token_id + 1 = 2 never read by a token.
    assert by["roberta"].model.config.max_len == by["roberta"].max_pieces == 64
    assert by["roberta"].model.config.norm_eps == 1e-5
    assert by["bert"].max_pieces == 64
    for loaded in by.values():
        assert not loaded.model.training
        assert not any(p.requires_grad for p in loaded.model.parameters())
    # The tied decoder is the word embedding itself, not a copy.
    head = by["bert"].head
    assert head.decoder.weight.data_ptr() == by["bert"].model.embed.weight.data_ptr()
    assert hf.BERT.key_map(1)["layers.0.attn.W_o.weight"] == (
        "encoder.layer.0.attention.output.dense.weight"
    )
    assert hf.DISTILBERT.key_map(1, "distilbert.")["layers.0.attn.W_o.bias"] == (
        "distilbert.transformer.layer.0.attention.out_lin.bias"
    )


@pytest.mark.parametrize("kind", ["bert", "roberta", "xlm-roberta"])
def test_word_pieces_equal_transformers_tokenizer(kind, built, opened):
    folder, _ = built[kind]
    loaded = opened[kind]
    if kind == "bert":
        ref = transformers.BertTokenizer(vocab=str(folder / "vocab.txt"))
        mask = "[MASK]"
    else:
        # The file's own added tokens, "<mask>" with its lstrip, as RoBERTa's tokenizer reads it.
        ref = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
        mask = "<mask>"
    for text in TEXTS + ["中文 好 cats", MASKED.replace("[MASK]", mask)]:
        want = ref(text, add_special_tokens=False)["input_ids"]
        got = loaded.tokenizer.encode(text, mask=mask if mask in text else None)
        assert list(got.ids[1:-1]) == want, (kind, text, got.pieces)
        assert got.ids[0] == loaded.tokenizer.cls_id and got.ids[-1] == loaded.tokenizer.sep_id


def _spelled(pieces) -> str:
    """The text that shown pieces spell: markers taken out, "▁" back to a space."""
    return "".join(pieces).replace(tokenizer_mod.CONTINUED, "").replace("▁", " ")


def test_byte_level_pieces_are_shown_as_text_with_a_word_start_marker(built, opened):
    tok = opened["roberta"].tokenizer
    assert tok.byte_level and not opened["xlm-roberta"].tokenizer.byte_level
    p = tok.encode(TEXTS[0])
    assert "▁cat" in p.pieces and "▁cat" in p.labels and p.pieces[1] == "the"
    assert not any("Ġ" in label for label in p.labels)
    assert p.pieces[0] == "<s>" and p.pieces[-1] == "</s>"
    assert _spelled(p.pieces[1:-1]) == TEXTS[0]
    # What the model reads is the vocabulary's own pieces, unchanged.
    raw = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(built["roberta"][0] / "tokenizer.json")
    )
    want = raw(TEXTS[0], add_special_tokens=False)["input_ids"]
    assert list(p.ids[1:-1]) == want and tok.piece(p.ids[2]) == "Ġcat"
    masked = tok.encode("the <mask> sat", mask="<mask>")
    assert masked.pieces[masked.masked[0]] == "<mask>"
    odd = tok.encode("a\n  b")  # a newline and two spaces: visible on an axis
    assert "\\n" in odd.pieces and all(label.strip() == label for label in odd.labels)


@pytest.mark.parametrize("text", ["我爱你中文好", "我 爱 你 cats 中文"])
def test_byte_level_pieces_of_chinese_spell_the_text_once(opened, text):
    tok = opened["roberta"].tokenizer
    p = tok.encode(text)
    shown = p.pieces[1:-1]
    assert tokenizer_mod.CONTINUED in shown  # a character split across pieces is exercised
    assert _spelled(shown) == text
    assert _spelled(label.split(" (")[0] for label in p.labels[1:-1]) == text
    assert len(set(p.labels)) == len(p.labels)
    mojibake = set(tokenizer_mod.BYTE_OF) - set(map(chr, range(0x21, 0x7F)))
    assert not any(c in mojibake or c == "\ufffd" for piece in p.pieces for c in piece)


def test_a_byte_level_cut_inside_a_character_keeps_the_shown_prefix(built, opened):
    tok = opened["roberta"].tokenizer
    path = built["roberta"][0] / "tokenizer.json"
    whole = tok.encode("我爱你")  # 9 pieces: one byte each
    short = hf.PieceTokenizer.from_file(path, 4, specials=tok.specials).encode("我爱你")
    assert short.truncated and short.pieces[1:-1] == whole.pieces[1:3] == ("我", "…")


def test_a_byte_level_guess_alone_is_readable_never_a_replacement_character(opened):
    """A fill-in-the-mask guess is one piece read alone: half a CJK character must not show as
    "\ufffd" (what decoding it gives) nor in the byte alphabet ("æĪ")."""
    from tfviz.ui.masked import guesses_text, shown_word

    tok = opened["roberta"].tokenizer
    mojibake = set(tokenizer_mod.BYTE_OF) - set(map(chr, range(0x21, 0x7F)))
    half = [i for i in range(tok.vocab_size) if "\ufffd" in tok.decode_ids([i])]
    assert half  # pieces holding part of a character exist: exercised
    for i in range(tok.vocab_size):
        word = tok.piece_text(i)
        assert word and word.isprintable() and "\ufffd" not in word, (tok.piece(i), word)
        assert not any(c in mojibake for c in word), (tok.piece(i), word)
    # 我 is E6 88 91, one byte a piece here: its label shows it on the first piece, "…" on the
    # rest; alone, the first piece is a byte that says no character yet, the others continue one.
    p = tok.encode("我")
    first, *rest = p.ids[1:-1]
    assert p.pieces[1:-1] == ("我", "…", "…")
    assert tok.piece_text(first) == "<0xE6>"
    assert [tok.piece_text(i) for i in rest] == ["…<0x88>", "…<0x91>"]
    # A whole word reads as its label does: "Ġcat" -> "▁cat".
    sentence = tok.encode(TEXTS[0])
    cat = sentence.ids[2]
    assert tok.piece(cat) == "Ġcat" and tok.piece_text(cat) == "▁cat" == sentence.pieces[2]
    # fill_mask's guesses carry it, and the masked-word view shows it as it is.
    logits = torch.full((tok.vocab_size,), -10.0)
    logits[[cat, first, *rest]] = torch.tensor([4.0, 3.0, 2.0, 1.0])
    guesses = hf.mlm.top_guesses(tok, logits, 4)
    assert [g.word for g in guesses] == ["▁cat", "<0xE6>", "…<0x88>", "…<0x91>"]
    assert [g.piece for g in guesses] == [tok.piece(i) for i in (cat, first, *rest)]
    assert [shown_word(g) for g in guesses] == [g.word for g in guesses]
    assert "\ufffd" not in guesses_text(guesses) and "æ" not in guesses_text(guesses)


@pytest.mark.parametrize("kind", ["bert", "xlm-roberta"])
def test_word_piece_and_sentence_piece_guesses_are_decoded_as_before(kind, opened):
    tok = opened[kind].tokenizer
    assert not tok.byte_level
    for i in range(tok.vocab_size):
        assert tok.piece_text(i) == tok.decode_ids([i]).strip()
    spelled = {tok.piece(i): tok.piece_text(i) for i in range(tok.vocab_size)}
    if kind == "bert":
        assert spelled["cat"] == "cat" and spelled["##s"] == "##s"
    else:
        assert spelled["▁fo"] == "fo" and spelled["中"] == "中"


@pytest.mark.parametrize("kind", ["bert", "xlm-roberta"])
def test_word_piece_and_sentence_piece_labels_are_the_vocabulary_spelling(kind, opened):
    tok = opened[kind].tokenizer
    p = tok.encode("the cats sat 中文 好")
    assert p.pieces == tuple(tok.piece(i) for i in p.ids)
    assert (kind == "bert") == ("##s" in p.pieces) and (kind != "bert") == ("▁the" in p.pieces)


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_fill_mask_answers_learned_and_with_w_o_off(kind, built, opened):
    loaded = opened[kind]
    _, ref = built[kind]
    mask = loaded.tokenizer.specials.mask
    text = MASKED.replace("[MASK]", mask)
    answer = hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, text)
    assert answer.pieces[answer.position] == mask and len(answer.learned) == 5
    assert answer.learned == answer.switched  # nothing switched
    p = loaded.tokenizer.encode(text, mask=mask)
    with torch.no_grad():
        want = ref(input_ids=torch.tensor([p.ids])).logits[0, answer.position].softmax(-1)
    top = want.topk(5)
    assert [g.piece_id for g in answer.learned] == top.indices.tolist()
    assert [g.probability for g in answer.learned] == pytest.approx(top.values.tolist(), abs=1e-5)
    off = hf.fill_mask(
        loaded.model, loaded.head, loaded.tokenizer, text, Interventions(w_o="identity")
    )
    assert off.learned == answer.learned
    assert [g.probability for g in off.switched] != pytest.approx(
        [g.probability for g in answer.learned], abs=1e-4
    )  # W_o off moves the answer
    with pytest.raises(InputError, match="exactly once") as refused:  # a ValueError
        hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, "no marker here")
    assert (refused.value.code, refused.value.values) == ("mask_count", {"mask": mask, "n": 0})
    with pytest.raises(InputError) as refused:  # worded by the catalogue (input.mask_past_limit)
        hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, "the cat " * 40 + mask)
    said = (refused.value.code, refused.value.values)
    assert said == ("mask_past_limit", {"mask": mask, "n": 62})


def test_a_folder_is_described_without_loading_and_a_models_folder_listed(
    built, opened, monkeypatch, tmp_path
):
    def no_allocation(*args, **kwargs):
        raise AssertionError("an Encoder was built")

    root = tmp_path / "models"
    for kind in ("bert", "roberta", "distilbert", "bert-encoder-only"):
        shutil.copytree(built[kind][0], root / kind)
    shutil.copytree(built["bert"][0], root / "with-code")
    (root / "with-code" / "modeling_bert.py").write_text("import os\n")
    shutil.copytree(built["bert"][0], root / ".cache")  # hidden: not a model
    (root / "bert" / "README.md").write_text("---\nlanguage: en\nlicense: apache-2.0\n---\n# A")
    monkeypatch.setattr("tfviz.hf.weights.Transformer", no_allocation)
    listed = hf.list_folder(root)
    assert [item.name for item in listed] == [
        "bert", "bert-encoder-only", "distilbert", "roberta", "with-code",
    ]  # fmt: skip
    *found, refused = listed
    assert isinstance(refused, hf.Refused) and "modeling_bert.py" in refused.reason
    for info in found:
        loaded = opened[info.name]
        assert isinstance(info, hf.FolderInfo)
        assert (info.family, info.model_type, info.n_params, info.max_pieces) == (
            loaded.family, loaded.model_type, loaded.n_params, loaded.max_pieces,
        )  # fmt: skip
        assert info.config == loaded.model.config
        assert info.masked_lm == (loaded.head is not None) == (info.name != "bert-encoder-only")
        assert info.licence == ("apache-2.0" if info.name == "bert" else None)


# ---- hostile folders: each refused with a message, nothing run ----------------------------------


@pytest.fixture
def bert_copy(built, tmp_path):
    """A copy of the tiny BERT folder to break."""
    dst = tmp_path / "bert"
    shutil.copytree(built["bert"][0], dst)
    return dst


def _edit_config(folder: Path, **changes) -> None:
    raw = json.loads((folder / "config.json").read_text())
    raw.update(changes)
    (folder / "config.json").write_text(json.dumps(raw))


def test_pickle_weights_without_safetensors_are_refused_unread(bert_copy, monkeypatch):
    (bert_copy / "model.safetensors").rename(bert_copy / "pytorch_model.bin")
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with pytest.raises(hf.UnsafeFileError, match="pickle.*pytorch_model.bin"):
        hf.open_folder(bert_copy)


@pytest.mark.parametrize("name", ["model.pt", "weights.pth", "x.pkl", "last.ckpt"])
def test_other_pickles_without_safetensors_are_refused(bert_copy, name):
    (bert_copy / "model.safetensors").rename(bert_copy / name)
    with pytest.raises(hf.UnsafeFileError, match="pickle"):
        hf.open_folder(bert_copy)


def test_a_pickle_beside_safetensors_is_left_unread(bert_copy, opened):
    (bert_copy / "pytorch_model.bin").write_bytes(b"\x80\x04 not read")
    loaded = hf.open_folder(bert_copy)
    assert torch.equal(loaded.model.pos, opened["bert"].model.pos)


@pytest.mark.parametrize("key", ["auto_map", "trust_remote_code"])
def test_remote_code_in_config_is_refused(bert_copy, key):
    _edit_config(
        bert_copy, **{key: {"AutoModel": "modeling_x.Model"} if key == "auto_map" else True}
    )
    with pytest.raises(hf.UnsafeFileError, match=key):
        hf.open_folder(bert_copy)


def test_a_fifo_in_the_folder_is_refused_unread(bert_copy):
    os.mkfifo(bert_copy / "tokenizer_config.json")  # reading it would wait for ever
    with pytest.raises(hf.UnsafeFileError, match="tokenizer_config.json is not a regular file"):
        hf.open_folder(bert_copy)


def test_a_python_file_in_the_folder_is_refused(bert_copy):
    (bert_copy / "sub").mkdir()
    (bert_copy / "sub" / "modeling_evil.py").write_text("raise SystemExit('ran')\n")
    with pytest.raises(hf.UnsafeFileError, match="code.*modeling_evil.py"):
        hf.open_folder(bert_copy)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(model_type="t5"), "model_type='t5'.*gpt2.*qwen2.*tfviz-lm models"),
        (dict(position_embedding_type="relative_key"), "position_embedding_type"),
        (dict(hidden_act="swish"), "hidden_act='swish'"),
        (dict(is_decoder=True), "is_decoder"),
    ],
)
def test_an_unknown_family_or_variant_is_refused(bert_copy, changes, message):
    _edit_config(bert_copy, **changes)
    with pytest.raises(hf.UnknownFamilyError, match=message):
        hf.open_folder(bert_copy)


def test_shapes_that_disagree_with_the_config_are_refused(bert_copy):
    _edit_config(bert_copy, intermediate_size=48)
    with pytest.raises(hf.WeightsError, match=r"intermediate.dense.weight has shape \(64, 32\)"):
        hf.open_folder(bert_copy)


def test_a_missing_tensor_is_refused(bert_copy):
    tensors = load_file(bert_copy / "model.safetensors")
    del tensors["bert.encoder.layer.1.attention.self.key.bias"]
    save_file(tensors, bert_copy / "model.safetensors")
    with pytest.raises(hf.WeightsError, match="missing bert.encoder.layer.1.attention.self.key"):
        hf.open_folder(bert_copy)


def test_an_unexpected_tensor_and_nan_are_refused(bert_copy):
    tensors = load_file(bert_copy / "model.safetensors")
    tensors["bert.encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(2)
    save_file(tensors, bert_copy / "model.safetensors")
    with pytest.raises(hf.WeightsError, match="unexpected bert.encoder.layer.0.attention.self.rot"):
        hf.open_folder(bert_copy)
    del tensors["bert.encoder.layer.0.attention.self.rotary.weight"]
    tensors["bert.encoder.layer.0.output.dense.weight"][0, 0] = float("nan")
    save_file(tensors, bert_copy / "model.safetensors")
    with pytest.raises(hf.WeightsError, match="NaN"):
        hf.open_folder(bert_copy)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(vocab_size=10**9), "vocab_size must be between"),
        (dict(num_hidden_layers=1000), "n_layers must be between"),
        (dict(hidden_size=65536, num_attention_heads=4), "d_model must be between"),
        (dict(intermediate_size=10**8), "d_ff must be between"),
        (dict(max_position_embeddings=10**6), "max_len must be between"),
        (
            dict(
                vocab_size=250_000,
                hidden_size=1024,
                intermediate_size=4096,
                num_hidden_layers=12,
                num_attention_heads=16,
            ),
            "parameters; this server opens",
        ),
    ],  # fmt: skip
)
def test_a_config_claiming_huge_sizes_is_refused_before_allocating(
    bert_copy, monkeypatch, changes, message
):
    def no_allocation(*args, **kwargs):
        raise AssertionError("an Encoder was built")

    monkeypatch.setattr("tfviz.hf.weights.Transformer", no_allocation)
    _edit_config(bert_copy, **changes)
    start = time.perf_counter()
    with pytest.raises(hf.TooLargeError, match=message):
        hf.open_folder(bert_copy)
    assert time.perf_counter() - start < 1.0


def test_a_weights_file_larger_than_its_config_is_refused_unread(bert_copy):
    with open(bert_copy / "model.safetensors", "r+b") as f:
        f.truncate(50 << 20)  # sparse: 50 MB for a model of 30 k parameters
    with pytest.raises(hf.TooLargeError, match="model.safetensors has 52,428,800 bytes"):
        hf.open_folder(bert_copy)


def test_a_tokenizer_larger_than_the_model_vocabulary_is_refused(bert_copy):
    with open(bert_copy / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\nmore\n")
    with pytest.raises(hf.TokenizerError, match="pieces, the model only"):
        hf.open_folder(bert_copy)


def test_missing_files_are_named(bert_copy):
    (bert_copy / "vocab.txt").unlink()
    with pytest.raises(hf.MissingFileError, match="no tokenizer"):
        hf.open_folder(bert_copy)
    (bert_copy / "config.json").unlink()
    with pytest.raises(hf.MissingFileError, match="config.json"):
        hf.open_folder(bert_copy)


# ---- zipped folders ------------------------------------------------------------------------


def _zip_folder(folder: Path, zip_path: Path, top: str | None = "model") -> Path:
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"{top}/{path.name}" if top else path.name)
    return zip_path


@pytest.mark.parametrize("top", ["model", None])
def test_a_zipped_folder_opens_like_the_folder(built, opened, tmp_path, top):
    z = _zip_folder(built["distilbert"][0], tmp_path / "m.zip", top)
    loaded = hf.open_zip(z.read_bytes() if top else z)  # an upload's bytes, or a file
    assert loaded.family == "DistilBERT"
    batch = loaded.tokenizer.batch(TEXTS)
    torch.testing.assert_close(
        loaded.model(batch.ids, batch.pad_mask, trace=False).logits,
        opened["distilbert"].model(batch.ids, batch.pad_mask, trace=False).logits,
        atol=0, rtol=0,
    )  # fmt: skip


def test_a_zip_bomb_is_refused_from_its_headers(tmp_path):
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model/model.safetensors", b"\0" * (20 << 20))  # 20 MB -> about 20 kB
    with pytest.raises(hf.ZipRefusedError, match="compressed .* times"):
        hf.open_zip(z)


def test_a_zip_past_the_unpacked_size_limit_is_refused(built, tmp_path):
    z = _zip_folder(built["bert"][0], tmp_path / "m.zip")
    with pytest.raises(hf.ZipRefusedError, match="unpacks to more than 1,000 bytes"):
        hf.open_zip(z, max_bytes=1000)


def test_a_zip_whose_header_lies_about_a_size_is_stopped_while_unpacking(built, tmp_path):
    z = _zip_folder(built["bert"][0], tmp_path / "m.zip")
    data = bytearray(z.read_bytes())
    # Rewrite config.json's declared size (4 bytes at offset 24 of its central directory
    # record) to 10 bytes: the data holds more.
    start = data.find(b"PK\x01\x02")
    while start != -1:
        name_len = int.from_bytes(data[start + 28 : start + 30], "little")
        if data[start + 46 : start + 46 + name_len] == b"model/config.json":
            data[start + 24 : start + 28] = (10).to_bytes(4, "little")
            break
        start = data.find(b"PK\x01\x02", start + 4)
    assert start != -1
    z.write_bytes(bytes(data))
    with pytest.raises(hf.ZipRefusedError, match="config.json") as refused:
        hf.open_zip(z)
    print(refused.value)


@pytest.mark.parametrize(
    "name, message",
    [
        ("../evil.json", "'..' path"),
        ("model/../../evil.json", "'..' path"),
        ("/etc/evil.json", "absolute path"),
        ("C:/evil.json", "absolute path"),
        ("model\\..\\evil.json", "backslash"),
    ],
)
def test_path_traversal_in_a_zip_is_refused(tmp_path, name, message):
    z = tmp_path / "t.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("model/config.json", "{}")
        zf.writestr(zipfile.ZipInfo(name), b"x")
    with pytest.raises(hf.ZipRefusedError, match=message):
        hf.open_zip(z)
    assert not (tmp_path.parent / "evil.json").exists()


def test_a_link_in_a_zip_is_refused(tmp_path):
    z = tmp_path / "link.zip"
    info = zipfile.ZipInfo("model/config.json")
    info.external_attr = 0o120777 << 16  # a symbolic link to /etc/passwd
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(hf.ZipRefusedError, match="link"):
        hf.open_zip(z)


def test_a_zip_with_too_many_files_is_refused(tmp_path):
    z = tmp_path / "many.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(hf_files.MAX_FILES + 1):
            zf.writestr(f"model/f{i}.json", "{}")
    with pytest.raises(hf.ZipRefusedError, match="entries"):
        hf.open_zip(z)


def test_code_inside_a_zip_is_refused_and_the_temporary_folder_removed(built, tmp_path):
    z = _zip_folder(built["bert"][0], tmp_path / "m.zip")
    with zipfile.ZipFile(z, "a") as zf:
        zf.writestr("model/modeling_bert.py", "import os\n")
    seen = []
    real = zipped.extract

    def spy(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    zipped.extract, restore = spy, real
    try:
        with pytest.raises(hf.UnsafeFileError, match="modeling_bert.py"):
            hf.open_zip(z)
    finally:
        zipped.extract = restore
    assert seen and not seen[0].exists()
