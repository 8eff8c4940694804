"""Random masked-LM encoder folders of a real size, as tfviz.hf opens them: BERT, RoBERTa and
DistilBERT built with transformers (random weights cost what trained ones do) and saved with
save_pretrained as safetensors, with tests/hf/test_hf_encoders.py's small tokenizers unless the
caller brings its own. bench/hf_families.py times them; bench/ui_latency.py --families serves
them to the app (with tokenizers of its own: its sentences must split into an exact number of
pieces).

Sizes: MINILM (MiniLM's: 6 layers, 12 heads, D = 384, d_ff = 1536; 30,522 pieces, 512 positions)
or BASE (BERT-base's 12 x 12 x 768).
"""

from __future__ import annotations

from pathlib import Path

FAMILIES = {"bert": "BERT", "roberta": "RoBERTa", "distilbert": "DistilBERT"}
MINILM = dict(layers=6, heads=12, hidden=384, ff=1536)
BASE = dict(layers=12, heads=12, hidden=768, ff=3072)


def small_tokenizer(kind: str, folder: Path) -> None:
    """tests/hf/test_hf_encoders.py's small tokenizer of the family's kind, written in folder."""
    from tests.hf.test_hf_encoders import _bpe_tokenizer_json, _vocab_txt

    (_bpe_tokenizer_json if kind == "roberta" else _vocab_txt)(folder)


def build(kind: str, folder: Path, sizes: dict, write_tokenizer=small_tokenizer) -> None:
    """A random transformers model of this family and size, saved in folder with the tokenizer
    files write_tokenizer(kind, folder) writes (bench/ui_latency.py brings its own: its sentences
    must split into an exact number of pieces)."""
    import torch
    import transformers as T

    folder.mkdir(parents=True)
    write_tokenizer(kind, folder)
    L, H, D, F = sizes["layers"], sizes["heads"], sizes["hidden"], sizes["ff"]
    if kind == "bert":
        cfg = T.BertConfig(vocab_size=30522, hidden_size=D, num_hidden_layers=L,
                           num_attention_heads=H, intermediate_size=F)  # fmt: skip
        cls = T.BertForMaskedLM
    elif kind == "roberta":
        cfg = T.RobertaConfig(vocab_size=30522, hidden_size=D, num_hidden_layers=L,
                              num_attention_heads=H, intermediate_size=F,
                              max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                              bos_token_id=0, eos_token_id=2)  # fmt: skip
        cls = T.RobertaForMaskedLM
    else:
        cfg = T.DistilBertConfig(vocab_size=30522, dim=D, n_layers=L, n_heads=H, hidden_dim=F)
        cls = T.DistilBertForMaskedLM
    torch.manual_seed(0)
    cls(cfg).eval().save_pretrained(folder, safe_serialization=True)
