"""tfviz.wo (the W_o algebra) and tfviz.interventions (the switch object), hand-worked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import make_model
from tfviz import wo
from tfviz.config import ModelConfig
from tfviz.interventions import NONE, Interventions, switches

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
    with pytest.raises(ValueError, match="not fixed"):
        wo.fixed_weights("learned", 3)


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
