"""Bring-your-own decoders (tfviz.hf.decoders): GPT-2, Llama (grouped-query attention) and Qwen2
(q, k, v biases) equal transformers' own models.

For each family a tiny random model is built with transformers (2 layers, 4 query heads, D = 32),
every parameter perturbed so that a dropped or misplaced bias or a transposed matrix shows, saved
with save_pretrained as safetensors beside a small byte-level BPE tokenizer.json. tfviz opens the
folder and must match transformers' hidden states, attention weights and next-token logits to
1e-4 on a left-padded batch (positions counting real tokens, as generate() gives them), and its
greedy continuation token for token. transformers is the oracle only: without it these tests
skip, except under CI=true.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch

from bench.decoder_folders import write_tokenizer
from tfviz import hf
from tfviz.core import wo
from tfviz.core.interventions import Interventions
from tfviz.hf import decoder_weights
from tfviz.hf.errors import PretrainedError

IN_CI = os.environ.get("CI", "").lower() == "true"
try:
    import transformers
except ImportError:  # pragma: no cover - the oracle is a test-only dependency
    if IN_CI:
        raise
    pytest.skip("transformers (the oracle) is not installed", allow_module_level=True)

TOL = 1e-4
TEXTS = ["the cat sat on the mat .", "a dog ran", "the quick brown fox jumps over the lazy dog"]
WORDS = "the a cat dog sat ran on mat quick brown fox jumps over lazy and is 中 文".split()
KINDS = ("gpt2", "gpt2-untied", "llama", "qwen2", "mistral")


def _tokenizer(folder: Path, specials: list[str]) -> int:
    """A byte-level BPE tokenizer.json with these special tokens first; returns its size."""
    corpus = [" ".join(WORDS)] * 5 + TEXTS * 5
    return write_tokenizer(folder, specials, corpus, vocab_size=300)


def build(kind: str, folder: Path):
    """A tiny transformers decoder of this kind saved in folder; returns it (eval mode)."""
    T = transformers
    folder.mkdir(parents=True)
    common = dict(attn_implementation="eager")
    if kind.startswith("gpt2"):
        V = _tokenizer(folder, ["<|endoftext|>"])
        cfg = T.GPT2Config(
            vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=kind == "gpt2", **common,
        )  # fmt: skip
        cls = T.GPT2LMHeadModel
    else:
        V = _tokenizer(folder, ["<unk>", "<s>", "</s>"])
        sizes = dict(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
            bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-6,
        )  # fmt: skip
        rope = {"rope_type": "default", "rope_theta": 500.0}
        if kind == "llama":
            cfg = T.LlamaConfig(**sizes, rope_parameters=rope, **common)
            cls = T.LlamaForCausalLM
        elif kind == "qwen2":  # Qwen2's q, k, v have biases; its head tied
            cfg = T.Qwen2Config(**sizes, rope_parameters=rope, tie_word_embeddings=True, **common)
            cls = T.Qwen2ForCausalLM
        else:
            cfg = T.MistralConfig(**sizes, sliding_window=None, **common)
            cls = T.MistralForCausalLM
        tok_cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
        (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    torch.manual_seed(0)
    model = cls(cfg).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():  # away from tidy initial values (ones, zeros)
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(folder, safe_serialization=True)
    return model


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("decoders")
    return {kind: (build(kind, root / kind), root / kind) for kind in KINDS}


def left_padded(loaded, texts=TEXTS):
    batch = loaded.tokenizer.batch(texts)
    real = ~batch.pad_mask
    positions = (real.long().cumsum(-1) - 1).clamp_min(0)
    return batch, real, positions


@pytest.mark.parametrize("kind", KINDS)
def test_a_decoder_equals_transformers_on_a_left_padded_batch(built, kind):
    theirs, folder = built[kind]
    loaded = hf.open_folder(folder)
    assert loaded.model.config.causal and loaded.head is None
    batch, real, positions = left_padded(loaded)
    assert batch.pad_mask[:, 0].any() and not batch.pad_mask[:, -1].any()  # padded on the left
    with torch.no_grad():
        ref = theirs(
            input_ids=batch.ids, attention_mask=real.long(), position_ids=positions,
            output_hidden_states=True, output_attentions=True,
        )  # fmt: skip
        out = loaded.model(batch.ids, batch.pad_mask)
    keep = real[..., None]
    assert torch.allclose(out.logits * keep, ref.logits * keep, atol=TOL)
    for i, layer in enumerate(out.trace.layers):
        # transformers' hidden_states[i] is layer i's input (the embedding for i = 0)
        assert torch.allclose(layer.resid_pre * keep, ref.hidden_states[i] * keep, atol=TOL), i
        rows = real[:, None, :, None] & real[:, None, None, :]
        assert torch.allclose(layer.attn * rows, ref.attentions[i] * rows, atol=TOL), i
        # above the diagonal: exactly no weight
        assert (layer.attn.triu(1) == 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_continuation_is_transformers_token_for_token(built, kind):
    theirs, folder = built[kind]
    loaded = hf.open_folder(folder)
    ids = torch.tensor([loaded.tokenizer.encode(TEXTS[0]).ids])
    with torch.no_grad():
        ref = theirs.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False,
            pad_token_id=0, eos_token_id=None,
        )[0, ids.shape[1] :].tolist()  # fmt: skip
    ours = hf.greedy_continuation(loaded.model, ids[0].tolist(), 12)
    assert ours == ref


@pytest.mark.parametrize("kind", KINDS)
def test_the_w_o_identities_hold_for_every_family(built, kind):
    loaded = hf.open_folder(built[kind][1])
    cfg = loaded.model.config
    batch, real, _ = left_padded(loaded)
    with torch.no_grad():
        for mode in ("learned", "identity", "block_diagonal", "rank:3", "zero"):
            tr = loaded.model(batch.ids, batch.pad_mask, w_o=mode).trace
            for layer in tr.layers:
                total = layer.head_contributions().sum(1) + layer.b_o
                assert torch.allclose(total, layer.attn_out, atol=1e-5), mode
                if mode == "identity":
                    assert torch.equal(layer.attn_out, layer.concat)
        ablated = loaded.model(batch.ids, batch.pad_mask, ablate_heads=[(0, 1)]).trace
        assert (ablated.layers[0].z[:, 1] == 0).all()
    if cfg.n_kv_heads:  # grouped-query: consecutive query heads read one key/value head
        assert [cfg.kv_head(h) for h in range(cfg.n_heads)] == [0, 0, 1, 1]
    # W_o's bias: GPT-2's is learned; a Llama-style checkpoint has none (zero here)
    b_o = loaded.model.layers[0].attn.W_o.bias
    assert (b_o != 0).any() if kind.startswith("gpt2") else (b_o == 0).all()
    assert wo.W_O_MODES  # every mode the app offers is one of tfviz.core.wo's


@pytest.mark.parametrize("kind", KINDS)
def test_parameter_shapes_are_the_models_own(built, kind):
    loaded = hf.open_folder(built[kind][1])
    model = loaded.model
    shapes = decoder_weights.parameter_shapes(model.config)
    # The biases the family lacks are left out, but W_o's: a zero b_o stays.
    dropped = set(shapes) - set(model.state_dict())
    maps = {name.removesuffix(".bias").split(".")[-1] for name in dropped}
    family = kind.split("-")[0]  # GPT-2 has every bias but the head's, Qwen2 q, k and v's
    assert maps == {"head"} | {"gpt2": set(), "qwen2": {"fc1", "up", "fc2"}}.get(
        family, {"W_q", "W_k", "W_v", "fc1", "up", "fc2"}
    )
    assert all(name.endswith(".bias") for name in dropped)
    assert model.head.bias is None and model.layers[0].attn.W_o.bias is not None
    assert {k: v for k, v in shapes.items() if k not in dropped} == {
        k: tuple(v.shape) for k, v in model.state_dict().items()
    }
    unique = {id(p): p.numel() for p in model.parameters()}
    # config.n_params counts them (a bound checked before anything is read)
    assert model.config.n_params == sum(unique.values()) + sum(shapes[k][0] for k in dropped)
    assert (model.head.weight is model.embed.weight) == model.config.tie_head


def test_a_folder_is_described_without_loading(built):
    info = hf.describe_folder(built["llama"][1])
    assert info.causal_lm and not info.masked_lm and info.family == "Llama"
    assert info.config.n_kv_heads == 2 and info.config.positions == "rotary"
    info = hf.describe_folder(built["gpt2"][1])
    assert info.causal_lm and info.family == "GPT-2" and info.config.tie_head


def _copy_with_config(src: Path, dst: Path, **changes) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    raw = json.loads((src / "config.json").read_text())
    raw.update(changes)
    (dst / "config.json").write_text(json.dumps(raw))
    return dst


@pytest.mark.parametrize(
    "kind, changes, words",
    [
        ("llama", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}},
         "'yarn'"),
        ("llama", {"rope_scaling": {"type": "linear", "factor": 2.0}}, "'linear'"),
        ("llama", {"head_dim": 4}, "head_dim=4"),
        ("llama", {"hidden_act": "gelu"}, "hidden_act"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
        ("gpt2", {"n_head": 3}, "divisible"),
        ("qwen2", {"num_key_value_heads": 3}, "n_kv_heads"),
        ("gpt2", {"n_layer": 1000}, "n_layers must be between"),
    ],
)  # fmt: skip
def test_a_variant_tfviz_does_not_compute_is_refused_by_name(built, tmp_path, kind, changes, words):
    folder = _copy_with_config(built[kind][1], tmp_path / "variant", **changes)
    with pytest.raises(PretrainedError, match=words):
        hf.describe_folder(folder)
    with pytest.raises(PretrainedError, match=words):
        hf.open_folder(folder)


def test_a_decoder_in_a_pickle_is_refused_and_one_beside_safetensors_never_read(built, tmp_path):
    folder = _copy_with_config(built["gpt2"][1], tmp_path / "pickled")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(hf.UnsafeFileError, match="pickle.*pytorch_model.bin"):
        hf.open_folder(folder)
    beside = _copy_with_config(built["gpt2"][1], tmp_path / "beside")
    (beside / "pytorch_model.bin").write_bytes(b"\x80\x04 not read: unpickling it would fail")
    assert hf.open_folder(beside).model.config.causal


def test_a_left_padded_sequence_reads_as_it_does_alone(built):
    loaded = hf.open_folder(built["llama"][1])
    batch, real, _ = left_padded(loaded)
    with torch.no_grad():
        together = loaded.model(batch.ids, batch.pad_mask, trace=False).logits
        for b, text in enumerate(TEXTS):
            alone = loaded.model(torch.tensor([loaded.tokenizer.encode(text).ids])).logits[0]
            assert torch.allclose(together[b, real[b]], alone, atol=1e-5)
    fast = Interventions()
    assert fast.w_o_modes(2) == ["learned", "learned"]


def test_a_gpt2_with_only_vocab_json_and_merges_txt_tokenizes_as_gpt2s_own(built, tmp_path):
    """GPT-2's slow tokenizer files stand in for tokenizer.json, splitting text as transformers'
    GPT2Tokenizer does."""
    from tokenizers import Tokenizer

    folder = _copy_with_config(built["gpt2"][1], tmp_path / "slow")
    Tokenizer.from_file(str(folder / "tokenizer.json")).model.save(str(folder))
    (folder / "tokenizer.json").unlink()
    loaded = hf.open_folder(folder)
    slow = transformers.GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    for text in TEXTS + ["中文 and  spaces"]:
        assert list(loaded.tokenizer.encode(text).ids) == slow.encode(text), text
    # a special token's name typed is text, as in every tfviz tokenizer (GPT2Tokenizer would
    # read it as the special token)
    assert loaded.tokenizer.sep_id not in loaded.tokenizer.encode("<|endoftext|> typed").ids
    (folder / "merges.txt").unlink()
    with pytest.raises(hf.MissingFileError, match="vocab.json \\+ merges.txt"):
        hf.open_folder(folder)
    with pytest.raises(hf.MissingFileError, match="vocab.json \\+ merges.txt"):
        hf.describe_folder(folder)  # said from the file names alone


@pytest.mark.parametrize("kind", KINDS)
def test_the_parameters_shown_are_the_checkpoints_own(built, kind):
    """The picker and sidebar count what transformers counts, not tfviz's zero biases."""
    theirs, folder = built[kind]
    want = sum(p.numel() for p in theirs.parameters())  # a tied head counted once
    assert hf.open_folder(folder).n_params == want
    assert hf.describe_folder(folder).n_params == want


def test_the_next_tokens_are_the_softmaxs_largest(built):
    loaded = hf.open_folder(built["qwen2"][1])
    ids = torch.tensor([loaded.tokenizer.encode(TEXTS[2]).ids])
    with torch.no_grad():
        logits = loaded.model(ids, trace=False).logits[0]
    probs = torch.softmax(logits.double(), dim=-1)
    want = probs.topk(5, dim=-1)
    for row, got in enumerate(hf.next_tokens(logits)):
        assert list(got.ids) == want.indices[row].tolist()
        assert got.probs == pytest.approx(want.values[row].tolist(), rel=1e-5)
    from tfviz.core.trace import run_trace

    # run_trace reads them without making the logits whole (trace.head_top_next)
    task = hf.NextTokenTask(loaded.tokenizer)
    tr = run_trace(loaded.model, task, TEXTS[2])
    assert (tr.top_ids == want.indices.numpy()).all()
    assert tr.top_probs == pytest.approx(want.values.numpy(), rel=1e-5)
    assert tr.prediction == task.answer_from_logits(logits, len(TEXTS[2]))


def test_a_llama_saved_by_older_transformers_opens_and_agrees(built, tmp_path):
    """transformers 4 wrote rope_theta at the top and rope_scaling null, no rope_parameters;
    weights often in bfloat16. Both open, and agree with the same model run in float32."""
    from safetensors.torch import load_file, save_file

    theirs, src = built["llama"]
    raw = json.loads((src / "config.json").read_text())
    theta = raw.pop("rope_parameters")["rope_theta"]
    folder = _copy_with_config(src, tmp_path / "old", rope_theta=theta, rope_scaling=None)
    raw_new = json.loads((folder / "config.json").read_text())
    raw_new.pop("rope_parameters")
    (folder / "config.json").write_text(json.dumps(raw_new))
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, folder / "model.safetensors")
    loaded = hf.open_folder(folder)
    assert loaded.model.config.rope_theta == theta
    ids = torch.tensor([loaded.tokenizer.encode(TEXTS[0]).ids])
    rounded = copy.deepcopy(theirs)  # the module's model stays as built for the other tests
    with torch.no_grad():
        # the oracle with the same rounded weights: bf16 -> float32, as tfviz reads them
        for p in rounded.parameters():
            p.data = p.data.to(torch.bfloat16).float()
        want = rounded(input_ids=ids).logits
        got = loaded.model(ids).logits
    assert torch.allclose(got, want, atol=TOL)


def test_a_gpt2_saved_without_its_prefix_opens(built, tmp_path):
    """The original GPT-2 files name tensors without "transformer." (GPT2Model's names) and
    keep the causal-mask buffers h.{i}.attn.bias: both are read as they are."""
    from safetensors.torch import load_file, save_file

    theirs, src = built["gpt2"]
    folder = _copy_with_config(src, tmp_path / "bare")
    tensors = load_file(folder / "model.safetensors")
    bare = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    bare["h.0.attn.bias"] = torch.ones(1, 1, 64, 64).tril()  # the old mask buffer
    save_file(bare, folder / "model.safetensors")
    loaded = hf.open_folder(folder)
    assert any(name == "h.0.attn.bias" for name, _ in loaded.ignored)
    ids = torch.tensor([loaded.tokenizer.encode(TEXTS[1]).ids])
    with torch.no_grad():
        assert torch.allclose(loaded.model(ids).logits, theirs(input_ids=ids).logits, atol=TOL)


def test_an_untied_embedding_stays_in_its_stored_half_precision(built, tmp_path):
    """The one weight a decoder only indexes (an untied token embedding) is kept as stored; every
    weight it multiplies is float32. The logits equal the same model's with that table rounded."""
    from safetensors.torch import load_file, save_file

    theirs, src = built["llama"]  # untied: lm_head.weight is its own tensor
    folder = _copy_with_config(src, tmp_path / "bf16")
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, folder / "model.safetensors")
    model = hf.open_folder(folder).model
    assert model.embed.weight.dtype == torch.bfloat16
    others = [p for n, p in model.named_parameters() if n != "embed.weight"]
    assert others and all(p.dtype == torch.float32 for p in others)
    rounded = copy.deepcopy(theirs)
    with torch.no_grad():
        for p in rounded.parameters():
            p.data = p.data.to(torch.bfloat16).float()
        ids = torch.tensor([[1, 5, 9, 2, 7]])
        assert torch.allclose(model(ids).logits, rounded(input_ids=ids).logits, atol=TOL)
    tied = hf.open_folder(built["gpt2"][1]).model  # a tied table is multiplied: float32
    assert tied.embed.weight.dtype == torch.float32


# ---- a Llama folder with SentencePiece's tokenizer.json (as Llama's own and most made elsewhere)

SP_TEXTS = ["the lazy fox 我爱 jumps", "hello class", "é ü x", "W_o mixes heads"]


def sentencepiece_llama(folder: Path):
    """A tiny Llama saved with transformers' LlamaTokenizerFast over a SentencePiece-style BPE
    (spaces as "▁" by the normaliser, no pre-tokeniser, byte fallback: a character outside the
    vocabulary is its UTF-8 bytes, "<0xC3>" "<0xA9>"), as Llama's own tokenizer.json is."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
         decoders.Strip(" ", 1, 0)]
    )  # fmt: skip
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    corpus = ["the quick brown fox jumps over the lazy dog", "attention heads mix", "我爱北京"]
    trainer = trainers.BpeTrainer(vocab_size=380, special_tokens=specials, initial_alphabet=[])
    tok.train_from_iterator(corpus * 20, trainer)
    fast = transformers.LlamaTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        add_bos_token=True,  # as Llama's tokenizer_config.json says
    )  # fmt: skip
    fast.save_pretrained(folder)
    cfg = transformers.LlamaConfig(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model, transformers.AutoTokenizer.from_pretrained(folder)


def test_a_llama_with_a_sentencepiece_tokenizer_opens_and_agrees(tmp_path):
    """What transformers saves for a Llama with SentencePiece-style pieces: tfviz reads the same
    ids, the same logits and the same greedy continuation, and shows a character spelled as
    bytes as the character ("é", "…"), with the exact pieces kept for the hover."""
    from tfviz.core.trace import run_trace
    from tfviz.hf.causal_lm import greedy_continuation

    model, fast = sentencepiece_llama(tmp_path / "llama-sp")
    loaded = hf.open_folder(tmp_path / "llama-sp")
    task = hf.NextTokenTask(loaded.tokenizer)
    for text in SP_TEXTS:
        ids = list(loaded.tokenizer.encode(text).ids)
        assert ids == fast(text).input_ids, text  # the BOS and every piece
        with torch.no_grad():
            want = model(torch.tensor([ids])).logits[0]
            got = loaded.model(torch.tensor([ids])).logits[0]
        assert (got - want).abs().max() <= TOL, text
        ours = greedy_continuation(loaded.model, ids, 8)
        theirs = model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)
        assert ours == theirs[0, len(ids) :].tolist(), text
        assert loaded.tokenizer.decode_ids(ours) == fast.decode(ours)
    labels = run_trace(loaded.model, task, "é ü x").labels
    shown = ["<s>", "▁ (1)", "é", "… (3)", "▁ (4)", "ü", "… (6)", "▁ (7)", "x"]
    assert [str(label) for label in labels] == shown
    assert labels[2].spelled == "<0xC3>" and labels[3].spelled == "<0xA9>"  # the hover's
    # A byte piece alone (a next-token answer): its character where one byte is one, else as
    # spelled, never "\ufffd".
    byte_a, byte_c3 = (fast.convert_tokens_to_ids(p) for p in ("<0x41>", "<0xC3>"))
    assert loaded.tokenizer.piece_text(byte_a) == "A"
    assert loaded.tokenizer.piece_text(byte_c3) == "<0xC3>"
