"""tfviz.core.wo (the W_o algebra) and tfviz.core.interventions (the switch object), hand-worked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import make_model
from tfviz.core import wo
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import NONE, Interventions, switches

# A 4 x 4 W_o over two heads of width 2, in nn.Linear layout (out, in): entry [d, c] is how much
# input column c (head c // 2) feeds output dimension d.
W = np.arange(16, dtype=np.float64).reshape(4, 4)


def test_head_blocks_are_the_columns_that_read_each_head_transposed():
    blocks = wo.head_blocks(W, 2)
    assert blocks.shape == (2, 2, 4)
    np.testing.assert_array_equal(blocks[0], [[0, 4, 8, 12], [1, 5, 9, 13]])  # columns 0, 1
    np.testing.assert_array_equal(blocks[1], [[2, 6, 10, 14], [3, 7, 11, 15]])  # columns 2, 3
    np.testing.assert_array_equal(wo.head_block(W, 1, 2), blocks[1])


def test_head_blocks_refuse_a_width_not_divisible_by_the_heads():
    with pytest.raises(ValueError, match="not divisible into 3 heads"):
        wo.head_blocks(W, 3)


def test_per_head_terms_add_up_to_the_linear_map():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2, 5, 2))  # (H, T, d_k)
    concat = z.transpose(1, 0, 2).reshape(5, 4)  # (T, D): heads side by side
    terms = wo.head_contributions(z, W)  # (H, T, D)
    np.testing.assert_allclose(terms.sum(0), concat @ W.T)
    # Head 0's term by hand for token 0: z_0 @ rows 0..1 of W^T.
    np.testing.assert_allclose(terms[0, 0], z[0, 0] @ W[:, 0:2].T)
    # The same with torch tensors and a batch dimension.
    zt = torch.tensor(z)[None]
    np.testing.assert_allclose(wo.head_contributions(zt, torch.tensor(W))[0].numpy(), terms)


def test_head_energy_is_the_squared_weight_from_each_head_into_each_output():
    energy = wo.head_energy(W, 2)
    assert energy.shape == (4, 2)
    assert energy[0, 0] == 0**2 + 1**2 and energy[0, 1] == 2**2 + 3**2
    assert energy[3, 1] == 14**2 + 15**2


@pytest.mark.parametrize("kind", [np.asarray, torch.tensor])
def test_effective_map_of_each_mode(kind):
    Wk, b = kind(W), kind(np.ones(4))
    W_eff, b_eff = wo.effective(Wk, b, "learned")
    assert W_eff is Wk and b_eff is b
    W_eff, b_eff = wo.effective(Wk, b, "identity")
    np.testing.assert_array_equal(np.asarray(W_eff), np.eye(4))
    assert not np.asarray(b_eff).any()
    W_eff, b_eff = wo.effective(Wk, b, "zero")
    assert not np.asarray(W_eff).any() and not np.asarray(b_eff).any()
    with pytest.raises(ValueError, match="w_o must be one of"):
        wo.effective(Wk, b, "off")


def test_apply_identity_passes_concat_through_exactly_and_zero_adds_nothing():
    concat = torch.randn(3, 4)
    Wt, b = torch.tensor(W, dtype=torch.float32), torch.ones(4)
    assert wo.apply(concat, Wt, b, "identity") is concat
    assert not wo.apply(concat, Wt, b, "zero").any()
    torch.testing.assert_close(wo.apply(concat, Wt, b, "learned"), concat @ Wt.T + b)


def test_fixed_weights_refuse_the_learned_mode():
    W_id, b = wo.fixed_weights("identity", 3)
    assert torch.equal(W_id, torch.eye(3)) and not b.any()
    for mode in ("learned", "block_diagonal", "rank:1"):
        with pytest.raises(ValueError, match="only identity or zero"):
            wo.fixed_weights(mode, 4)


# ---- taking W_o apart: block-diagonal, rank-k, head order -------------------------------------
def test_block_diagonal_keeps_each_heads_own_block_and_the_bias():
    b = np.arange(4.0)
    W_bd, b_bd = wo.effective(W, b, "block_diagonal", n_heads=2)
    np.testing.assert_array_equal(
        W_bd, [[0, 1, 0, 0], [4, 5, 0, 0], [0, 0, 10, 11], [0, 0, 14, 15]]
    )
    assert b_bd is b
    energy = wo.head_energy(W_bd, 2)  # no output dimension reads another head
    assert energy[:2, 1].sum() == 0 and energy[2:, 0].sum() == 0
    with pytest.raises(ValueError, match="needs n_heads"):
        wo.effective(W, b, "block_diagonal")


def test_rank_k_drops_exactly_the_smallest_singular_values():
    rng = np.random.default_rng(3)
    M = rng.normal(size=(6, 6))
    s = np.linalg.svd(M, compute_uv=False)
    for k in range(1, 7):
        W_k, _ = wo.effective(M, np.zeros(6), f"rank:{k}")
        assert np.linalg.matrix_rank(W_k, tol=1e-9) == k
        # Eckart-Young: the Frobenius error is the norm of the dropped singular values.
        assert np.linalg.norm(M - W_k) == pytest.approx(np.sqrt((s[k:] ** 2).sum()), abs=1e-9)
    np.testing.assert_allclose(wo.effective(M, np.zeros(6), "rank:6")[0], M, atol=1e-12)
    Mt = torch.tensor(M, dtype=torch.float32)
    np.testing.assert_allclose(wo.truncated(Mt, 2).numpy(), wo.truncated(M, 2), atol=1e-5)
    with pytest.raises(ValueError, match="k from 1 to d_model = 6"):
        wo.effective(M, np.zeros(6), "rank:7")


@pytest.mark.parametrize("bad", ["rank:0", "rank:", "rank:-2", "rank:two", "block"])
def test_bad_w_o_modes_say_what_is_allowed(bad):
    with pytest.raises(ValueError, match="rank:K"):
        wo.check_mode(bad)


def test_permuting_heads_changes_the_output_unless_w_o_is_permuted_alike():
    rng = np.random.default_rng(4)
    concat = rng.normal(size=(5, 4))  # (T, D) two heads of width 2
    order = (1, 0)
    shuffled = wo.permute_heads(concat, order, 2)
    np.testing.assert_array_equal(shuffled[:, :2], concat[:, 2:])
    assert not np.allclose(shuffled @ W.T, concat @ W.T)  # W_o reads the wrong columns
    np.testing.assert_allclose(shuffled @ wo.permute_columns(W, order, 2).T, concat @ W.T)
    with pytest.raises(ValueError, match="each head 0..1 exactly once"):
        wo.permute_heads(concat, (0, 0), 2)


# ---- Interventions ------------------------------------------------------------------------------
CFG = ModelConfig(vocab_size=5, n_out=2, d_model=8, n_heads=2, n_layers=3)


def test_interventions_are_normalised_hashable_and_equal_by_value():
    a = Interventions(w_o={2: "zero", 0: "identity"}, ablate_heads=[(1, 0), [1, 0], (0, 1)])
    b = Interventions(w_o=((0, "identity"), (2, "zero")), ablate_heads=((1, 0), (0, 1)))
    assert a == b and hash(a) == hash(b)
    assert a.w_o == ((0, "identity"), (2, "zero"))
    assert a.ablate_heads == ((1, 0), (0, 1))  # duplicates dropped, order kept
    assert a.w_o_modes(3) == ["identity", "learned", "zero"]
    assert NONE.is_default and not a.is_default
    assert switches("identity", 1, [(0, 1)]) == Interventions(
        w_o={1: "identity"}, ablate_heads=[(0, 1)]
    )
    assert switches() == NONE


def test_resolve_builds_the_gates_the_forward_pass_uses():
    iv = Interventions(ablate_heads=[(1, 1)], ablate_after_w_o=[(2, 0)])
    plan = iv.resolve(CFG)
    assert plan.modes == ["learned"] * 3
    assert plan.gates.tolist() == [[1, 1], [1, 0], [1, 1]]
    assert plan.out_gates[2].tolist() == [0] * 4 + [1] * 4 and plan.out_gates[:2].all()
    assert NONE.resolve(CFG).gates is None and NONE.resolve(CFG).out_gates is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"w_o": "off"}, "w_o must be one of"),
        ({"w_o": {0: "nope"}}, "mode for layer 0"),
        ({"w_o": {-1: "zero"}}, "layers are numbered from 0"),
        ({"w_o": 3}, "w_o must be one of"),
        ({"ablate_heads": [7]}, r"\(layer, head\) pairs"),
        ({"ablate_heads": [(0, 1.5)]}, "head must be a whole number"),
        ({"ablate_after_w_o": [(True, 0)]}, "layer must be a whole number"),
        ({"head_gates": [[1.0]]}, "head_gates must be a tensor"),
    ],
)
def test_bad_interventions_are_refused_on_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Interventions(**kwargs)


@pytest.mark.parametrize(
    "iv, message",
    [
        (Interventions(w_o={3: "zero"}), "this model has layers 0..2"),
        (Interventions(ablate_heads=[(0, 2)]), "head 2 out of range 0..1"),
        (Interventions(ablate_after_w_o=[(5, 0)]), "layer 5 out of range 0..2"),
        (Interventions(head_gates=torch.ones(2, 2)), r"must have shape \(3, 2\)"),
    ],
)
def test_indices_are_checked_against_the_config(iv, message):
    with pytest.raises(ValueError, match=message):
        iv.resolve(CFG)


def test_the_encoder_takes_the_object_or_the_same_switches_by_keyword():
    model = make_model()
    ids = torch.tensor([[1, 2, 3, 4]])
    iv = Interventions(w_o={1: "identity"}, ablate_heads=[(0, 2)])
    by_object = model(ids, interventions=iv)
    by_keyword = model(ids, w_o={1: "identity"}, ablate_heads=[(0, 2)])
    assert torch.equal(by_object.logits, by_keyword.logits)
    assert by_object.trace.interventions == iv == by_keyword.trace.interventions
    with pytest.raises(ValueError, match="not both"):
        model(ids, interventions=iv, w_o="zero")
    with pytest.raises(TypeError, match="must be Interventions"):
        model(ids, interventions={"w_o": "zero"})


# ---- the same switches in a forward pass ---------------------------------------------------------
def _padded(model):
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 11, (2, 6), generator=g)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    return ids, pad


@pytest.mark.parametrize("mode", ["block_diagonal", "rank:1", "rank:8"])
def test_new_modes_keep_the_identities_and_every_weight(mode):
    model = make_model()
    ids, pad = _padded(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = model(ids, pad, w_o=mode)
    assert all(lt.w_o_mode == mode for lt in out.trace.layers)  # identities: below
    assert not torch.equal(out.logits, model(ids, pad).logits)  # the mode changes the answer
    fast = model(ids, pad, w_o=mode, trace=False).logits
    torch.testing.assert_close(fast, out.logits, atol=1e-5, rtol=0)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_rank_d_is_the_learned_map_and_a_too_high_rank_is_refused():
    model = make_model()  # d_model 16
    ids, pad = _padded(model)
    torch.testing.assert_close(model(ids, pad, w_o="rank:16").logits, model(ids, pad).logits)
    with pytest.raises(ValueError, match="k from 1 to d_model = 16, got k = 17"):
        model(ids, pad, w_o="rank:17")


def test_a_block_diagonal_w_o_mixes_no_heads():
    model = make_model()
    lt = model(*_padded(model), w_o="block_diagonal").trace.layers[0]
    energy = wo.head_energy(lt.W_o, 4)  # (D, H): output dim d lies in head d // 4
    assert all(energy[d, h] == 0 for d in range(16) for h in range(4) if h != d // 4)


def test_permuted_heads_change_the_output_unless_w_o_is_permuted_the_same_way():
    model = make_model()
    ids, pad = _padded(model)
    base = model(ids, pad)
    shuffled = model(ids, pad, head_order={0: (2, 0, 3, 1)})
    undone = model(ids, pad, head_order={0: (2, 0, 3, 1)}, permute_w_o=True)
    assert (shuffled.logits - base.logits).abs().max() > 1e-3
    torch.testing.assert_close(undone.logits, base.logits, atol=1e-6, rtol=0)
    lt = shuffled.trace.layers[0]  # z is kept in concat's order: the identity still holds
    torch.testing.assert_close(lt.head_contributions().sum(1) + lt.b_o, lt.attn_out)
    with pytest.raises(ValueError, match="each head 0..3 exactly once"):
        model(ids, pad, head_order={0: (0, 1, 2, 2)})


def test_pattern_overrides_replace_one_heads_weights_over_real_keys_only():
    model = make_model()
    ids, pad = _padded(model)
    patterns = [(0, 0, "uniform"), (0, 1, "previous"), (0, 2, "anti_diagonal"), (1, 3, "copy:0")]
    out = model(ids, pad, patterns=patterns)
    base = model(ids, pad).trace
    a0, a1 = out.trace.layers[0].attn, out.trace.layers[1].attn
    # Sequence 1 has 4 real tokens: uniform is 1/4 on them and 0 on padding, for real queries.
    torch.testing.assert_close(a0[1, 0, :4, :4], torch.full((4, 4), 0.25))
    assert not a0[1, 0, :, 4:].any() and not a0[1, 0, 4:].any()
    assert a0[0, 1, 0, 0] == 1 and a0[0, 1, 3, 2] == 1  # previous token (first reads itself)
    assert a0[1, 2, 0, 3] == 1 and a0[1, 2, 3, 0] == 1  # anti-diagonal within the real length
    torch.testing.assert_close(a0[:, 3], base.layers[0].attn[:, 3])  # untouched head
    torch.testing.assert_close(a1[:, 3], a1[:, 0])  # copied from head 0 of the same layer
    fast = model(ids, pad, patterns=patterns, trace=False).logits
    torch.testing.assert_close(fast, out.logits, atol=1e-5, rtol=0)
    assert not torch.allclose(out.logits, model(ids, pad).logits)


@pytest.mark.parametrize(
    "patterns, message",
    [
        ([(0, 0, "diagonal")], "a pattern is one of"),
        ([(0, 0, "copy:x")], "a pattern is one of"),
        ([(0, 9, "uniform")], "head 9 out of range"),
        ([(0, 0, "copy:7")], "head 7 out of range"),
        ([(5, 0, "uniform")], "layer 5 out of range"),
        ([(0, 0)], "triples"),
    ],
)
def test_bad_pattern_overrides_get_clear_messages(patterns, message):
    model = make_model()
    with pytest.raises(ValueError, match=message):
        model(torch.tensor([[1, 2, 3]]), patterns=patterns)


def test_a_model_trains_block_diagonal_but_not_rank_k():
    from tfviz import train

    model, _ = train("sort", steps=3, w_o="block_diagonal", batch_size=8)
    for layer in model.layers:  # the stored W_o is the block-diagonal map it trained with
        W = layer.attn.W_o.weight
        assert torch.equal(W, W * wo.block_mask(W.shape[0], model.config.n_heads, W))
    with pytest.raises(ValueError, match="applied to a trained W_o instead"):
        train("sort", steps=3, w_o="rank:2")
    with pytest.raises(ValueError, match="w_o must be one of"):
        train("sort", steps=3, w_o="sideways")


def test_a_block_diagonal_start_is_drawn_for_a_block_s_fan_in():
    D, H = 64, 4
    torch.manual_seed(0)
    lin = torch.nn.Linear(D, D)
    W, b = lin.weight.detach(), lin.bias.detach()
    start_W, start_b = wo.training_start(W, b, wo.BLOCK_DIAGONAL, H)
    masked, _ = wo.effective(W, b, wo.BLOCK_DIAGONAL, H)
    torch.testing.assert_close(start_W, masked * 2.0)  # sqrt(H) = 2
    torch.testing.assert_close(start_b, b * 2.0)
    assert (start_W[wo.block_mask(D, H, W) == 0] == 0).all()  # still no mixing across heads
    # Each output's expected squared weight norm matches a full Linear's (fan-in D): 1/3 either
    # way; masked alone it would be H times smaller.
    full = (W**2).sum(1).mean().item()
    assert abs((start_W**2).sum(1).mean().item() / full - 1) < 0.15
    assert abs((masked**2).sum(1).mean().item() * H / full - 1) < 0.15
    for mode in ("learned", "identity", "zero"):
        for got, want in zip(
            wo.training_start(W, b, mode, H), wo.effective(W, b, mode, H), strict=True
        ):
            torch.testing.assert_close(got, want)


# ---- the identities of W_o, in every model ------------------------------------------------------
W_O_MODELS = {
    "2 layers, 4 heads": dict(d_model=16, n_heads=4, n_layers=2),
    "3 layers, 3 heads, pre-norm": dict(d_model=24, n_heads=3, n_layers=3, norm="pre"),
    "1 layer, 1 head": dict(d_model=8, n_heads=1, n_layers=1),
    "8 heads, no FFN": dict(d_model=16, n_heads=8, n_layers=2, ffn=False),
    "BERT-like": dict(
        activation="gelu", norm_eps=1e-12, type_vocab_size=2, embed_norm=True, n_out=0
    ),
}
W_O_SWITCHES = {
    "learned": {},
    "identity": {"w_o": "identity"},
    "zero": {"w_o": "zero"},
    "block_diagonal": {"w_o": "block_diagonal"},
    "rank:1": {"w_o": "rank:1"},
    "last layer off": {"w_o": {1: "identity"}},
    "head ablated": {"ablate_heads": [(0, 0)]},
    "slice zeroed after W_o": {"ablate_after_w_o": [(0, 0)]},
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
@pytest.mark.parametrize("switch", list(W_O_SWITCHES))
@pytest.mark.parametrize("sizes", list(W_O_MODELS))
def test_w_o_is_the_sum_of_per_head_maps_and_off_passes_concat_on(sizes, switch, bias, seed):
    """In every layer: attn_out = sum_h z_h @ W_o^h (+ b_o), with W_o^h the columns of the map
    applied that read head h; with W_o off (identity) attn_out is concat itself, exactly."""
    model = make_model(seed, **W_O_MODELS[sizes])
    if not bias:  # every bias zero: the head terms alone must make attn_out
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
    ids, pad = _padded(model)
    switches = dict(W_O_SWITCHES[switch])
    if model.config.n_layers == 1 and isinstance(switches.get("w_o"), dict):
        switches["w_o"] = {0: "identity"}
    out = model(ids, pad, **switches)
    learned = model(ids, pad).trace.layers
    H, d_k = model.config.n_heads, model.config.d_k
    modes = out.trace.interventions.w_o_modes(model.config.n_layers)
    for i, (lt, layer) in enumerate(zip(out.trace.layers, model.layers, strict=True)):
        W, b = lt.W_o, lt.b_o
        # The map the trace reports is the layer's own W_o in its mode (slice-gated after W_o).
        want_W, want_b = wo.effective(layer.attn.W_o.weight, layer.attn.W_o.bias, modes[i], H)
        if "ablate_after_w_o" in switches and i == 0:
            gate = torch.ones(model.config.d_model)
            gate[:d_k] = 0
            want_W, want_b = want_W * gate[:, None], want_b * gate
        torch.testing.assert_close(W, want_W, atol=0, rtol=0)
        torch.testing.assert_close(b, want_b, atol=0, rtol=0)
        if not bias:
            assert not b.any()
        # Each head's term by hand: z_h @ (W_o's columns h*d_k..(h+1)*d_k)^T.
        by_hand = torch.stack(
            [lt.z[:, h] @ W[:, h * d_k : (h + 1) * d_k].T for h in range(H)], dim=1
        )  # (B, H, T, D)
        torch.testing.assert_close(lt.head_contributions(), by_hand, atol=1e-5, rtol=0)
        torch.testing.assert_close(by_hand.sum(1) + b, lt.attn_out, atol=1e-5, rtol=0)
        if modes[i] == "identity":
            assert torch.equal(lt.attn_out, lt.concat)
            assert torch.equal(W, torch.eye(model.config.d_model)) and not b.any()
            if i == 0:  # layer 0's heads see the same input whatever W_o does
                torch.testing.assert_close(lt.concat, learned[0].concat, atol=0, rtol=0)
        if modes[i] == "zero":
            assert not lt.attn_out.any()
    # The identity must be able to fail: a learned W_o does change concat (unless its one head
    # is ablated, when both are zero).
    first = out.trace.layers[0]
    if modes[0] == "learned" and first.concat.any():
        assert not torch.allclose(first.attn_out, first.concat)
