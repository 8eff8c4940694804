"""Model configuration: one frozen, validated dataclass for the model, trainer and checkpoints.

Frozen because a config travels with a shared, cached model: no one may change it under others.
Validated on construction so a bad size fails at once with a message that says what to fix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from tfviz.refusal import Refusal

NORMS = ("post", "pre")
# "last": the last real token, the one token of a causal model that sees the whole sequence.
POOLS = ("none", "mean", "first", "last")
EMBEDS = ("token", "value")
# "gelu" is the exact (erf) GELU, as BERT uses; "gelu_tanh" its tanh approximation, which some
# checkpoints were trained with (transformers' "gelu_new" / "gelu_pytorch_tanh").
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
# Where a token's position enters: "learned", a table added to the embedding (seed 002, BERT,
# GPT-2); "rotary", q and k rotated by an angle that grows with the position (RoPE: Llama, Qwen2).
POSITIONS = ("learned", "rotary")
# "layer": LayerNorm (mean and variance, weight and bias); "rms": RMSNorm (root mean square only,
# weight only), as Llama-family models have.
NORM_TYPES = ("layer", "rms")
# The feed-forward net: "plain" fc2(act(fc1 x)); "gated" (SwiGLU) fc2(act(fc1 x) * up(x)).
MLPS = ("plain", "gated")

# Upper bounds keep an uploaded or hand-made config from asking for a model that would not fit a
# classroom server; they are far above every bundled model. vocab_size admits a multilingual
# word-piece vocabulary (BERT's has 30,522 pieces, RoBERTa's 50,265, XLM-R's 250,002); the size
# of what an upload may build is capped separately, by parameter count (tfviz.settings.MAX_PARAMS,
# from n_params below; tfviz.hf.shards.MAX_PARAMS for pretrained folders).
LIMITS = {
    "vocab_size": 262_144,
    "n_out": 262_144,  # a decoder's head reads out a whole vocabulary
    "d_model": 1024,
    "n_heads": 64,
    "n_kv_heads": 64,
    "d_ff": 8192,  # Qwen2-0.5B: 4,864
    "n_layers": 48,  # SmolLM-135M: 30, Qwen2-0.5B: 24
    "max_len": 1024,  # GPT-2 reads 1,024 positions
    "type_vocab_size": 16,  # BERT uses 2 (sentence A / B)
}
# Fields where 0 is allowed and means "none": the code of what 0 means (refusal.config.<code>).
ZERO_MEANS_NONE = {
    "n_out": "zero_no_head",
    "type_vocab_size": "zero_no_token_types",
    "n_kv_heads": "zero_kv_per_query",
}


class ConfigValueError(Refusal, ValueError):
    """A config that cannot be built, as a code and values: the catalogue (refusal.config.*)
    words it in the page's language; str() is the English."""

    PREFIX = "refusal.config."


@dataclass(frozen=True)
class ModelConfig:
    """Shape of an encoder: sizes, norm placement, input embedding and output pooling."""

    vocab_size: int  # number of token ids (alphabet + BOS if any + PAD; or word-pieces)
    n_out: int  # outputs per position (pool="none") or per sequence; 0: no head (see Transformer)
    d_model: int = 32  # D: width of the residual stream (seed 002: 32)
    n_heads: int = 4  # H: heads per layer; d_k = D / H
    d_ff: int = 64  # hidden width of the position-wise feed-forward net
    n_layers: int = 2  # L: encoder layers
    max_len: int = 16  # T_max: positions with a learned embedding (BOS included)
    dropout: float = 0.1  # on attention weights and on each residual branch, as in the seeds
    norm: str = (
        "post"  # "post": x = LN(x + sublayer(x)) as in the paper; "pre": x + sublayer(LN(x))
    )
    # "none": one output per token; "mean" over real tokens; the "first" or "last" real token
    pool: str = "none"
    embed: str = "token"  # "token": nn.Embedding; "value": Linear(1, D) on the id (seed 002)
    # The fields below let a pretrained BERT-style encoder (tfviz.hf.pretrained) run in this same
    # Transformer; their defaults are what every tfviz model before them had, so old checkpoints,
    # whose metadata lacks them, load unchanged.
    activation: str = "relu"  # of the feed-forward net: "relu", "gelu" (exact, erf), "gelu_tanh"
    norm_eps: float = 1e-5  # every LayerNorm's epsilon (torch's default; BERT: 1e-12)
    type_vocab_size: int = 0  # token-type (segment) embeddings added to the input; 0: none
    embed_norm: bool = False  # a LayerNorm after the embedding sum, before layer 0 (BERT)
    # False: a layer is attention alone (no feed-forward sublayer, no second LayerNorm), the
    # atlas's "FFN off" cells (tfviz.experiments.atlas), where W_o is the last linear map before the
    # head.
    ffn: bool = True
    # Decoders (tfviz.hf.families' GPT-2 and Llama-style families, and the trainer's causal toy
    # models). Every default is what an encoder has, so every older checkpoint loads unchanged.
    causal: bool = False  # a query reads only keys at or before its position
    # Grouped-query attention: this many key/value heads, each shared by n_heads / n_kv_heads
    # query heads; 0: as many as query heads (multi-head attention).
    n_kv_heads: int = 0
    positions: str = "learned"  # tfviz.core.config.POSITIONS
    rope_theta: float = 10_000.0  # the rotary angle's base (rotary positions only)
    norm_type: str = "layer"  # tfviz.core.config.NORM_TYPES
    mlp: str = "plain"  # tfviz.core.config.MLPS
    # The head reads out with the token embedding's own matrix (GPT-2, most small Llama-style
    # models): n_out must equal vocab_size. The head's bias is then zero.
    tie_head: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ConfigValueError("not_integer", field=f.name, got=repr(value))
            if f.type == "bool" and not isinstance(value, bool):
                raise ConfigValueError("not_bool", field=f.name, got=repr(value))
            low = 0 if f.name in ZERO_MEANS_NONE else 1
            if f.name in LIMITS and not low <= value <= LIMITS[f.name]:
                limits = dict(field=f.name, low=low, high=LIMITS[f.name], got=value)
                if low == 0:  # what 0 means, worded in the same language
                    zero = ConfigValueError(ZERO_MEANS_NONE[f.name])
                    raise ConfigValueError("out_of_range_zero", **limits, zero=zero)
                raise ConfigValueError("out_of_range", **limits)
        eps = self.norm_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps <= 0.1:
            raise ConfigValueError("norm_eps", got=repr(eps))
        if self.d_model % self.n_heads:
            raise ConfigValueError("heads_divide", d_model=self.d_model, n_heads=self.n_heads)
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ConfigValueError("dropout", got=repr(self.dropout))
        if self.n_kv_heads and self.n_heads % self.n_kv_heads:
            raise ConfigValueError("kv_heads", n_heads=self.n_heads, n_kv_heads=self.n_kv_heads)
        theta = self.rope_theta
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
            raise ConfigValueError("rope_theta", got=repr(theta))
        if self.positions == "rotary" and self.d_k % 2:
            raise ConfigValueError("rotary_odd", d_k=self.d_k)
        if self.tie_head and (self.n_out != self.vocab_size or self.embed != "token"):
            raise ConfigValueError(
                "tied_head", token="'token'", vocab_size=self.vocab_size, n_out=self.n_out
            )
        choices = (
            ("norm", NORMS),
            ("pool", POOLS),
            ("embed", EMBEDS),
            ("activation", ACTIVATIONS),
            ("positions", POSITIONS),
            ("norm_type", NORM_TYPES),
            ("mlp", MLPS),
        )
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                got = repr(getattr(self, name))
                raise ConfigValueError("not_one_of", field=name, allowed=str(allowed), got=got)

    @property
    def n_params(self) -> int:
        """Parameters of a Transformer of this config, from its sizes alone: nothing is allocated.

        Lets a loader refuse an over-large model named in a small file before building it.
        tests/serve/test_work.py checks the formula against real Encoders of every kind.
        """

        def linear(n_in: int, n_out: int) -> int:
            return n_in * n_out + n_out  # weight + bias

        D, F, KV = self.d_model, self.d_ff, self.kv_heads * self.d_k
        # LayerNorm: weight + bias; RMSNorm: weight only
        norm = 2 * D if self.norm_type == "layer" else D
        embed = self.vocab_size * D if self.embed == "token" else linear(1, D)
        embed += self.max_len * D if self.positions == "learned" else 0
        embed += self.type_vocab_size * D  # token types
        embed += norm if self.embed_norm else 0
        # W_q, W_k, W_v, W_o; the attention's norm
        layer = 2 * linear(D, D) + 2 * linear(D, KV) + norm
        if self.ffn:
            gated = linear(D, F) if self.mlp == "gated" else 0
            layer += linear(D, F) + gated + linear(F, D) + norm  # the feed-forward net, its norm
        final_norm = norm if self.norm == "pre" else 0
        # A tied head's matrix is the embedding's: only its bias is its own.
        head = (self.n_out if self.tie_head else linear(D, self.n_out)) if self.n_out else 0
        return embed + self.n_layers * layer + final_norm + head

    @property
    def d_k(self) -> int:
        """Width of one head."""
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_heads, or n_heads when it is 0."""
        return self.n_kv_heads or self.n_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped-query attention: consecutive
        query heads share one, as transformers' repeat_kv arranges them)."""
        return head // (self.n_heads // self.kv_heads)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        """Build from a JSON dict, refusing unknown keys (a typo must not pass silently)."""
        if not isinstance(data, dict):
            raise ConfigValueError("not_object", kind=type(data).__name__)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigValueError("unknown_keys", keys=unknown)
        return cls(**data)
