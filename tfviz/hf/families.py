"""The encoder families tfviz opens, each written once: which checkpoint tensor is W_q, W_k, W_v,
W_o and the rest, and how config.json's fields become a tfviz ModelConfig.

Three families share one architecture (post-norm layers, learned positions, a LayerNorm over the
embedding sum, a GELU feed-forward net), so all run in tfviz.core.model.Transformer unchanged. What
differs:

- BERT (model_type "bert": BERT, MiniLM, bert-base-chinese): tensors named as transformers'
  BertModel writes them, under "bert." when a head was saved alongside (BertForMaskedLM);
  masked-LM head "cls.predictions.*"; two token types; position i reads row i.
- RoBERTa / XLM-R ("roberta", "xlm-roberta"): BERT's tensor names under "roberta."; head
  "lm_head.*"; positions start after the padding id (row pad_token_id + 1 for the first token),
  so tfviz keeps the rows from that offset on and the model reads max_position_embeddings -
  offset positions.
- DistilBERT ("distilbert"): its own names ("transformer.layer.{i}.attention.q_lin", ...), no token
  types, LayerNorm eps fixed at 1e-12 in its code (not in config.json), head "vocab_transform",
  "vocab_layer_norm", "vocab_projector".

Facts about the checkpoints (names, offsets, fixed eps, the RoBERTa head's exact GELU) are read
from transformers' modelling code; tests/hf/test_hf_encoders.py checks each family against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfviz.hf.decoders import DECODER_FAMILIES
from tfviz.hf.errors import ConfigError, UnknownFamilyError
from tfviz.hf.family import Family, Specials
from tfviz.hf.files import eps_field as _eps
from tfviz.hf.files import int_field as _int

# transformers' activation names -> tfviz.core.config.ACTIVATIONS. "gelu" is the exact erf form;
# "gelu_new" and "gelu_pytorch_tanh" are the tanh approximation.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}


BERT_SPECIALS = Specials(cls="[CLS]", sep="[SEP]", pad="[PAD]", unk="[UNK]", mask="[MASK]")
ROBERTA_SPECIALS = Specials(cls="<s>", sep="</s>", pad="<pad>", unk="<unk>", mask="<mask>")


@dataclass(frozen=True)
class Architecture:
    """What one config.json says, in tfviz's terms (every ModelConfig field but pool and n_out)."""

    fields: dict  # ModelConfig keyword arguments
    position_offset: int  # rows of the position table before token 0's (RoBERTa: pad id + 1)
    positions_in_file: int  # rows of the position table in the checkpoint
    tie_word_embeddings: bool  # the masked-LM decoder is the word embedding (may be absent)
    head_activation: str  # tfviz activation of the masked-LM head's transform


def _activation(raw: dict, key: str, default: str) -> str:
    name = raw.get(key, default)
    if name not in ACTIVATIONS:
        raise UnknownFamilyError(
            "unknown_activation", key=key, value=repr(name), known=list(map(repr, ACTIVATIONS))
        )
    return ACTIVATIONS[name]


def _refuse_variants(raw: dict) -> None:
    """BERT-layout configs that switch on something tfviz's Transformer does not compute."""
    position = raw.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise UnknownFamilyError(
            "relative_positions", value=repr(position), absolute=repr("absolute")
        )
    for key in ("is_decoder", "add_cross_attention"):
        if raw.get(key):
            raise UnknownFamilyError("not_an_encoder", key=key)


def _bert_like(raw: dict, offset: int) -> Architecture:
    _refuse_variants(raw)
    positions = _int(raw, "max_position_embeddings")
    eps = _eps(raw, "layer_norm_eps", 1e-12)
    return Architecture(
        fields=dict(
            vocab_size=_int(raw, "vocab_size"),
            d_model=_int(raw, "hidden_size"),
            n_heads=_int(raw, "num_attention_heads"),
            d_ff=_int(raw, "intermediate_size"),
            n_layers=_int(raw, "num_hidden_layers"),
            max_len=positions - offset,
            activation=_activation(raw, "hidden_act", "gelu"),
            norm_eps=eps,
            type_vocab_size=_int(raw, "type_vocab_size", 2),
            embed_norm=True,
            norm="post",
        ),
        position_offset=offset,
        positions_in_file=positions,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
        head_activation=_activation(raw, "hidden_act", "gelu"),
    )


def read_bert(raw: dict) -> Architecture:
    return _bert_like(raw, offset=0)


def read_roberta(raw: dict) -> Architecture:
    # Position ids are padding_idx + 1 + i for real token i (transformers'
    # create_position_ids_from_input_ids), so the table's first pad_token_id + 1 rows are never
    # read by a real token.
    pad = _int(raw, "pad_token_id", 1)
    if pad < 0:
        raise ConfigError("roberta_pad", pad=pad)
    arch = _bert_like(raw, offset=pad + 1)
    # RobertaLMHead applies the exact GELU whatever hidden_act says.
    return Architecture(**{**arch.__dict__, "head_activation": "gelu"})


def read_distilbert(raw: dict) -> Architecture:
    # sinusoidal_pos_embds needs nothing here: the sinusoidal table is saved as
    # embeddings.position_embeddings.weight like a learned one, and loads as such.
    positions = _int(raw, "max_position_embeddings", 512)
    activation = _activation(raw, "activation", "gelu")
    return Architecture(
        fields=dict(
            vocab_size=_int(raw, "vocab_size"),
            d_model=_int(raw, "dim"),
            n_heads=_int(raw, "n_heads"),
            d_ff=_int(raw, "hidden_dim"),
            n_layers=_int(raw, "n_layers"),
            max_len=positions,
            activation=activation,
            norm_eps=1e-12,  # fixed in DistilBERT's code, not read from config.json
            type_vocab_size=0,
            embed_norm=True,
            norm="post",
        ),
        position_offset=0,
        positions_in_file=positions,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
        head_activation=activation,
    )


# BERT's names, shared by RoBERTa and XLM-R. BERT's attention "output dense" is W_o: it maps the
# heads side by side (concat) to what is added to the residual stream.
BERT_EMBEDDING_KEYS = {
    "embed.weight": "embeddings.word_embeddings.weight",  # (vocab, D)
    "pos": "embeddings.position_embeddings.weight",  # (positions, D); tfviz keeps (1, max_len, D)
    "type_embed.weight": "embeddings.token_type_embeddings.weight",  # (types, D)
    "embed_norm.weight": "embeddings.LayerNorm.weight",
    "embed_norm.bias": "embeddings.LayerNorm.bias",
}
BERT_LAYER_KEYS = {
    "attn.W_q": "attention.self.query",
    "attn.W_k": "attention.self.key",
    "attn.W_v": "attention.self.value",
    "attn.W_o": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",  # post-norm: LN(x + attn_out)
    "ff.fc1": "intermediate.dense",
    "ff.fc2": "output.dense",
    "norm2": "output.LayerNorm",  # post-norm: LN(x + ffn)
}
# Kept by every family: buffers and heads that are not the encoder.
_COMMON_IGNORED = {
    r"embeddings\.position_ids": "a buffer of 0..positions-1, not a weight",
    r"embeddings\.token_type_ids": "a buffer of zeros, not a weight",
    r"(classifier|pre_classifier|qa_outputs)\.(weight|bias|dense\.weight|dense\.bias|"
    r"out_proj\.weight|out_proj\.bias)": "a fine-tuning head (classification or question "
    "answering); tfviz shows the encoder and, where present, the masked-LM head",
}
BERT = Family(
    name="BERT",
    model_types=("bert",),
    prefix="bert.",
    embedding=BERT_EMBEDDING_KEYS["embed.weight"],
    embedding_keys=BERT_EMBEDDING_KEYS,
    layer="encoder.layer.{i}",
    layer_keys=BERT_LAYER_KEYS,
    head_keys={
        "dense.weight": ("cls.predictions.transform.dense.weight",),
        "dense.bias": ("cls.predictions.transform.dense.bias",),
        "norm.weight": ("cls.predictions.transform.LayerNorm.weight",),
        "norm.bias": ("cls.predictions.transform.LayerNorm.bias",),
        "decoder.weight": ("cls.predictions.decoder.weight",),
        # transformers adds the decoder's own bias; it is tied to cls.predictions.bias unless
        # the word embedding is untied, and older files hold only the latter.
        "bias": ("cls.predictions.decoder.bias", "cls.predictions.bias"),
    },
    ignored={
        **_COMMON_IGNORED,
        r"pooler\.dense\.(weight|bias)": "BERT's [CLS] pooler; tfviz shows the hidden states",
        r"cls\.seq_relationship\.(weight|bias)": "the next-sentence head of BERT's pre-training",
        r"cls\.predictions\.bias": "the head's bias as declared; the decoder's own bias "
        "(cls.predictions.decoder.bias, the same vector when tied) is what is added",
    },
    specials=BERT_SPECIALS,
    read=read_bert,
    wordpiece=True,
)
ROBERTA = Family(
    name="RoBERTa",
    model_types=("roberta", "xlm-roberta"),
    prefix="roberta.",
    embedding=BERT_EMBEDDING_KEYS["embed.weight"],
    embedding_keys=BERT_EMBEDDING_KEYS,
    layer="encoder.layer.{i}",
    layer_keys=BERT_LAYER_KEYS,
    head_keys={
        "dense.weight": ("lm_head.dense.weight",),
        "dense.bias": ("lm_head.dense.bias",),
        "norm.weight": ("lm_head.layer_norm.weight",),
        "norm.bias": ("lm_head.layer_norm.bias",),
        "decoder.weight": ("lm_head.decoder.weight",),
        "bias": ("lm_head.decoder.bias", "lm_head.bias"),  # as BERT's: the decoder's first
    },
    ignored={
        **_COMMON_IGNORED,
        r"pooler\.dense\.(weight|bias)": "the [CLS] pooler; tfviz shows the hidden states",
        r"lm_head\.bias": "the head's bias as declared; the decoder's own bias (lm_head.decoder"
        ".bias, the same vector when tied) is what is added",
    },
    specials=ROBERTA_SPECIALS,
    read=read_roberta,
    wordpiece=False,
    bpe_files=True,
)
DISTILBERT = Family(
    name="DistilBERT",
    model_types=("distilbert",),
    prefix="distilbert.",
    embedding="embeddings.word_embeddings.weight",
    embedding_keys={
        "embed.weight": "embeddings.word_embeddings.weight",
        "pos": "embeddings.position_embeddings.weight",
        "embed_norm.weight": "embeddings.LayerNorm.weight",
        "embed_norm.bias": "embeddings.LayerNorm.bias",
    },
    layer="transformer.layer.{i}",
    layer_keys={
        "attn.W_q": "attention.q_lin",
        "attn.W_k": "attention.k_lin",
        "attn.W_v": "attention.v_lin",
        "attn.W_o": "attention.out_lin",
        "norm1": "sa_layer_norm",  # post-norm: LN(x + attn_out)
        "ff.fc1": "ffn.lin1",
        "ff.fc2": "ffn.lin2",
        "norm2": "output_layer_norm",  # post-norm: LN(x + ffn)
    },
    head_keys={
        "dense.weight": ("vocab_transform.weight",),
        "dense.bias": ("vocab_transform.bias",),
        "norm.weight": ("vocab_layer_norm.weight",),
        "norm.bias": ("vocab_layer_norm.bias",),
        "decoder.weight": ("vocab_projector.weight",),
        "bias": ("vocab_projector.bias",),
    },
    ignored=dict(_COMMON_IGNORED),
    specials=BERT_SPECIALS,
    read=read_distilbert,
    wordpiece=True,
)
FAMILIES = (BERT, ROBERTA, DISTILBERT)


def family_of(raw: dict) -> Family:
    """The family a config.json's model_type names; UnknownFamilyError for any other."""
    model_type = raw.get("model_type")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    known = [t for f in (*FAMILIES, *DECODER_FAMILIES) for t in f.model_types]
    raise UnknownFamilyError("unknown_model_type", value=repr(model_type), known=known)
