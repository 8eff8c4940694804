"""Each analysis against a hand-worked case, against an independent recomputation, and on bundled
models (shapes, identities, no NaN); and none of them changes the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.conftest import MODELS, make_model
from tfviz import analysis as A
from tfviz import get_task, load_checkpoint
from tfviz.core import wo
from tfviz.core.model import layer_modes
from tfviz.ui.help import HELP

ATOL = 1e-5


def _task_model(task_name: str, seed: int = 0, **sizes):
    """A random small model whose config fits a task (vocabulary, outputs, pooling, positions)."""
    task = get_task(task_name)
    cfg = dict(vocab_size=task.vocab_size, n_out=task.n_out, pool=task.pool, max_len=task.positions)
    cfg.update(sizes)
    return task, make_model(seed, **cfg).requires_grad_(False)  # as the app loads models


@pytest.fixture(scope="module")
def bundled():
    """Bundled models by name (loaded once: they are read-only here)."""
    return {name: load_checkpoint(MODELS / f"{name}.safetensors") for name in ("max_position",)}


def _padded_batch(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 10, (3, 6), generator=g)
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[1, 4:] = True
    return ids, pad


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _unchanged(model, before):
    after = model.state_dict()
    return all(torch.equal(before[k], after[k]) for k in before) and not any(
        p.requires_grad for p in model.parameters()
    )


# ---- 1. norm-based attention --------------------------------------------------------------------
def test_norm_attention_hand_worked_example():
    """W_q = W_k = 0 gives uniform attention; W_v = I and a diagonal W_o make f^h by hand."""
    model = make_model(vocab_size=3, n_out=2, d_model=2, n_heads=2, d_ff=4, n_layers=1)
    model.requires_grad_(False)  # so the test may set weights in place
    attn = model.layers[0].attn
    attn.W_q.weight.zero_(), attn.W_k.weight.zero_(), attn.W_q.bias.zero_(), attn.W_k.bias.zero_()
    attn.W_v.weight.copy_(torch.eye(2)), attn.W_v.bias.zero_()
    attn.W_o.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 3.0]]))
    model.pos.zero_()
    model.embed.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 2.0], [0.0, 0.0]]))
    ids = torch.tensor([[0, 1]])
    got = A.norm_attention(model, model(ids).trace)[0, 0]  # (H, T, T)
    # Uniform attention 1/2. Head 0 reads dim 0 and W_o scales it by 2; head 1 reads dim 1, x 3.
    # Token 0 = (1, -1), token 1 = (0.5, 2): ||f^0|| = (2, 1), ||f^1|| = (3, 6).
    want = np.array([[[1.0, 0.5], [1.0, 0.5]], [[1.5, 3.0], [1.5, 3.0]]], np.float32)
    np.testing.assert_allclose(got, want, atol=ATOL)
    # Both heads write into different dims, so the summed vector's length is the Pythagorean sum.
    summed = A.norm_attention_summed(model, model(ids).trace)[0, 0]
    np.testing.assert_allclose(summed, np.hypot(want[0], want[1]), atol=ATOL)


@pytest.mark.parametrize("w_o", ["learned", "identity", {1: "zero"}])
@pytest.mark.parametrize("ablate", [(), [(0, 1)]])
def test_norm_attention_is_the_norm_of_each_term_of_head_contributions(w_o, ablate):
    model = make_model()
    ids, pad = _padded_batch(model)
    trace = model(ids, pad, w_o=w_o, ablate_heads=ablate).trace
    per_head = A.norm_attention(model, trace)
    summed = A.norm_attention_summed(model, trace)
    L, H, d_k = 2, 4, 4
    assert per_head.shape == (L, 3, H, 6, 6) and per_head.dtype == np.float32
    assert summed.shape == (L, 3, 6, 6) and np.isfinite(summed).all()
    for layer, lt in enumerate(trace.layers):
        # The j-th term of z_h W_o^h, built from the model's weights (not from the trace's W_o).
        lin = model.layers[layer].attn.W_o
        W = wo.effective(lin.weight.detach(), lin.bias.detach(), layer_modes(w_o, L)[layer])[0]
        blocks = torch.stack([W[:, h * d_k : (h + 1) * d_k].T for h in range(H)])  # (H, d_k, D)
        gate = torch.ones(H)
        for l_, h_ in ablate:
            if l_ == layer:
                gate[h_] = 0.0
        f = torch.einsum("bhjk,hkd->bhjd", lt.v, blocks) * gate.view(1, H, 1, 1)
        terms = lt.attn[..., None] * f[:, :, None, :, :]  # (B, H, T_i, T_j, D)
        torch.testing.assert_close(terms.sum(3), lt.head_contributions(), atol=ATOL, rtol=0)
        np.testing.assert_allclose(per_head[layer], terms.norm(dim=-1).numpy(), atol=ATOL)
        np.testing.assert_allclose(summed[layer], terms.sum(1).norm(dim=-1).numpy(), atol=ATOL)
        assert (per_head[layer][1, :, :, 4:] == 0).all()  # padded keys receive nothing


def test_the_trace_records_the_gates_and_interventions_it_ran_with():
    model = make_model()
    ids, _ = _padded_batch(model)
    gates = torch.tensor([[1.0, 0.5, 0.0, 2.0], [1.0, 1.0, 1.0, 0.25]])
    trace = model(ids, head_gates=gates, ablate_heads=[(1, 2)]).trace
    assert trace.interventions.ablate_heads == ((1, 2),)
    want = gates.clone()
    want[1, 2] = 0.0
    for layer, lt in enumerate(trace.layers):
        torch.testing.assert_close(lt.head_gate, want[layer], atol=0, rtol=0)
        ungated = lt.attn @ lt.v  # z before the gate
        torch.testing.assert_close(lt.z, ungated * want[layer].view(1, -1, 1, 1))
    assert all(lt.head_gate is None for lt in model(ids).trace.layers)


def test_norm_attention_refuses_a_trace_of_another_model():
    trace = make_model(n_layers=1)(torch.zeros(1, 3, dtype=torch.long)).trace
    with pytest.raises(ValueError, match="trace has 1 layers but the model 2"):
        A.norm_attention(make_model(), trace)


# ---- 2. attention rollout -----------------------------------------------------------------------
def test_rollout_of_identity_attention_is_identity():
    weights = np.broadcast_to(np.eye(5, dtype=np.float32), (3, 2, 5, 5))
    np.testing.assert_allclose(A.attention_rollout(weights), weights, atol=1e-6)


def test_rollout_two_layers_two_tokens_by_hand():
    # A_hat0 = 0.5 A0 + 0.5 I = [[1, 0], [.25, .75]];  A_hat1 = [[.5, .5], [.5, .5]].
    # rollout1 = A_hat1 @ A_hat0 = [[.625, .375], [.625, .375]].
    weights = np.array([[[[1.0, 0.0], [0.5, 0.5]]], [[[0.0, 1.0], [1.0, 0.0]]]], np.float32)
    got = A.attention_rollout(weights)
    np.testing.assert_allclose(got[0, 0], [[1.0, 0.0], [0.25, 0.75]], atol=1e-6)
    np.testing.assert_allclose(got[1, 0], [[0.625, 0.375], [0.625, 0.375]], atol=1e-6)


def test_rollout_rows_sum_to_one_and_zero_rows_give_no_nan():
    rng = np.random.default_rng(0)
    w = rng.random((3, 2, 4, 4)).astype(np.float32)
    w[:, 1, 2] = 0.0  # a query that attends to nothing (e.g. a fully padded example)
    w[1, 0, 0] *= 5.0  # unnormalised rows are renormalised after the residual mix
    out = A.attention_rollout(w)
    assert out.shape == (3, 2, 4, 4) and np.isfinite(out).all()
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out[0, 1, 2], [0, 0, 1, 0], atol=1e-6)  # zero row -> identity row
    with pytest.raises(ValueError, match=r"\(L, B, T, T\)"):
        A.attention_rollout(w[0])


def test_normalise_rows_keeps_zero_rows_zero():
    got = A.normalise_rows(np.array([[2.0, 2.0], [0.0, 0.0]]))
    np.testing.assert_array_equal(got, [[0.5, 0.5], [0.0, 0.0]])


@pytest.mark.parametrize("method", ["raw", "norm"])
def test_rollout_from_trace_with_padding(method):
    model = make_model()
    ids, pad = _padded_batch(model)
    pad[2, :] = True  # an example that is all padding: its attention rows are zero
    trace = model(ids, pad).trace
    out = A.rollout_from_trace(model, trace, method)
    assert out.shape == (2, 3, 6, 6) and np.isfinite(out).all()
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)
    assert (out[:, 1, :4, 4:] == 0).all()  # real tokens never trace back to padding
    if method == "raw":
        mean = np.stack([lt.attn.mean(1).numpy() for lt in trace.layers])
        np.testing.assert_allclose(out, A.attention_rollout(mean), atol=1e-6)


# ---- 3. head importance -------------------------------------------------------------------------
def test_head_importance_matches_direct_ablation_and_autograd_gradients():
    task, model = _task_model("max_position")
    before = _state(model)
    imp = A.head_importance(model, task, n=24, seed=5)
    assert imp.loss_change.shape == imp.gradient.shape == (2, 4)
    batch = task.sample(24, np.random.default_rng(5))
    with torch.no_grad():
        base = model(batch.ids, batch.pad_mask, trace=False).logits
        assert imp.base_loss == pytest.approx(task.loss(base, batch.target).item(), abs=1e-6)
        cut = model(batch.ids, batch.pad_mask, ablate_heads=[(1, 2)], trace=False).logits
    want = task.loss(cut, batch.target).item() - imp.base_loss
    assert imp.loss_change[1, 2] == pytest.approx(want, abs=1e-5)
    assert _unchanged(model, before)


def test_gate_gradient_matches_finite_differences():
    """Michel et al.'s score, |dL/d xi| per example then the mean, against central differences."""
    task, model = _task_model("max_position")
    model = model.double()  # float64 so that the finite differences are accurate
    batch = task.sample(12, np.random.default_rng(7))
    imp = A.head_importance(model, task, n=12, seed=7)
    eps = 1e-4
    fd = np.zeros((12, 2, 4))
    for layer in range(2):
        for head in range(4):
            losses = []
            for sign in (1.0, -1.0):
                gates = torch.ones(2, 4, dtype=torch.float64)
                gates[layer, head] += sign * eps
                with torch.no_grad():
                    logits = model(batch.ids, batch.pad_mask, head_gates=gates).logits
                one = [slice(i, i + 1) for i in range(12)]
                losses.append([task.loss(logits[o], batch.target[o]).item() for o in one])
            fd[:, layer, head] = (np.array(losses[0]) - np.array(losses[1])) / (2 * eps)
    signed = A.gate_gradients(model, task, batch)  # (B, L, H), one gradient per example
    np.testing.assert_allclose(signed, fd, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(imp.gradient, np.abs(fd).mean(0), rtol=1e-4, atol=1e-7)
    assert not np.allclose(imp.gradient, np.abs(fd.mean(0)))  # per example, not of the mean


def test_a_head_that_writes_nothing_has_zero_importance():
    task, model = _task_model("sum")  # regression: the metric is the MAE
    model.layers[0].attn.W_o.weight[:, 4:8] = 0.0  # head 1 of layer 0 reaches nothing
    imp = A.head_importance(model, task, n=16)
    assert imp.metric == "mae" and not imp.higher_is_better
    assert imp.loss_change[0, 1] == 0.0 and imp.metric_change[0, 1] == 0.0
    assert imp.gradient[0, 1] == 0.0
    assert (imp.gradient[0, [0, 2, 3]] > 0).all()
    np.testing.assert_array_equal(imp.scores("metric"), imp.metric_change)  # lower MAE is better
    # Removing that head before W_o changes nothing; zeroing its slice after W_o still does.
    cmp = A.compare_ablation(model, task, 0, 1, n=16)
    assert cmp.attn_out_change_before.max() == 0.0 and cmp.prediction_changed_before == 0.0
    assert cmp.metric_before == cmp.base_metric and cmp.loss_before == cmp.base_loss
    assert cmp.attn_out_change_after.max() > 0 and cmp.logits_change_after.max() > 0
    assert cmp.removed_share_after[1] == 0.0  # the head writes nothing, so nothing is removed


def test_top_k_heads_and_ties():
    scores = np.array([[1.0, 3.0], [2.0, 3.0]])
    assert A.top_k_heads(scores, 2) == [(0, 1), (1, 1)]  # tie: the lower index first
    assert A.top_k_heads(scores, 3) == [(0, 1), (1, 1), (1, 0)]
    assert A.top_k_heads(scores, 0) == []
    with pytest.raises(ValueError, match="k must be an integer in 0..4"):
        A.top_k_heads(scores, 5)


def test_accuracy_keeping_top_k_ends_at_base_and_at_all_ablated():
    task, model = _task_model("max_position")
    scores = np.arange(8.0).reshape(2, 4)
    curve = A.keep_top_k_curve(model, task, scores, n=32)
    imp = A.head_importance(model, task, n=32)
    assert curve.shape == (9,) and curve[-1] == pytest.approx(imp.base_metric)
    batch = task.sample(32, np.random.default_rng(A.ANALYSIS_SEED))
    all_heads = [(layer, h) for layer in range(2) for h in range(4)]
    with torch.no_grad():
        logits = model(batch.ids, batch.pad_mask, ablate_heads=all_heads, trace=False).logits
    none_left = task.score(logits, batch.target)
    assert curve[0] == pytest.approx(none_left["correct"] / none_left["count"])
    # k=7 keeps every head but the lowest-scoring one, (0, 0)
    with torch.no_grad():
        logits = model(batch.ids, batch.pad_mask, ablate_heads=[(0, 0)], trace=False).logits
    s = task.score(logits, batch.target)
    assert A.accuracy_keeping_top_k(model, task, scores, 7, n=32) == pytest.approx(
        s["correct"] / s["count"]
    )


def test_importance_refuses_a_model_in_training_mode():
    task, model = _task_model("max_position")
    model.train()
    with pytest.raises(ValueError, match="training mode"):
        A.head_importance(model, task, n=4)


# ---- 4. ablation before versus after W_o --------------------------------------------------------
def test_before_and_after_w_o_agree_when_w_o_is_identity():
    task, model = _task_model("reverse")
    cmp = A.compare_ablation(model, task, 0, 2, n=16, w_o="identity")
    assert cmp.attn_out_gap.max() == 0.0 and cmp.logits_gap.max() == 0.0
    assert cmp.metric_before == cmp.metric_after and cmp.metric_difference == 0.0
    assert cmp.prediction_changed_before == cmp.prediction_changed_after
    np.testing.assert_allclose(cmp.removed_share_after, [0, 0, 1, 0], atol=1e-6)


def test_before_and_after_w_o_agree_for_a_block_diagonal_w_o_without_bias():
    task, model = _task_model("reverse")
    W = model.layers[0].attn.W_o
    W.weight.copy_(torch.block_diag(*(torch.randn(4, 4) for _ in range(4))))
    W.bias.zero_()
    cmp = A.compare_ablation(model, task, 0, 1, n=16)
    assert cmp.attn_out_gap.max() < 1e-5 and cmp.logits_gap.max() < 1e-5


def test_ablation_effects_are_the_removed_parts():
    task, model = _task_model("reverse")
    before = _state(model)
    batch = task.batch_from_texts(["abcde", "jihgfedcba", "aa"])
    cmp = A.compare_ablation(model, task, 1, 3, batch=batch)
    base = model(batch.ids, batch.pad_mask).trace.layers[1]
    real = ~batch.pad_mask
    # Before W_o exactly head 3's term goes; after W_o exactly dims 12..15 of attn_out go.
    want_before = base.head_contributions()[:, 3].norm(dim=-1) * real
    want_after = base.attn_out[..., 12:16].norm(dim=-1) * real
    np.testing.assert_allclose(cmp.attn_out_change_before, want_before.numpy(), atol=ATOL)
    np.testing.assert_allclose(cmp.attn_out_change_after, want_after.numpy(), atol=ATOL)
    assert cmp.attn_out_gap.max() > 0.1  # with a dense W_o the two are different operations
    assert cmp.removed_share_after.shape == (4,) and (cmp.removed_share_after > 0).all()
    with torch.no_grad():
        cut = model(batch.ids, batch.pad_mask, ablate_heads=[(1, 3)]).logits
        base_logits = model(batch.ids, batch.pad_mask).logits
    per_token = (cut - base_logits).norm(dim=-1) * real  # (B, T); averaged over real positions
    want = per_token.sum(1) / real.sum(1)
    np.testing.assert_allclose(cmp.logits_change_before, want.numpy(), atol=ATOL)
    assert _unchanged(model, before)


# ---- 5. OV circuits and composition -------------------------------------------------------------
def test_ov_circuit_of_a_hand_made_rank_one_head():
    model = make_model(vocab_size=3, n_out=2, d_model=4, n_heads=2, d_ff=4, n_layers=1)
    model.requires_grad_(False)
    attn = model.layers[0].attn
    attn.W_v.weight.zero_(), attn.W_o.weight.zero_()
    attn.W_v.weight[0, 1] = 1.0  # head 0's first value dim reads residual dim 1 (out x in)
    attn.W_o.weight[3, 0] = 2.0  # and W_o writes it, doubled, into output dim 3
    attn.W_v.weight[2:4, 0:2] = torch.eye(2)  # head 1 copies dims 0, 1 ...
    attn.W_o.weight[0:2, 2:4] = torch.diag(torch.tensor([3.0, 1.0]))  # ... scaled 3 and 1
    ov = A.ov_circuits(model)
    want0 = np.zeros((4, 4))
    want0[1, 3] = 2.0  # row-vector convention: e_1 @ OV = 2 e_3
    np.testing.assert_allclose(ov.ov[0, 0], want0)
    np.testing.assert_allclose(ov.singular_values[0], [[2.0, 0.0], [3.0, 1.0]], atol=1e-6)
    assert ov.effective_rank[0, 0] == pytest.approx(1.0)
    p = np.array([0.75, 0.25])
    assert ov.effective_rank[0, 1] == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-5)
    assert ov.numerical_rank[0].tolist() == [1, 2]
    assert ov.frobenius[0].tolist() == pytest.approx([2.0, math.sqrt(10.0)])
    zero = A.ov_circuits(model, w_o="zero")
    assert (zero.ov == 0).all() and (zero.effective_rank == 0).all()


@pytest.mark.parametrize(
    "w_o", ["learned", wo.BLOCK_DIAGONAL, "rank:3", "identity", {0: "zero"}], ids=str
)
def test_ov_spectra_equal_the_full_svd_of_every_circuit(w_o):
    """ov_spectra takes the SVD of a d_k x D factor of each circuit, never the D x D circuit;
    its numbers must be those of the circuit itself, computed the direct way."""
    model = make_model(n_layers=3).requires_grad_(False)
    got = A.ov_spectra(model, w_o)
    cfg = model.config
    modes = layer_modes(w_o, cfg.n_layers)
    for layer in range(cfg.n_layers):
        lin = model.layers[layer].attn.W_o
        W_o = wo.effective(lin.weight, lin.bias, modes[layer], cfg.n_heads)[0]
        for h in range(cfg.n_heads):
            ov = A.ov_matrix(model.layers[layer].attn.W_v.weight, W_o, h, cfg.n_heads)
            s = np.linalg.svd(ov, compute_uv=False)[: cfg.d_k]
            np.testing.assert_allclose(got.singular_values[layer, h], s, rtol=1e-5, atol=1e-6)
            assert got.frobenius[layer, h] == pytest.approx(np.linalg.norm(ov), rel=1e-5, abs=1e-7)
            assert got.effective_rank[layer, h] == pytest.approx(
                A.effective_rank(s), rel=1e-5, abs=1e-7
            )
            assert got.numerical_rank[layer, h] == A.numerical_rank(s, got.rtol)
    full = A.ov_circuits(model, w_o)
    np.testing.assert_array_equal(full.singular_values, got.singular_values)
    assert full.ov.shape == (3, 4, 16, 16)


def test_composition_scores_equal_the_score_of_each_circuit_and_reader():
    """composition_scores never forms a circuit either: every entry against composition_score
    of the (D, D) circuit and the folded (D, d_k) reader, as the formula is written."""
    model = make_model(n_layers=3).requires_grad_(False)
    comp = A.composition_scores(model, "rank:5")
    H = model.config.n_heads
    for layer in range(2):
        W_o = wo.effective(model.layers[layer].attn.W_o.weight, None, "rank:5")[0]
        fold = A.layernorm_fold(model, layer)
        nxt = model.layers[layer + 1].attn
        for x, lin in (("q", nxt.W_q), ("k", nxt.W_k), ("v", nxt.W_v)):
            for h in range(H):
                ov = A.ov_matrix(model.layers[layer].attn.W_v.weight, W_o, h, H)
                for g in range(H):
                    reader = fold @ A.head_block(lin.weight, g, H, "in")
                    want = A.composition_score(ov, reader)
                    assert getattr(comp, x)[layer, h, g] == pytest.approx(want, rel=1e-5)


def test_ov_matrix_is_what_the_head_writes_for_a_token():
    model = make_model()
    attn = model.layers[1].attn
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(0))
    for h in range(4):
        block = slice(h * 4, (h + 1) * 4)
        v = (attn.W_v(x) - attn.W_v.bias)[:, block]  # head h's values, bias aside
        want = v @ attn.W_o.weight[:, block].T  # head h's term of W_o's output
        got = x.double().numpy() @ A.ov_matrix(attn.W_v.weight, attn.W_o.weight, h, 4)
        np.testing.assert_allclose(got, want.detach().numpy(), atol=1e-5)


def test_effective_and_numerical_rank():
    assert A.effective_rank([1.0, 1.0, 1.0, 1.0]) == pytest.approx(4.0)
    assert A.effective_rank([5.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert A.effective_rank([0.0, 0.0]) == 0.0
    assert A.numerical_rank([1.0, 0.02, 0.005]) == 2
    assert A.numerical_rank([1.0, 0.02, 0.005], rtol=0.001) == 3
    assert A.numerical_rank([0.0]) == 0


def test_composition_score_by_hand():
    e = np.eye(4)
    writer = np.outer(e[0], e[1])  # writes into dim 1
    assert A.composition_score(writer, e[:, [1]]) == pytest.approx(1.0)
    assert A.composition_score(writer, e[:, [2]]) == 0.0
    assert A.composition_score(writer, (e[:, [1]] + e[:, [2]])) == pytest.approx(1 / math.sqrt(2))
    assert A.composition_score(np.zeros((4, 4)), e[:, [1]]) == 0.0


def test_random_matrices_score_about_the_baseline():
    rng = np.random.default_rng(0)
    D, d_k = 64, 16
    scores = [
        A.composition_score(
            rng.normal(size=(D, d_k)) @ rng.normal(size=(d_k, D)), rng.normal(size=(D, d_k))
        )
        for _ in range(50)
    ]
    assert np.mean(scores) == pytest.approx(1 / math.sqrt(D), rel=0.15)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_composition_scores_follow_the_formula(norm):
    model = make_model(norm=norm)
    comp = A.composition_scores(model, fold_layernorm=False)
    assert comp.q.shape == comp.k.shape == comp.v.shape == (1, 4, 4)
    assert comp.baseline == pytest.approx(0.25)
    ov = A.ov_matrix(model.layers[0].attn.W_v.weight, model.layers[0].attn.W_o.weight, 2, 4)
    # W_K of head 1 in row-vector convention, (D, d_k)
    reader = model.layers[1].attn.W_k.weight[4:8].T.detach().double().numpy()
    want = np.linalg.norm(ov @ reader) / (np.linalg.norm(ov) * np.linalg.norm(reader))
    assert comp.k[0, 2, 1] == pytest.approx(want, rel=1e-5)
    folded = A.composition_scores(model)
    assert folded.fold_layernorm and not np.allclose(folded.v, comp.v)
    assert ((folded.v >= 0) & (folded.v <= 1)).all()


def _sigma(norm, y):
    return torch.sqrt(y.var(dim=-1, unbiased=False, keepdim=True) + norm.eps)


def test_layernorm_fold_is_the_linear_part_of_layernorm():
    """Pre-norm: the next layer's norm1. (LN(y) - beta) * sigma(y) is linear in y."""
    model = make_model(norm="pre").requires_grad_(False).double()
    for p in model.layers[1].norm1.parameters():
        p.normal_(1.0, 0.3)
    norm = model.layers[1].norm1
    y = torch.randn(7, 16, dtype=torch.float64)
    linear = (norm(y) - norm.bias) * _sigma(norm, y)
    torch.testing.assert_close(linear, y @ torch.from_numpy(A.layernorm_fold(model, 0)))


def test_layernorm_fold_of_post_norm_crosses_both_norms():
    """Post-norm: norm1 then norm2 of the same layer (the feed-forward net aside)."""
    model = make_model(norm="post").requires_grad_(False).double()
    n1, n2 = model.layers[0].norm1, model.layers[0].norm2
    for p in (*n1.parameters(), *n2.parameters()):
        p.normal_(1.0, 0.3)
    y = torch.randn(7, 16, dtype=torch.float64)
    z = n1(y)
    P = torch.eye(16, dtype=torch.float64) - 1.0 / 16
    # n2(z) = (z P diag(g2)) / sigma2 + b2, with z = y P diag(g1) / sigma1 + b1.
    linear = (n2(z) - n2.bias) * _sigma(n2, z) - n1.bias @ P @ torch.diag(n2.weight)
    linear = linear * _sigma(n1, y)
    torch.testing.assert_close(linear, y @ torch.from_numpy(A.layernorm_fold(model, 0)))


# ---- 6. how W_o mixes heads ---------------------------------------------------------------------
def test_head_shares_by_hand():
    W = np.array([[3.0, 4.0], [0.0, 1.0]])  # (out, in), 2 heads of width 1
    shares = A.head_shares(W, 2)
    np.testing.assert_allclose(shares, [[9 / 25, 16 / 25], [0.0, 1.0]], atol=1e-6)
    p = np.array([9 / 25, 16 / 25])
    want = (-(p * np.log(p)).sum() + 0.0) / 2 / math.log(2)
    assert A.mixing_index(shares) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize(
    "W",
    [
        np.eye(8),
        np.kron(np.eye(4), np.ones((2, 2))),  # block-diagonal: each head into its own slice
        np.kron(np.eye(4)[[2, 0, 3, 1]], np.ones((2, 2))),  # heads permuted, still unmixed
    ],
)
def test_unmixed_w_o_has_one_hot_shares_and_mixing_zero(W):
    shares = A.head_shares(W, 4)
    assert ((shares == 0) | (shares == 1)).all() and (shares.sum(1) == 1).all()
    assert A.mixing_index(shares) == 0.0


def test_dense_w_o_mixes_almost_uniformly():
    W = np.random.default_rng(0).normal(size=(64, 64))
    assert A.mixing_index(A.head_shares(W, 4)) > 0.9
    assert A.mixing_index(A.head_shares(np.ones((8, 8)), 4)) == pytest.approx(1.0)


def test_w_o_mixing_follows_the_switch_and_has_no_nan():
    model = make_model()
    learned = A.w_o_mixing(model)
    assert learned.shares.shape == (2, 16, 4) and learned.mixing.shape == (2,)
    np.testing.assert_allclose(learned.shares.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(learned.head_weight.sum(-1), 1.0, atol=1e-6)
    assert (A.w_o_mixing(model, "identity").mixing == 0).all()
    zero = A.w_o_mixing(model, {0: "zero"})
    assert zero.mixing[0] == 0.0 and (zero.shares[0] == 0).all()
    assert zero.mixing[1] == learned.mixing[1]


# ---- on a bundled model -------------------------------------------------------------------------
def test_every_analysis_runs_on_a_bundled_model(bundled):
    model, meta = bundled["max_position"]
    task = get_task(meta.task)
    before = _state(model)
    L, H, D = model.config.n_layers, model.config.n_heads, model.config.d_model
    ids, pad = task.encode_batch(["31415926", "7", "9000000000000009"])
    trace = model(ids, pad).trace
    per_head = A.norm_attention(model, trace)
    assert per_head.shape == (L, 3, H, 17, 17) and np.isfinite(per_head).all()
    for layer, lt in enumerate(trace.layers):
        # Triangle inequality: the term lengths add up to at least the length of their sum.
        lengths = torch.from_numpy(per_head[layer]).sum(-1)
        assert (lengths + 1e-4 >= lt.head_contributions().norm(dim=-1)).all()
    for method in ("raw", "norm"):
        roll = A.rollout_from_trace(model, trace, method)
        assert np.isfinite(roll).all()
        np.testing.assert_allclose(roll.sum(-1), 1.0, atol=1e-5)
    imp = A.head_importance(model, task, n=64)
    assert imp.metric == "accuracy" and imp.base_metric > 0.9
    for kind in ("loss", "metric", "gradient"):
        assert np.isfinite(imp.scores(kind)).all()
    best = imp.scores("loss")
    assert A.accuracy_keeping_top_k(model, task, best, L * H, n=64) == imp.base_metric
    cmp = A.compare_ablation(model, task, 0, int(best[0].argmax()), n=64)
    assert np.isfinite(cmp.attn_out_gap).all() and cmp.attn_out_gap.max() > 0
    ov = A.ov_circuits(model)
    assert ov.singular_values.shape == (L, H, D // H)
    assert (ov.effective_rank > 1).all() and (ov.effective_rank <= D // H).all()
    comp = A.composition_scores(model)
    assert comp.v.shape == (L - 1, H, H) and np.isfinite(comp.q).all()
    mix = A.w_o_mixing(model)
    assert ((mix.mixing > 0) & (mix.mixing <= 1)).all()
    assert _unchanged(model, before)


def test_help_cites_a_paper_for_every_method():
    for name in (
        "norm_attention",
        "norm_attention_summed",
        "attention_rollout",
        "head_importance",
        "accuracy_keeping_top_k",
        "compare_ablation",
        "ov_circuits",
        "composition_scores",
        "w_o_mixing",
    ):
        assert callable(getattr(A, name))
        assert name in HELP and len(HELP[name]) > 100  # the view's explanation of the method
    for key, author in (
        ("norm_attention", "Kobayashi"),
        ("attention_rollout", "Abnar"),
        ("head_importance", "Michel"),
        ("ov_circuits", "Elhage"),
        ("composition_scores", "Elhage"),
    ):
        assert author in HELP[key] and author in getattr(A, key).__doc__ + A.__doc__


def test_attention_flow_matches_the_methods_on_one_trace():
    model, meta = load_checkpoint(MODELS / "reverse.safetensors")
    flow = A.attention_flow(model, meta.task, "abcdef", w_o={1: "identity"})
    ids, pad = get_task(meta.task).encode_batch(["abcdef"])
    trace = model(ids, pad, w_o={1: "identity"}).trace
    np.testing.assert_array_equal(flow["norm"], A.norm_attention(model, trace)[:, 0])
    np.testing.assert_array_equal(
        flow["rollout_norm"], A.rollout_from_trace(model, trace, "norm")[:, 0]
    )
    assert flow["norm_summed"].shape == (2, 7, 7) and flow["rollout_raw"].shape == (2, 7, 7)


def test_ranked_keys_lists_a_rows_strongest_keys_first():
    rng = np.random.default_rng(0)
    weights = rng.random((40, 40))
    weights /= weights.sum(-1, keepdims=True)
    ranked = A.ranked_keys(weights, 7, 5)
    assert [j for j, _ in ranked] == list(np.argsort(weights[7])[::-1][:5])
    assert [w for _, w in ranked] == sorted(weights[7], reverse=True)[:5]
    tied = np.full((3, 3), 1 / 3)
    assert [j for j, _ in A.ranked_keys(tied, 0, 3)] == [0, 1, 2]  # ties: earlier first
    assert len(A.ranked_keys(tied, 2, 10)) == 3  # never more than the row has
    with pytest.raises(ValueError, match="query"):
        A.ranked_keys(tied, 3, 1)
    with pytest.raises(ValueError, match="attention map"):
        A.ranked_keys(np.ones((2, 3)), 0, 1)
