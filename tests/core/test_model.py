"""The attention and layers equal torch's own modules, and the identities of W_o hold exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import make_model
from tfviz import ModelConfig
from tfviz.core.config import LIMITS
from tfviz.core.interventions import LayerSwitches
from tfviz.core.model import EncoderLayer, MultiHeadAttention

ATOL = 1e-5


def _torch_mha(attn: MultiHeadAttention, D: int, H: int) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([attn.W_q.weight, attn.W_k.weight, attn.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([attn.W_q.bias, attn.W_k.bias, attn.W_v.bias]))
        ref.out_proj.weight.copy_(attn.W_o.weight)
        ref.out_proj.bias.copy_(attn.W_o.bias)
    return ref.eval()


@pytest.mark.parametrize("with_padding", [False, True])
def test_attention_equals_torch_multihead_attention(with_padding):
    model = make_model(d_model=24, n_heads=3)
    attn = model.layers[0].attn
    x = torch.randn(2, 6, 24, generator=torch.Generator().manual_seed(0))
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2]) if with_padding else None
    ref = _torch_mha(attn, 24, 3)
    want, want_w = ref(x, x, x, key_padding_mask=pad, average_attn_weights=False)
    for trace in (False, True):
        got, parts = attn(x, pad, LayerSwitches("learned"), trace)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(parts["attn"], want_w, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_layer_equals_torch_transformer_encoder_layer(norm):
    cfg = ModelConfig(vocab_size=5, n_out=2, d_model=16, n_heads=4, d_ff=40, dropout=0.0, norm=norm)
    torch.manual_seed(3)
    layer = EncoderLayer(cfg).eval()
    ref = nn.TransformerEncoderLayer(
        16, 4, dim_feedforward=40, dropout=0.0, batch_first=True, norm_first=(norm == "pre")
    ).eval()
    with torch.no_grad():
        a = layer.attn
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))
        ref.self_attn.out_proj.load_state_dict(a.W_o.state_dict())
        ref.linear1.load_state_dict(layer.ff.fc1.state_dict())
        ref.linear2.load_state_dict(layer.ff.fc2.state_dict())
        ref.norm1.load_state_dict(layer.norm1.state_dict())
        ref.norm2.load_state_dict(layer.norm2.state_dict())
    x = torch.randn(3, 5, 16)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    with torch.no_grad():
        # torch's fused fast path differs only in padded rows, which it fills arbitrarily.
        want = ref(x, src_key_padding_mask=pad)
        got, lt = layer(x, pad, LayerSwitches("learned"), True)
        got_fast, _ = layer(x, pad, LayerSwitches("learned"), False)
    keep = ~pad
    torch.testing.assert_close(got[keep], want[keep], atol=ATOL, rtol=0)
    torch.testing.assert_close(got_fast[keep], want[keep], atol=ATOL, rtol=0)
    torch.testing.assert_close(lt.resid_out, got)


def test_attention_rows_sum_to_one_and_padded_keys_get_zero(model, ids):
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[1, 5:] = True
    pad[2, :] = True  # a fully padded row must not produce NaN
    out = model(ids, pad)
    assert torch.isfinite(out.logits).all()
    for lt in out.trace.layers:
        assert torch.isfinite(lt.attn).all() and torch.isfinite(lt.resid_out).all()
        sums = lt.attn.sum(-1)  # (B, H, T)
        torch.testing.assert_close(sums[:2], torch.ones_like(sums[:2]))
        assert (lt.attn[1, :, :, 5:] == 0).all()
        assert (lt.attn[2] == 0).all()
    fast = model(ids, pad, trace=False).logits
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast[:2], out.logits[:2], atol=ATOL, rtol=0)


# The W_o identities (per-head terms add up to attn_out; W_o off passes concat on) are tested
# once, over many models and switches: tests/core/test_wo.py.


def test_per_layer_switch_changes_only_that_layer_and_after(model, ids):
    base = model(ids).trace.layers
    one = model(ids, w_o={1: "identity"}).trace.layers
    torch.testing.assert_close(one[0].resid_out, base[0].resid_out)
    assert [lt.w_o_mode for lt in one] == ["learned", "identity"]
    assert not torch.allclose(one[1].resid_out, base[1].resid_out)


def test_ablated_head_has_zero_z_and_others_unchanged(model, ids):
    base = model(ids).trace.layers[0]
    lt = model(ids, ablate_heads=[(0, 2)]).trace.layers[0]
    assert (lt.z[:, 2] == 0).all()
    torch.testing.assert_close(lt.z[:, [0, 1, 3]], base.z[:, [0, 1, 3]])
    assert (lt.concat[..., 8:12] == 0).all()  # d_k = 4: head 2 owns dims 8..11


@pytest.mark.parametrize("with_padding", [False, True])
def test_big_projection_then_view_equals_separate_head_projections(model, ids, with_padding):
    """Seed 004: tfviz's attention (one D x D W_q/W_k/W_v, then view/transpose into heads)
    computes what H separate D x d_k projections, one attention per head, compute.

    The reference below never reshapes a (B, T, D) projection: each head h gets its own
    nn.Linear(D, d_k) holding rows h*d_k..(h+1)*d_k of W_q, W_k, W_v, its own softmax, and
    its own slice of W_o's columns. The model is run as it is (traced and untraced)."""
    attn = model.layers[0].attn
    x = model(ids).trace.layers[0].resid_pre  # a real layer input, (B, T, D)
    B, T, D = x.shape
    H, d_k = attn.n_heads, attn.d_k
    assert (H, d_k) == (4, 4) and D == H * d_k  # several heads, so a mixed-up split shows
    pad = None
    if with_padding:
        pad = torch.zeros(B, T, dtype=torch.bool)
        pad[1, -3:] = True

    def head_linear(big: nn.Linear, h: int) -> nn.Linear:
        rows = slice(h * d_k, (h + 1) * d_k)
        lin = nn.Linear(D, d_k)
        with torch.no_grad():
            lin.weight.copy_(big.weight[rows])
            lin.bias.copy_(big.bias[rows])
        return lin

    with torch.no_grad():
        got, parts = attn(x, pad, LayerSwitches("learned"), True)
        got_fast, _ = attn(x, pad, LayerSwitches("learned"), False)
        want = attn.W_o.bias.expand(B, T, D).clone()
        for h in range(H):
            q = head_linear(attn.W_q, h)(x)  # (B, T, d_k)
            k = head_linear(attn.W_k, h)(x)
            v = head_linear(attn.W_v, h)(x)
            scores = q @ k.transpose(-2, -1) / d_k**0.5  # (B, T, T)
            if pad is not None:
                scores = scores.masked_fill(pad[:, None, :], float("-inf"))
            a = scores.softmax(-1)
            z = a @ v  # (B, T, d_k)
            torch.testing.assert_close(parts["values"][:, h], v, atol=ATOL, rtol=0)
            torch.testing.assert_close(parts["attn"][:, h], a, atol=ATOL, rtol=0)
            torch.testing.assert_close(parts["z"][:, h], z, atol=ATOL, rtol=0)
            cols = slice(h * d_k, (h + 1) * d_k)
            torch.testing.assert_close(parts["concat"][..., cols], z, atol=ATOL, rtol=0)
            want += z @ attn.W_o.weight[:, cols].T
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(got_fast, want, atol=ATOL, rtol=0)


def test_forward_with_any_switch_changes_no_weight_or_attribute(model, ids):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    attrs = {name: dict(vars(m)) for name, m in model.named_modules()}
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[0, -2:] = True
    for w_o in ("learned", "identity", "zero", {0: "zero"}, {1: "identity"}):
        for ablate in ((), [(0, 0), (1, 3)]):
            for trace in (True, False):
                model(ids, pad, w_o=w_o, ablate_heads=ablate, trace=trace)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # bit-identical
    assert {name: dict(vars(m)) for name, m in model.named_modules()} == attrs


def test_trace_false_keeps_nothing(model, ids):
    out = model(ids, trace=False)
    assert out.trace is None
    torch.testing.assert_close(out.logits, model(ids).logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"w_o": "off"}, "w_o must be one of"),
        ({"w_o": {5: "identity"}}, "this model has layers 0..1"),
        ({"w_o": {0: "nope"}}, "mode for layer 0"),
        ({"ablate_heads": [(0, 9)]}, "head 9 out of range"),
        ({"ablate_heads": [(3, 0)]}, "layer 3 out of range"),
        ({"ablate_heads": [7]}, "(layer, head) pairs"),
    ],
)
def test_bad_switches_get_clear_errors(model, ids, bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model(ids, **bad)


def test_too_long_input_is_refused(model):
    with pytest.raises(ValueError, match="only 10"):
        model(torch.zeros(1, 11, dtype=torch.long))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=30, n_heads=4), "divisible by n_heads"),
        (dict(norm="middle"), "norm must be one of"),
        (dict(dropout=1.5), "dropout"),
        (dict(n_layers=0), "n_layers must be between"),
        (dict(d_model=4096), "d_model must be between"),
    ],
)
def test_config_is_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(vocab_size=5, n_out=2, **kwargs)


def test_config_is_frozen():
    cfg = ModelConfig(vocab_size=5, n_out=2)
    with pytest.raises(AttributeError):
        cfg.d_model = 64
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown config keys: colour"):
        ModelConfig.from_dict({**cfg.to_dict(), "colour": 1})


def test_zeroing_after_w_o_differs_from_ablating_the_head(model, ids):
    """After W_o a head-sized slice of attn_out carries every head: zeroing it is not ablation."""
    before = model(ids, ablate_heads=[(0, 1)]).trace.layers[0]
    after = model(ids, ablate_after_w_o=[(0, 1)]).trace.layers[0]
    assert (after.attn_out[..., 4:8] == 0).all()
    assert not torch.allclose(before.attn_out, after.attn_out)
    torch.testing.assert_close(after.z, model(ids).trace.layers[0].z)  # heads untouched


# The switches a pretrained BERT-style encoder needs (tfviz.hf.pretrained): each one is off by
# default, so every model trained before them builds and computes as it did.

BERT_LIKE = dict(
    activation="gelu", norm_eps=1e-12, type_vocab_size=2, embed_norm=True, n_out=0, pool="mean"
)
# The decoders' switches (tfviz.hf.families' GPT-2 and Llama-style families).
GPT2_LIKE = dict(causal=True, norm="pre", activation="gelu_tanh", n_out=12, tie_head=True)
LLAMA_LIKE = dict(
    causal=True, norm="pre", positions="rotary", norm_type="rms", mlp="gated",
    activation="silu", n_kv_heads=2, n_out=12,
)  # fmt: skip


def test_an_old_config_dict_builds_the_old_model():
    old = dict(
        vocab_size=12, n_out=5, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=10,
        dropout=0.0, norm="post", pool="none", embed="token",
    )  # fmt: skip
    cfg = ModelConfig.from_dict(old)
    assert (cfg.activation, cfg.norm_eps, cfg.type_vocab_size, cfg.embed_norm) == (
        "relu",
        1e-5,
        0,
        False,
    )
    keys = set(make_model().state_dict())
    assert not any(k.startswith(("type_embed", "embed_norm")) for k in keys)
    assert {"embed.weight", "pos", "head.weight", "head.bias"} <= keys
    assert all(m.eps == 1e-5 for m in make_model().modules() if isinstance(m, nn.LayerNorm))


def test_gelu_is_the_exact_erf_form_and_relu_stays_the_default(ids):
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(2))
    for activation in ("gelu", "relu"):
        ff = make_model(activation=activation).layers[0].ff
        h = ff.fc1(x)
        act = 0.5 * h * (1 + torch.erf(h / 2**0.5)) if activation == "gelu" else h.clamp_min(0)
        torch.testing.assert_close(ff(x), ff.fc2(act), atol=ATOL, rtol=0)


def test_norm_eps_reaches_every_layer_norm():
    model = make_model(norm="pre", norm_eps=1e-12, embed_norm=True)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * 2 + 1 + 1  # two per layer, the final (pre-norm), the embedding's
    assert all(m.eps == 1e-12 for m in norms)


def test_token_types_add_their_embedding(ids):
    model = make_model(type_vocab_size=2)
    E = model.type_embed.weight  # (2, D)
    plain = model(ids).trace.embed
    zeros = model(ids, token_types=torch.zeros_like(ids)).trace.embed
    assert torch.equal(plain, zeros)  # None means one sentence: type 0 everywhere
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    second = model(ids, token_types=types).trace.embed
    torch.testing.assert_close(second[:, 4:] - plain[:, 4:], (E[1] - E[0]).expand(3, 3, 16))
    assert torch.equal(second[:, :4], plain[:, :4])
    with pytest.raises(ValueError, match="values in 0..1"):
        model(ids, token_types=torch.full_like(ids, 2))
    with pytest.raises(ValueError, match="token-type embeddings"):
        make_model()(ids, token_types=torch.zeros_like(ids))


def test_embed_norm_normalises_layer_0_input(ids):
    model = make_model(embed_norm=True, norm_eps=1e-12)
    trace = model(ids).trace
    raw = model.embed(ids) + model.pos[:, : ids.shape[1]]
    n = model.embed_norm
    want = torch.nn.functional.layer_norm(raw, (16,), n.weight, n.bias, eps=1e-12)
    torch.testing.assert_close(trace.embed, want, atol=ATOL, rtol=0)
    assert torch.equal(trace.layers[0].resid_pre, trace.embed)


def test_without_a_head_the_output_is_the_hidden_states(ids):
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[1, 5:] = True
    per_token = make_model(n_out=0)
    out = per_token(ids, pad)
    assert isinstance(per_token.head, nn.Identity)
    assert not any(k.startswith("head") for k in per_token.state_dict())
    assert out.logits.shape == (3, 7, 16)
    assert torch.equal(out.logits, out.trace.layers[-1].resid_out)
    pooled = make_model(n_out=0, pool="mean")(ids, pad)
    last, keep = pooled.trace.layers[-1].resid_out, (~pad).float().unsqueeze(-1)
    torch.testing.assert_close(pooled.logits, (last * keep).sum(1) / keep.sum(1))


def test_bert_like_model_takes_the_fused_path_with_the_same_result(ids):
    model = make_model(**BERT_LIKE)
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[0, 3:] = True
    slow = model(ids, pad, w_o={1: "identity"}, ablate_heads=[(0, 2)])
    fast = model(ids, pad, w_o={1: "identity"}, ablate_heads=[(0, 2)], trace=False)
    assert fast.trace is None and fast.logits.shape == (3, 16)
    torch.testing.assert_close(fast.logits, slow.logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        BERT_LIKE,
        dict(norm="pre", embed="value", type_vocab_size=3),
        dict(n_out=0),
        GPT2_LIKE,
        LLAMA_LIKE,
    ],
)
def test_n_params_counts_every_parameter_of_each_kind(kwargs):
    model = make_model(**kwargs)
    assert model.config.n_params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(activation="tanh"), "activation must be one of"),
        (dict(norm_eps=0.0), "norm_eps must be a number in"),
        (dict(norm_eps=True), "norm_eps must be a number in"),
        (dict(norm_eps="1e-5"), "norm_eps must be a number in"),
        (dict(type_vocab_size=17), r"type_vocab_size must be between 0 and 16, got 17 \(0: no"),
        (dict(type_vocab_size=-1), "type_vocab_size must be between 0"),
        (dict(embed_norm="yes"), "embed_norm must be true or false"),
        (dict(n_out=-1), f"n_out must be between 0 and {LIMITS['n_out']}"),
        (dict(n_heads=4, d_model=16, n_kv_heads=3), "must be a multiple of n_kv_heads"),
        (dict(rope_theta=0.5), "rope_theta must be a number above 1"),
        (dict(positions="rotary", d_model=6, n_heads=2), r"d_k \(3\) must be even"),
        (dict(tie_head=True), "a tied head reads out with the token embedding"),
        (dict(norm_type="batch"), "norm_type must be one of"),
        (dict(mlp="moe"), "mlp must be one of"),
        (dict(vocab_size=300_000), "vocab_size must be between 1 and 262144"),
    ],
)
def test_new_config_fields_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{"vocab_size": 5, "n_out": 2, **kwargs})


def test_the_old_names_are_the_new_classes():
    """Encoder and LoadedEncoder, the names before decoders ran too, stay for saved code."""
    import tfviz
    from tfviz import hf
    from tfviz.core import model

    assert model.Encoder is model.Transformer
    assert tfviz.Encoder is tfviz.Transformer is model.Transformer
    assert hf.LoadedEncoder is hf.LoadedModel


# An encoder as the BERT loader builds it (no head, post-norm, token types, embedding norm), a
# decoder with grouped-query attention and an untied head (Llama-style), and a toy config.
SHAPE_CONFIGS = {
    "encoder": dict(
        vocab_size=50, n_out=0, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=12,
        pool="mean", activation="gelu", type_vocab_size=2, embed_norm=True, norm="post",
    ),
    "decoder": dict(
        vocab_size=50, n_out=50, d_model=16, n_heads=4, n_kv_heads=2, d_ff=24, n_layers=2,
        max_len=12, activation="silu", norm="pre", norm_type="rms", mlp="gated",
        positions="rotary", causal=True, tie_head=False,
    ),
    "toy": dict(vocab_size=10, n_out=3, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=8),
}  # fmt: skip


@pytest.mark.parametrize("kind", SHAPE_CONFIGS)
def test_parameter_shapes_are_a_real_models_state_dict(kind):
    from tfviz.core.model import Transformer, parameter_shapes

    config = ModelConfig(**SHAPE_CONFIGS[kind])
    real = {k: tuple(v.shape) for k, v in Transformer(config).state_dict().items()}
    assert parameter_shapes(config) == real
