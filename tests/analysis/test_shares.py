"""tfviz.analysis.shares: each head's term z_h W_O^h of attn_out, its length and its two shares,
checked against an independent float64 computation from the state dict's W_o (or the identity
a switch puts there), and against the trace's attn_out: the norm shares and the projection
shares sum to 1 over heads, and identity W_o makes each head's term its own block."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import MODELS
from tests.support import random_encoder
from tfviz import get_task, hf
from tfviz.analysis.shares import (
    applied_w_o,
    learned_and_switched,
    output_shares,
    output_shares_of_trace,
    shares_from,
)
from tfviz.core.interventions import Interventions
from tfviz.core.trace import run_trace
from tfviz.training.checkpoint import load_checkpoint

LM_FOLDER = MODELS / "language" / "shakespeare-2l-attn"


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict:
    """name -> (model, task, text): a random toy, a trained bundled toy, the bundled rotary
    decoder, and a tiny Llama (GQA, RMSNorm, no W_o bias) when transformers is installed."""
    task = get_task("reverse")
    found = {"toy": (random_encoder(task, seed=1), task, "abcdefg")}
    trained, meta = load_checkpoint(MODELS / "sum.safetensors")
    sum_task = get_task(meta.task)
    found["bundled-sum"] = (trained, sum_task, sum_task.examples[0])
    lm = hf.open_folder(LM_FOLDER)
    found["bundled-lm"] = (lm.model, hf.NextTokenTask(lm.tokenizer), "To be or not to be")
    try:
        from tests.hf.test_hf_decoders import build as build_decoder
    except pytest.skip.Exception:  # transformers (the folder's builder) is not installed
        return found
    folder = tmp_path_factory.mktemp("shares") / "llama"
    build_decoder("llama", folder)
    llama = hf.open_folder(folder)
    found["llama"] = (llama.model, hf.NextTokenTask(llama.tokenizer), "the cat sat on the mat")
    return found


NAMES = ["toy", "bundled-sum", "bundled-lm", "llama"]


def case_of(cases: dict, name: str):
    if name not in cases:
        pytest.skip("transformers is not installed: no Llama folder")
    return cases[name]


def independent_terms(model, z: np.ndarray, mode: str) -> np.ndarray:
    """(L, H, T, D) each head's term z_h W_o[:, head h's columns]^T in float64 from the state
    dict's W_o (learned) or the identity."""
    cfg = model.config
    state = model.state_dict()
    d_k = cfg.d_model // cfg.n_heads
    terms = []
    for layer in range(cfg.n_layers):
        W = state[f"layers.{layer}.attn.W_o.weight"].double().numpy()
        if mode == "identity":
            W = np.eye(cfg.d_model)
        blocks = [W[:, h * d_k : (h + 1) * d_k] for h in range(cfg.n_heads)]
        zl = z[layer].astype(np.float64)
        terms.append(np.stack([zl[h] @ blocks[h].T for h in range(cfg.n_heads)]))
    return np.stack(terms)


@pytest.mark.parametrize("mode", ["learned", "identity"])
@pytest.mark.parametrize("name", NAMES)
def test_the_shares_are_the_independent_computation_and_sum_to_one(cases, name, mode):
    model, task, text = case_of(cases, name)
    trace = run_trace(model, task, text, w_o=mode)
    got = output_shares_of_trace(model, trace)
    terms = independent_terms(model, trace.z, mode)  # (L, H, T, D)
    whole = terms.sum(axis=1)  # (L, T, D)
    norms = np.linalg.norm(terms, axis=-1)
    projection = np.einsum("lhtd,ltd->lht", terms, whole) / (whole * whole).sum(-1)[:, None]
    assert got.w_o_modes == [mode] * model.config.n_layers
    np.testing.assert_allclose(got.norms, norms, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got.norm_share, norms / norms.sum(1, keepdims=True), atol=1e-9)
    np.testing.assert_allclose(got.projection_share, projection, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.norm_share.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(got.projection_share.sum(1), 1.0, atol=1e-9)
    assert (got.norm_share >= 0).all()
    # the heads' terms add up to what the layer wrote, its bias aside
    attn_out = trace.attn_out.astype(np.float64) - trace.b_o[:, None].astype(np.float64)
    np.testing.assert_allclose(whole, attn_out, atol=2e-5)
    np.testing.assert_allclose(got.total, np.linalg.norm(attn_out, axis=-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.bias, np.linalg.norm(trace.b_o, axis=-1), rtol=1e-6)
    assert got.norms.shape == (model.config.n_layers, model.config.n_heads, len(trace.labels))


@pytest.mark.parametrize("name", NAMES)
def test_identity_w_o_makes_each_heads_term_its_own_block(cases, name):
    model, task, text = case_of(cases, name)
    pair = learned_and_switched(model, task, text, Interventions(w_o="identity"))
    trace = run_trace(model, task, text, w_o="identity")
    W = applied_w_o(model, trace.interventions)
    np.testing.assert_array_equal(W, np.broadcast_to(np.eye(model.config.d_model), W.shape))
    z = trace.z.astype(np.float64)  # (L, H, T, d_k)
    own = np.linalg.norm(z, axis=-1)
    np.testing.assert_allclose(pair.switched.norms, own, rtol=1e-6, atol=1e-9)
    # orthogonal blocks: each head's share of ||concat||^2 is ||z_h||^2
    concat = (own**2).sum(1, keepdims=True)
    np.testing.assert_allclose(pair.switched.projection_share, own**2 / concat, atol=1e-9)
    np.testing.assert_array_equal(pair.switched.bias, 0.0)
    learned = output_shares(model, task, text)
    np.testing.assert_array_equal(pair.learned.norms, learned.norms)
    assert np.abs(pair.learned.norms - pair.switched.norms).max() > 1e-3


def test_switches_after_w_o_and_head_order_are_the_maps_the_pass_applied(cases):
    model, task, text = case_of(cases, "toy")
    switches = Interventions(
        ablate_after_w_o=((0, 1),), head_order=((1, (2, 0, 3, 1)),), ablate_heads=((1, 0),)
    )
    trace = run_trace(model, task, text, switches)
    got = output_shares_of_trace(model, trace)
    W = applied_w_o(model, switches)
    rebuilt = np.einsum("lhtk,lhkd->lhtd", trace.z, W.transpose(0, 2, 1).reshape(2, 4, 4, 16))
    np.testing.assert_allclose(rebuilt.sum(1) + trace.b_o[:, None], trace.attn_out, atol=1e-5)
    np.testing.assert_array_equal(W[0, 4:8], 0.0)  # head 1's output slice zeroed after W_o
    # head 0, zeroed before W_o, writes nothing from the concat slot the new order gives it
    slot = (2, 0, 3, 1).index(0)
    np.testing.assert_array_equal(got.norms[1, slot], 0.0)
    np.testing.assert_allclose(got.projection_share.sum(1), 1.0, atol=1e-9)


def test_zero_w_o_has_no_shares_and_no_nan(cases):
    model, task, text = case_of(cases, "toy")
    got = output_shares(model, task, text, Interventions(w_o="zero"))
    for name in ("norms", "norm_share", "projection_share", "total"):
        assert np.isfinite(getattr(got, name)).all()
        np.testing.assert_array_equal(getattr(got, name), 0.0)


def test_shares_from_takes_plain_arrays():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(1, 2, 3, 2)).astype(np.float32)
    W = rng.normal(size=(1, 4, 4)).astype(np.float32)
    got = shares_from(z, W, np.zeros((1, 4)), ["learned"])
    assert got.norms.dtype == np.float64 and got.norms.shape == (1, 2, 3)
    np.testing.assert_allclose(got.projection_share.sum(1), 1.0, atol=1e-12)
