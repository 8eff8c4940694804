"""Random decoder folders of real models' sizes, as tfviz.hf opens them: built with transformers
(random weights cost what trained ones do) and saved with save_pretrained as safetensors, beside a
small byte-level BPE tokenizer.json (what the weights cost does not depend on what the pieces
spell). bench/hf_decoders.py times them against transformers; bench/load.py and
bench/ui_latency.py serve them to the app.

- gpt2: GPT-2 small (12 layers, 12 heads, D = 768, d_ff = 3072, 50,257 tokens, 1,024 positions,
  head tied); SMALL_GPT2: DistilGPT2's 6 layers.
- llama: SmolLM-135M (30 layers, 9 query heads sharing 3 key/value heads, D = 576, d_ff = 1536,
  49,152 tokens, head tied).
- qwen2: Qwen2-0.5B (24 layers, 14 query heads sharing 2 key/value heads, D = 896, d_ff = 4864,
  151,936 tokens, q/k/v biases, head tied).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2"}
# Real models' sizes (their config.json); the random weights cost what trained ones do.
SIZES = {
    "gpt2": dict(layers=12, heads=12, hidden=768, ff=3072, vocab=50257, positions=1024),
    "llama": dict(layers=30, heads=9, kv_heads=3, hidden=576, ff=1536, vocab=49152,
                  positions=2048, rope_theta=10_000.0, eps=1e-5),
    "qwen2": dict(layers=24, heads=14, kv_heads=2, hidden=896, ff=4864, vocab=151936,
                  positions=32768, rope_theta=1_000_000.0, eps=1e-6),
}  # fmt: skip
SMALL_GPT2 = dict(SIZES["gpt2"], layers=6)  # DistilGPT2
NAMED = {"gpt2": "GPT-2 small", "llama": "SmolLM-135M", "qwen2": "Qwen2-0.5B"}
WORDS = ("the a cat dog sat ran on mat quick brown fox jumps over lazy and is it was in of to "
         "that this with for as at by from".split())  # fmt: skip


def write_tokenizer(
    folder: Path, specials: list[str], corpus: list[str] | None = None, vocab_size: int = 400
) -> int:
    """A small byte-level BPE tokenizer.json with these special tokens first, trained on corpus
    (default: WORDS); returns its size. tests/hf/test_hf_decoders.py builds its folders with it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator(corpus or [" ".join(WORDS)] * 5, trainer)
    tok.save(str(folder / "tokenizer.json"))
    return tok.get_vocab_size()


def hf_config(kind: str, sizes: dict):
    """The transformers config and model class of this family at these sizes."""
    import transformers as T

    common = dict(attn_implementation="eager", tie_word_embeddings=True)
    if kind == "gpt2":
        cfg = T.GPT2Config(
            vocab_size=sizes["vocab"], n_embd=sizes["hidden"], n_layer=sizes["layers"],
            n_head=sizes["heads"], n_inner=sizes["ff"], n_positions=sizes["positions"],
            bos_token_id=0, eos_token_id=0, **common,
        )  # fmt: skip
        return cfg, T.GPT2LMHeadModel
    cls_cfg, cls = {
        "llama": (T.LlamaConfig, T.LlamaForCausalLM),
        "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM),
    }[kind]
    cfg = cls_cfg(
        vocab_size=sizes["vocab"], hidden_size=sizes["hidden"],
        num_hidden_layers=sizes["layers"], num_attention_heads=sizes["heads"],
        num_key_value_heads=sizes["kv_heads"], intermediate_size=sizes["ff"],
        max_position_embeddings=sizes["positions"], rms_norm_eps=sizes["eps"],
        rope_parameters={"rope_type": "default", "rope_theta": sizes["rope_theta"]},
        bos_token_id=1, eos_token_id=2, **common,
    )  # fmt: skip
    return cfg, cls


def build(kind: str, folder: Path, sizes: dict) -> None:
    """A random transformers decoder of this family and size saved in folder (safetensors), with
    a small tokenizer.json (and tokenizer_config.json naming its specials)."""
    import torch
    import transformers

    transformers.logging.disable_progress_bar()
    folder.mkdir(parents=True)
    if kind == "gpt2":
        write_tokenizer(folder, ["<|endoftext|>"])
    else:
        write_tokenizer(folder, ["<unk>", "<s>", "</s>"])
        specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
        (folder / "tokenizer_config.json").write_text(json.dumps(specials))
    cfg, cls = hf_config(kind, sizes)
    torch.manual_seed(0)
    model = cls(cfg).eval()
    model.save_pretrained(folder, safe_serialization=True)
    del model
    gc.collect()
