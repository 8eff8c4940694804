"""The decoder families tfviz opens, each written once: which checkpoint tensor becomes W_q, W_k,
W_v, W_o and the rest of tfviz.core.model.Transformer run causally, and how config.json's fields
become its ModelConfig.

- GPT-2 (model_type "gpt2": GPT-2, DistilGPT2): learned positions, pre-LayerNorm, tanh GELU, the
  head tied to the token embedding. Its attention is one fused Conv1D "c_attn": a (D, 3D) matrix
  stored as (in, out), the transpose of nn.Linear's (out, in), whose output columns are q, k and v
  side by side; "c_proj" is W_o. tfviz splits and transposes them, so each role is the nn.Linear
  it is in every other family (seed 004: one big projection per role).
- Llama-style ("llama", "mistral", "qwen2"): rotary positions, RMSNorm, grouped-query attention
  (num_key_value_heads key/value heads), a gated SiLU feed-forward net (gate, up, down), a head
  tied or not. Biases only where the family has them: Qwen2's q, k and v; Llama's where
  attention_bias / mlp_bias say. W_o's bias, where a checkpoint lacks it, is a zero vector in
  tfviz's model, which adds nothing: every W_o view keeps one shape for every family. Any other
  bias it lacks (the head's in every family) is left out (None; DecoderPlan.biases_dropped).

Facts about the checkpoints (names, layouts, which configs change the computation) are read from
transformers' modelling code; tests/hf/test_hf_decoders.py checks each family against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfviz.core.config import LIMITS, ModelConfig
from tfviz.core.model import parameter_shapes
from tfviz.hf.errors import ConfigError, UnknownFamilyError
from tfviz.hf.family import Family
from tfviz.hf.files import eps_field as _eps
from tfviz.hf.files import int_field as _int

# transformers' activation names -> tfviz.core.config.ACTIVATIONS, for the decoders' feed-forward.
GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                    "relu": "relu"}  # fmt: skip


@dataclass(frozen=True)
class Source:
    """Where one tfviz parameter comes from: a checkpoint tensor, taken as it is, transposed
    (GPT-2's Conv1D), or one of the equal parts of its last axis (GPT-2's fused q, k, v) then
    transposed. name None: no tensor, a zero bias."""

    name: str | None
    transpose: bool = False
    part: int | None = None  # which third of c_attn's output (0 q, 1 k, 2 v)
    parts: int = 1
    optional: bool = False  # a bias the file may hold or not (zero when absent)


@dataclass(frozen=True)
class DecoderArchitecture:
    """What one config.json says, in tfviz's terms."""

    fields: dict  # ModelConfig keyword arguments (every field but dropout, pool, embed)
    positions_in_file: int  # rows of a learned position table in the checkpoint (0: rotary)
    qkv_bias: bool  # the file holds q, k, v biases
    o_bias: bool  # ... W_o's bias
    mlp_bias: bool  # ... the feed-forward net's biases
    add_bos: bool  # the tokenizer puts the beginning-of-sequence token before a text


def _positions(raw: dict, key: str) -> tuple[int, int]:
    """(positions in the file, positions tfviz reads): at most LIMITS["max_len"]."""
    n = _int(raw, key)
    if n < 2:
        raise ConfigError("needs_integer", key=key, value=repr(n))
    return n, min(n, LIMITS["max_len"])


def _refuse_variant(raw: dict, key: str) -> None:
    """UnknownFamilyError when config.json switches on a variant tfviz does not compute."""
    if raw.get(key):
        raise UnknownFamilyError("decoder_variant", key=key, value=repr(raw[key]))


def read_gpt2(raw: dict) -> DecoderArchitecture:
    for key in ("add_cross_attention", "scale_attn_by_inverse_layer_idx"):
        _refuse_variant(raw, key)
    if raw.get("scale_attn_weights", True) is not True:
        raise UnknownFamilyError(
            "decoder_variant", key="scale_attn_weights", value=repr(raw["scale_attn_weights"])
        )
    act = raw.get("activation_function", "gelu_new")
    if act not in GPT2_ACTIVATIONS:
        raise UnknownFamilyError(
            "unknown_activation", key="activation_function", value=repr(act),
            known=list(map(repr, GPT2_ACTIVATIONS)),
        )  # fmt: skip
    D = _int(raw, "n_embd")
    inner = raw.get("n_inner")
    in_file, max_len = _positions(raw, "n_positions")
    return DecoderArchitecture(
        fields=dict(
            vocab_size=_int(raw, "vocab_size"),
            d_model=D,
            n_heads=_int(raw, "n_head"),
            d_ff=4 * D if inner is None else _int(raw, "n_inner"),
            n_layers=_int(raw, "n_layer"),
            max_len=max_len,
            activation=GPT2_ACTIVATIONS[act],
            norm_eps=_eps(raw, "layer_norm_epsilon", 1e-5),
            norm="pre",
            causal=True,
            tie_head=raw.get("tie_word_embeddings", True) is not False,
        ),
        positions_in_file=in_file,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        add_bos=False,
    )


def _rope_theta(raw: dict) -> float:
    """The rotary base; UnknownFamilyError for a scaled rotation (by its name), which tfviz does
    not compute. transformers 5 writes rope_parameters, earlier versions rope_theta and
    rope_scaling."""
    params = raw.get("rope_parameters")
    scaling = raw.get("rope_scaling")
    kinds = []
    for d in (params, scaling):
        if isinstance(d, dict):
            kinds.append(d.get("rope_type", d.get("type", "default")))
        elif d is not None:
            key = "rope_parameters" if d is params else "rope_scaling"
            raise ConfigError("needs_object", key=key)
    for kind in kinds:
        if kind != "default":
            raise UnknownFamilyError("rope_scaling", value=repr(kind), default=repr("default"))
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    theta = raw.get("rope_theta", 10_000.0) if theta is None else theta
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise ConfigError("bad_rope_theta", value=repr(theta))
    return float(theta)


def read_llama_style(raw: dict, model_type: str) -> DecoderArchitecture:
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise UnknownFamilyError(
            "unknown_activation", key="hidden_act", value=repr(act), known=[repr("silu")]
        )
    D, H = _int(raw, "hidden_size"), _int(raw, "num_attention_heads")
    head_dim = raw.get("head_dim")
    if head_dim is not None and head_dim != D // H:
        raise UnknownFamilyError("head_dim", value=repr(head_dim), d_k=D // H)
    in_file, max_len = _positions(raw, "max_position_embeddings")
    # A sliding window at least as wide as what tfviz reads is full attention.
    window = raw.get("sliding_window")
    windowed = raw.get("use_sliding_window", model_type == "mistral")
    if windowed and window is not None:
        max_len = min(max_len, _int(raw, "sliding_window"))
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        _refuse_variant(raw, key)
    qwen = model_type == "qwen2"
    attention_bias = bool(raw.get("attention_bias", False))
    return DecoderArchitecture(
        fields=dict(
            vocab_size=_int(raw, "vocab_size"),
            d_model=D,
            n_heads=H,
            n_kv_heads=_int(raw, "num_key_value_heads", H),
            d_ff=_int(raw, "intermediate_size"),
            n_layers=_int(raw, "num_hidden_layers"),
            max_len=max_len,
            activation="silu",
            norm_eps=_eps(raw, "rms_norm_eps", 1e-6),
            norm="pre",
            norm_type="rms",
            mlp="gated",
            positions="rotary",
            rope_theta=_rope_theta(raw),
            causal=True,
            tie_head=raw.get("tie_word_embeddings", False) is True,
        ),
        positions_in_file=0,
        qkv_bias=qwen or attention_bias,
        o_bias=attention_bias and not qwen,
        mlp_bias=bool(raw.get("mlp_bias", False)),
        add_bos=model_type in ("llama", "mistral"),
    )


def _head_sources(config: ModelConfig, sources: dict) -> dict:
    """The head: the token embedding when tied (no tensor of its own), else lm_head.weight
    (outside the body's prefix); its bias is zero in every family."""
    sources["head.weight"] = Source(None if config.tie_head else "lm_head.weight")
    sources["head.bias"] = Source(None)
    return sources


def gpt2_sources(config: ModelConfig, arch: DecoderArchitecture, prefix: str) -> dict:
    p = prefix
    out = {"embed.weight": Source(f"{p}wte.weight"), "pos": Source(f"{p}wpe.weight")}
    for i in range(config.n_layers):
        h, ours = f"{p}h.{i}.", f"layers.{i}."
        for part, role in enumerate(("W_q", "W_k", "W_v")):
            out[f"{ours}attn.{role}.weight"] = Source(f"{h}attn.c_attn.weight", True, part, 3)
            out[f"{ours}attn.{role}.bias"] = Source(f"{h}attn.c_attn.bias", False, part, 3)
        for mine, theirs in (("attn.W_o", "attn.c_proj"), ("ff.fc1", "mlp.c_fc"),
                             ("ff.fc2", "mlp.c_proj")):  # fmt: skip
            out[f"{ours}{mine}.weight"] = Source(f"{h}{theirs}.weight", transpose=True)
            out[f"{ours}{mine}.bias"] = Source(f"{h}{theirs}.bias")
        for mine, theirs in (("norm1", "ln_1"), ("norm2", "ln_2")):
            out[f"{ours}{mine}.weight"] = Source(f"{h}{theirs}.weight")
            out[f"{ours}{mine}.bias"] = Source(f"{h}{theirs}.bias")
    out["norm_f.weight"], out["norm_f.bias"] = Source(f"{p}ln_f.weight"), Source(f"{p}ln_f.bias")
    return _head_sources(config, out)


def llama_sources(config: ModelConfig, arch: DecoderArchitecture, prefix: str) -> dict:
    p = prefix
    out = {"embed.weight": Source(f"{p}embed_tokens.weight")}
    for i in range(config.n_layers):
        h, ours = f"{p}layers.{i}.", f"layers.{i}."
        for role, proj in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"),
                           ("W_o", "o_proj")):  # fmt: skip
            out[f"{ours}attn.{role}.weight"] = Source(f"{h}self_attn.{proj}.weight")
            bias = arch.o_bias if role == "W_o" else arch.qkv_bias
            out[f"{ours}attn.{role}.bias"] = Source(f"{h}self_attn.{proj}.bias" if bias else None)
        for mine, theirs in (("ff.fc1", "gate_proj"), ("ff.up", "up_proj"),
                             ("ff.fc2", "down_proj")):  # fmt: skip
            out[f"{ours}{mine}.weight"] = Source(f"{h}mlp.{theirs}.weight")
            out[f"{ours}{mine}.bias"] = Source(f"{h}mlp.{theirs}.bias" if arch.mlp_bias else None)
        out[f"{ours}norm1.weight"] = Source(f"{h}input_layernorm.weight")
        out[f"{ours}norm2.weight"] = Source(f"{h}post_attention_layernorm.weight")
    out["norm_f.weight"] = Source(f"{p}norm.weight")
    return _head_sources(config, out)


# tfviz's own language models (tfviz.training.language writes their folders): config.json holds
# the ModelConfig itself under "tfviz_config" and the weights keep the Transformer's own names, so a
# model trained here (attention-only layers included, which no Hugging Face family has) opens
# through the same loader, checks and views as a GPT-2 or Llama folder.
TFVIZ_MODEL_TYPE = "tfviz-lm"
# ModelConfig fields a folder may not set: the loader fixes them for every decoder.
_FIXED_FIELDS = ("n_out", "dropout", "pool", "embed")


def read_tfviz(raw: dict) -> DecoderArchitecture:
    fields = raw.get("tfviz_config")
    if not isinstance(fields, dict):
        raise ConfigError("needs_object", key="tfviz_config")
    fields = {k: v for k, v in fields.items() if k not in _FIXED_FIELDS}
    if fields.get("causal") is not True or fields.get("tie_head"):
        variant = {k: fields.get(k) for k in ("causal", "tie_head")}
        raise UnknownFamilyError("decoder_variant", key="tfviz_config", value=repr(variant))
    learned = fields.get("positions", "learned") == "learned"
    return DecoderArchitecture(
        fields=fields,
        positions_in_file=_int(fields, "max_len") if learned else 0,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        add_bos=False,
    )


def tfviz_sources(config: ModelConfig, arch: DecoderArchitecture, prefix: str) -> dict:
    """Every parameter from the tensor of its own name (the position table stored (T, D))."""
    return {name: Source(f"{prefix}{name}") for name in parameter_shapes(config)}


_ROTARY_IGNORED = {
    r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq": "a buffer of the rotary "
    "frequencies, recomputed from rope_theta",
    r"(model\.)?rotary_emb\.inv_freq": "a buffer of the rotary frequencies, recomputed from "
    "rope_theta",
}
_TIED_HEAD = {r"lm_head\.weight": "the head, tied to the token embedding (config.json's "
              "tie_word_embeddings): the embedding is read instead"}  # fmt: skip

GPT2 = Family(
    decoder=True,
    name="GPT-2",
    model_types=("gpt2",),
    prefix="transformer.",
    embedding="wte.weight",
    read=read_gpt2,
    sources=gpt2_sources,
    ignored={
        r"(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)": "a buffer of the causal mask, "
        "not a weight (tfviz's model is causal by its config)",
        **_TIED_HEAD,
    },
    bos="<|endoftext|>",
    eos="<|endoftext|>",
    unk=None,
    bpe_files=True,
)
LLAMA = Family(
    decoder=True,
    name="Llama",
    model_types=("llama", "mistral"),
    prefix="model.",
    embedding="embed_tokens.weight",
    read=lambda raw: read_llama_style(raw, raw.get("model_type", "llama")),
    sources=llama_sources,
    ignored={**_ROTARY_IGNORED, **_TIED_HEAD},
)
QWEN2 = Family(
    decoder=True,
    name="Qwen2",
    model_types=("qwen2",),
    prefix="model.",
    embedding="embed_tokens.weight",
    read=lambda raw: read_llama_style(raw, "qwen2"),
    sources=llama_sources,
    ignored={**_ROTARY_IGNORED, **_TIED_HEAD},
    bos="<|endoftext|>",
    eos="<|endoftext|>",
    unk=None,
)
TFVIZ = Family(
    decoder=True,
    name="tfviz",
    model_types=(TFVIZ_MODEL_TYPE,),
    prefix="",
    embedding="embed.weight",
    read=read_tfviz,
    sources=tfviz_sources,
    bos="<|endoftext|>",
    eos="<|endoftext|>",
    unk=None,
)
DECODER_FAMILIES = (GPT2, LLAMA, QWEN2, TFVIZ)


def decoder_family_of(raw: dict) -> Family | None:
    """The decoder family config.json's model_type names, or None."""
    model_type = raw.get("model_type")
    for family in DECODER_FAMILIES:
        if model_type in family.model_types:
            return family
    return None
