"""tfviz.analysis.neuron, the neuron view: q, k, their product, the scores and the softmax of one
head and query, checked against an independent float64 computation from the weights (the
layer's input taken from the trace; norm, projections, rotary turn, grouped-query heads and
masks written out here), and against the trace's own attention, for every family: toy encoder,
the bundled rotary decoder, BERT, GPT-2, Llama (rotary + GQA), Qwen2 (q/k/v biases), padded
batches, learned and switched."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.conftest import MODELS
from tests.support import random_encoder
from tfviz import get_task, hf
from tfviz.analysis.neuron import (
    neuron_view,
    neuron_view_of_pass,
    neuron_view_of_trace,
    softmax_masked,
)
from tfviz.core.interventions import Interventions
from tfviz.core.model import Encoder
from tfviz.core.trace import run_trace
from tfviz.hf.pretrained import SentenceTask

transformers = pytest.importorskip("transformers")  # builds the tiny Hugging Face folders

SWITCHED = Interventions(w_o="identity", ablate_heads=((0, 1),))
LM_FOLDER = MODELS / "language" / "shakespeare-2l-attn"
HF_TEXTS = ["the cat sat on the mat .", "a dog ran", "the quick brown fox jumps over the lazy dog"]


def toy_reverse() -> tuple[Encoder, object]:
    """A random reverse-task encoder (post-norm, learned positions) with non-zero biases."""
    task = get_task("reverse")
    return random_encoder(task, seed=0), task


@pytest.fixture(scope="module")
def families(tmp_path_factory) -> dict:
    """family -> (model, task, ids, pad_mask): a padded batch of three texts for each."""
    from tests.hf.test_hf_decoders import build as build_decoder
    from tests.hf.test_hf_encoders import _build as build_encoder

    root = tmp_path_factory.mktemp("neuron")
    model, task = toy_reverse()
    ids, pad = task.encode_batch(["abc", "abcdefg", "ab"])
    found = {"toy": (model, task, ids, pad)}
    lm = hf.open_folder(LM_FOLDER)
    lm_task = hf.NextTokenTask(lm.tokenizer)
    found["bundled-lm"] = (lm.model, lm_task, *lm_task.encode_batch(["To be", "or not to be"]))
    for kind in ("bert", "gpt2", "llama", "qwen2"):
        if kind == "bert":
            build_encoder(kind, root / kind)
        else:
            build_decoder(kind, root / kind)
        loaded = hf.open_folder(root / kind)
        kind_task = (
            hf.NextTokenTask(loaded.tokenizer)
            if loaded.model.config.causal
            else SentenceTask(loaded.tokenizer, loaded.head)
        )
        batch = loaded.tokenizer.batch(HF_TEXTS)
        found[kind] = (loaded.model, kind_task, batch.ids, batch.pad_mask)
    return found


def normed_input(x: np.ndarray, state: dict, prefix: str, cfg) -> np.ndarray:
    """The layer's norm1 in float64: LayerNorm, or RMSNorm where the checkpoint has no bias."""
    w = state[prefix + "norm1.weight"]
    if cfg.norm_type == "rms":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.norm_eps) * w
    centred = x - x.mean(-1, keepdims=True)
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + cfg.norm_eps) * w + state[prefix + "norm1.bias"]


def turned(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """x (B, n, T, d) with each pair (i, i + d/2) turned by position * theta^(-2i/d)."""
    half = x.shape[-1] // 2
    angle = positions[:, None, :, None] * theta ** (-2.0 * np.arange(half) / x.shape[-1])
    a, b = x[..., :half], x[..., half:]
    cos, sin = np.cos(angle), np.sin(angle)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def independent_attention(model, resid_pre: torch.Tensor, pad: torch.Tensor, layer: int) -> dict:
    """q, k (before and after the turn), per-query-head keys, masked scores and softmax of a
    layer, in float64 from the state dict: nothing of tfviz's forward is used."""
    cfg = model.config
    prefix = f"layers.{layer}."
    state = {
        k: v.detach().double().numpy()
        for k, v in model.state_dict().items()
        if k.startswith(prefix)
    }
    x = resid_pre.detach().double().numpy()
    if cfg.norm == "pre":
        x = normed_input(x, state, prefix, cfg)
    B, T, _ = x.shape
    H, d, n_kv = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.n_kv_heads or cfg.n_heads

    def heads(role: str, n: int) -> np.ndarray:
        w = state[f"{prefix}attn.{role}.weight"]
        b = state.get(f"{prefix}attn.{role}.bias", 0.0)  # Llama's projections have none
        return (x @ w.T + b).reshape(B, T, n, d).transpose(0, 2, 1, 3)

    q, k = heads("W_q", H), heads("W_k", n_kv)
    real = ~pad.numpy()
    if cfg.causal:  # left padding: positions count real tokens
        positions = np.maximum(np.cumsum(real, axis=-1) - 1, 0)
    else:
        positions = np.broadcast_to(np.arange(T), (B, T))
    qr, kr = q, k
    if cfg.positions == "rotary":
        qr, kr = turned(q, positions, cfg.rope_theta), turned(k, positions, cfg.rope_theta)
    kv_of = [h // (H // n_kv) for h in range(H)]  # consecutive query heads share a kv head
    scores = np.einsum("bhid,bhjd->bhij", qr, kr[:, kv_of]) / math.sqrt(d)
    masked = np.broadcast_to(~real[:, None, None, :], scores.shape).copy()
    if cfg.causal:
        masked |= np.triu(np.ones((T, T), dtype=bool), 1)
    scores = np.where(masked, -np.inf, scores)
    top = np.max(np.where(masked, -1e300, scores), axis=-1, keepdims=True)
    e = np.where(masked, 0.0, np.exp(scores - top))
    total = e.sum(-1, keepdims=True)
    attn = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return dict(q=q, k=k, qr=qr, kr=kr, kv_of=kv_of, scores=scores, masked=masked, attn=attn)


def queries_to_check(T: int) -> list[int]:
    return sorted({0, 1, T // 2, T - 1})


@pytest.mark.parametrize("switches", [None, SWITCHED], ids=["learned", "switched"])
@pytest.mark.parametrize("family", ["toy", "bundled-lm", "bert", "gpt2", "llama", "qwen2"])
def test_the_neuron_view_is_the_independent_computation_and_the_traces_attention(
    families, family, switches
):
    model, _, ids, pad = families[family]
    assert pad.any()  # a padded batch: padding masks are checked too
    with torch.no_grad():
        trace = model(ids, pad, Interventions.of(switches)).trace
    cfg, (B, T) = model.config, ids.shape
    worst = 0.0
    for layer in range(cfg.n_layers):
        ref = independent_attention(model, trace.layers[layer].resid_pre, pad, layer)
        for row in range(B):
            for head in range(cfg.n_heads):
                for query in queries_to_check(T):
                    got = neuron_view_of_pass(
                        model, ids, pad, layer, head, query, switches, row=row
                    )
                    assert got.kv_head == ref["kv_of"][head]
                    want = trace.layers[layer].attn[row, head, query].double().numpy()
                    # the softmax of the shown scores is the trace's attention
                    np.testing.assert_allclose(got.weights, want, rtol=0, atol=1e-6)
                    np.testing.assert_array_equal(got.masked, ref["masked"][row, head, query])
                    np.testing.assert_array_equal(np.isneginf(got.scores), got.masked)
                    np.testing.assert_allclose(got.weights, softmax_masked(got.scores), atol=0)
                    kv = got.kv_head
                    pairs = [
                        (got.q, ref["qr"][row, head, query]),
                        (got.k, ref["kr"][row, kv]),
                        (got.product, ref["qr"][row, head, query] * ref["kr"][row, kv]),
                        (got.dots / math.sqrt(cfg.d_k), np.where(
                            got.masked, got.dots / math.sqrt(cfg.d_k),
                            ref["scores"][row, head, query])),
                        (got.weights, ref["attn"][row, head, query]),
                    ]  # fmt: skip
                    for mine, theirs in pairs:
                        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=2e-5)
                        worst = max(worst, float(np.abs(mine - theirs).max()))
                    worst = max(worst, float(np.abs(got.weights - want).max()))
    print(f"{family}: largest difference {worst:.2e}")


def test_a_switch_in_layer_0_changes_what_layer_1_reads(families):
    model, _, ids, pad = families["llama"]
    learned = neuron_view_of_pass(model, ids, pad, 1, 0, 5, row=2)
    switched = neuron_view_of_pass(model, ids, pad, 1, 0, 5, SWITCHED, row=2)
    assert np.abs(learned.q - switched.q).max() > 1e-3
    assert np.abs(learned.weights - switched.weights).max() > 1e-4


@pytest.mark.parametrize("family", ["bundled-lm", "llama", "qwen2"])
def test_before_the_turn_q_and_k_are_the_projections_and_the_scores_stay_the_softmaxs(
    families, family
):
    model, _, ids, pad = families[family]
    with torch.no_grad():
        trace = model(ids, pad).trace
    layer, head, row = 1, model.config.n_heads - 1, ids.shape[0] - 1
    ref = independent_attention(model, trace.layers[layer].resid_pre, pad, layer)
    query = ids.shape[1] - 1
    after = neuron_view_of_pass(model, ids, pad, layer, head, query, row=row)
    before = neuron_view_of_pass(model, ids, pad, layer, head, query, row=row, rotated=False)
    assert after.rotated and not before.rotated
    kv = before.kv_head
    np.testing.assert_allclose(before.q, ref["q"][row, head, query], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(before.k, ref["k"][row, kv], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(before.dots, (before.q * before.k).sum(-1), atol=1e-12)
    assert np.abs(before.dots - after.dots).max() > 1e-3  # the turn changes the dot products
    np.testing.assert_array_equal(before.scores, after.scores)
    np.testing.assert_array_equal(before.weights, after.weights)
    # the key at the query's own position: relative distance 0, the same dot product
    np.testing.assert_allclose(before.dots[query], after.dots[query], rtol=1e-5)


def test_learned_positions_have_nothing_to_turn(families):
    model, _, ids, pad = families["gpt2"]
    view = neuron_view_of_pass(model, ids, pad, 0, 0, 3)
    unturned = neuron_view_of_pass(model, ids, pad, 0, 0, 3, rotated=False)
    assert not view.rotated and not unturned.rotated
    np.testing.assert_array_equal(view.q, unturned.q)


def test_a_query_with_every_key_padded_attends_to_nothing(families):
    model, _, ids, pad = families["gpt2"]
    row = int(pad[:, 0].int().argmax())  # left-padded: its first position is padding
    assert pad[row, 0]
    view = neuron_view_of_pass(model, ids, pad, 0, 0, 0, row=row)
    assert view.masked.all() and np.isneginf(view.scores).all()
    np.testing.assert_array_equal(view.weights, 0.0)


@pytest.mark.parametrize("switches", [None, SWITCHED], ids=["learned", "switched"])
@pytest.mark.parametrize("family", ["toy", "bundled-lm", "bert", "llama", "qwen2"])
def test_a_trace_and_a_text_give_the_same_view_as_the_pass(families, family, switches):
    model, task, _, _ = families[family]
    text = "abcdef" if family == "toy" else "the cat sat on the mat"
    arrays = run_trace(model, task, text, switches)
    ids, pad = task.encode_batch([text])
    T = ids.shape[1]
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            for query in queries_to_check(T):
                of_trace = neuron_view_of_trace(model, task, arrays, layer, head, query)
                of_text = neuron_view(model, task, text, layer, head, query, switches)
                of_pass = neuron_view_of_pass(model, ids, pad, layer, head, query, switches)
                want = arrays.attn[layer, head, query]
                for view in (of_trace, of_text):
                    np.testing.assert_allclose(view.weights, want, rtol=0, atol=1e-6)
                    np.testing.assert_allclose(view.q, of_pass.q, rtol=1e-6, atol=1e-6)
                    np.testing.assert_allclose(view.k, of_pass.k, rtol=1e-6, atol=1e-6)
                    assert view.labels == arrays.labels
    assert of_pass.labels == []  # the pass has no task to label it


def test_a_replaced_pattern_is_said_and_the_model_is_not_changed(families):
    model, task, ids, pad = families["toy"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    replaced = Interventions(patterns=((1, 2, "uniform"),))
    assert neuron_view_of_pass(model, ids, pad, 1, 2, 3, replaced).replaced
    assert not neuron_view_of_pass(model, ids, pad, 1, 1, 3, replaced).replaced
    assert not neuron_view(model, task, "abc", 1, 2, 0).replaced
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    assert not model.training


@pytest.mark.parametrize(
    "where", [dict(layer=2), dict(head=4), dict(query=4), dict(row=3), dict(layer=-1)]
)
def test_an_index_out_of_range_is_refused(families, where):
    model, _, ids, pad = families["toy"]
    at = dict(layer=0, head=0, query=0, row=0) | where
    ids, pad = ids[:, :4], pad[:, :4]
    with pytest.raises(ValueError, match="must be from 0"):
        neuron_view_of_pass(model, ids, pad, at["layer"], at["head"], at["query"], row=at["row"])


def test_softmax_masked_is_zero_at_minus_infinity_and_on_an_all_masked_row():
    s = np.array([[1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf]])
    got = softmax_masked(s)
    e = np.exp([1.0 - 2.0, 0.0])
    np.testing.assert_allclose(got[0], [e[0] / e.sum(), 0.0, e[1] / e.sum()])
    np.testing.assert_array_equal(got[1], 0.0)
