"""What depends only on a model's weights is computed once per server and shared (issue 16).

Two caches: tfviz.core.wo's SVD of a weight (rank-k W_o took one SVD per layer per forward pass,
seconds for MiniLM's mode sweep), and the Analysis view's weights-only numbers (OV spectra,
composition, W_o's mixing: one MeasureCache per checkpoint, shared by every session, its values
in tfviz.ui.compute's one cache). Each is
checked to be computed once, to equal a fresh computation, to notice a changed weight, to stay
bounded and to be safe under many threads.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import torch

from tests.conftest import MODELS, make_model, start_app, wait_until
from tfviz import analysis
from tfviz.core import wo
from tfviz.hf import pretrained
from tfviz.training.checkpoint import file_digest

SVD = torch.linalg.svd  # the real one, for fresh computations while the module's is counted


@pytest.fixture
def counted_svd(monkeypatch) -> list:
    """torch.linalg.svd counting its calls (tfviz.core.wo looks it up on every call)."""
    calls = []
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **k: calls.append(1) or SVD(*a, **k))
    wo.clear_cache()
    return calls


def fresh_truncated(W: torch.Tensor, k: int) -> torch.Tensor:
    """W's best rank-k approximation, computed here from a new SVD, as truncated() used to."""
    U, S, Vh = SVD(W.double(), full_matrices=False)
    return ((U[:, :k] * S[:k]) @ Vh[:k]).to(W.dtype)


def weight(seed: int, D: int = 16) -> torch.Tensor:
    return torch.randn(D, D, generator=torch.Generator().manual_seed(seed))


# ---- tfviz.core.wo: one SVD per weight
# ------------------------------------------------------------


def test_a_weights_svd_is_taken_once_for_every_rank_and_equals_a_fresh_one(counted_svd):
    W = weight(0)
    got = {k: wo.truncated(W, k) for k in (1, 3, 16)}
    again = wo.truncated(W.detach(), 3)  # another tensor object on the same storage
    assert len(counted_svd) == 1
    for k, value in got.items():
        assert torch.equal(value, fresh_truncated(W, k))
    assert torch.equal(again, got[3])


def test_a_forward_pass_in_rank_k_takes_no_svd_after_the_first(counted_svd):
    model = make_model().requires_grad_(False)
    ids = torch.randint(0, 12, (2, 6), generator=torch.Generator().manual_seed(1))
    first = model(ids, None, w_o="rank:2").logits
    n = len(counted_svd)
    assert n == model.config.n_layers  # one per layer's W_o
    for k in (1, 2, 3):
        model(ids, None, w_o=f"rank:{k}", trace=True)
    assert len(counted_svd) == n
    for layer in model.layers:  # what the passes applied: each W_o truncated as a fresh SVD would
        W = layer.attn.W_o.weight
        assert torch.equal(wo.effective(W, layer.attn.W_o.bias, "rank:2")[0], fresh_truncated(W, 2))
    assert torch.equal(model(ids, None, w_o="rank:2").logits, first)


@pytest.mark.parametrize("mode", ["rank:2", wo.BLOCK_DIAGONAL, "identity"])
def test_each_switch_builds_each_layers_map_once_for_the_pass_its_trace_and_its_arrays(
    counted_svd, monkeypatch, mode
):
    from tfviz.core.trace import w_o_used

    built = []
    real = wo.build_map
    monkeypatch.setattr(wo, "build_map", lambda *a: built.append(a[2]) or real(*a))
    # Frozen, as every served model is loaded (checkpoint, MiniLM, folders): a weight that takes
    # a gradient is being trained and is never remembered (the test at the end of this file).
    model = make_model().requires_grad_(False)
    ids = torch.randint(0, 12, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(ids, None, w_o=mode, trace=True)
        model(ids, None, w_o=mode, trace=False)
        model(ids[:1], None, w_o=mode, trace=True)
    used = w_o_used(model, [mode] * model.config.n_layers)
    assert built == [mode] * model.config.n_layers  # once per layer, for everything above
    assert len(counted_svd) == (model.config.n_layers if mode.startswith("rank") else 0)
    for layer, lt in enumerate(out.trace.layers):  # and what was applied is the mode's map
        lin = model.layers[layer].attn.W_o
        want = real(lin.weight.detach(), lin.bias.detach(), mode, model.config.n_heads)[0]
        torch.testing.assert_close(lt.W_o, want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(used[layer], want.numpy(), atol=1e-6)


def test_a_pass_with_gradients_builds_its_map_afresh(counted_svd, monkeypatch):
    """Training through a block-diagonal W_o needs the graph: nothing remembered then."""
    built = []
    real = wo.build_map
    monkeypatch.setattr(wo, "build_map", lambda *a: built.append(a[2]) or real(*a))
    model = make_model()
    ids = torch.randint(0, 12, (2, 6), generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        model(ids, None, w_o=wo.BLOCK_DIAGONAL, trace=False).logits.sum().backward()
    assert len(built) == 2 * model.config.n_layers
    W = model.layers[0].attn.W_o.weight
    mask = wo.block_mask(W.shape[0], model.config.n_heads, W)
    assert W.grad.abs().sum() > 0 and not (W.grad * (1 - mask)).any()


def test_a_weight_changed_in_place_gets_a_new_svd(counted_svd):
    W = weight(1)
    before = wo.truncated(W, 2)
    with torch.no_grad():
        W.mul_(2.0).add_(1.0)  # what an optimiser step does to a weight
    after = wo.truncated(W, 2)
    assert len(counted_svd) == 2
    assert torch.equal(after, fresh_truncated(W, 2))
    assert not torch.allclose(after, before)


def test_a_weight_that_takes_a_gradient_is_never_cached(counted_svd):
    W = torch.nn.Parameter(weight(2))
    wo.truncated(W, 2).sum().backward()
    wo.truncated(W, 2)
    assert len(counted_svd) == 2 and W.grad is not None and W.grad.abs().sum() > 0
    assert wo.cached_entries() == 0


def test_the_svd_cache_is_bounded(counted_svd):
    weights = [weight(seed, 8) for seed in range(3 * wo.CACHE_ENTRIES)]
    for W in weights:
        wo.truncated(W, 1)
    assert wo.cached_entries() == wo.CACHE_ENTRIES
    wo.truncated(weights[-1], 2)  # the newest are kept
    assert len(counted_svd) == len(weights)


def test_many_threads_get_the_same_truncations(counted_svd):
    weights = [weight(seed, 32) for seed in range(4)]
    want = [fresh_truncated(W, 5) for W in weights]
    wrong, start = [], threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for j in range(40):
            W = weights[(i + j) % 4]
            if not torch.equal(wo.truncated(W, 5), want[(i + j) % 4]):
                wrong.append((i, j))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong
    assert len(counted_svd) <= 8 * 4  # at worst each thread's first look at each weight


# ---- the Analysis view: weights-only numbers once per server ---------------------------------


def ov_chart(at) -> dict:
    found = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return found[0]


def open_ov(model: str | None = None):
    at = start_app("Analysis", model=model)
    at.segmented_control(key="analysis_section").set_value("OV circuits").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.usefixtures("fresh_app")
def test_two_sessions_share_one_computation_of_the_weights_numbers(monkeypatch):
    calls = {"ov": [], "mixing": []}
    spectra, mixing = analysis.ov_spectra, analysis.w_o_mixing
    monkeypatch.setattr(
        analysis, "ov_spectra", lambda *a, **k: calls["ov"].append(1) or spectra(*a, **k)
    )
    monkeypatch.setattr(
        analysis, "w_o_mixing", lambda *a, **k: calls["mixing"].append(1) or mixing(*a, **k)
    )
    first, second = open_ov(), open_ov()  # two sessions of one server
    assert ov_chart(first) == ov_chart(second)
    for at in (first, second):
        at.segmented_control(key="analysis_section").set_value("How W_o mixes heads").run()
        assert not at.exception, at.exception
    assert len(calls["ov"]) == 1 and len(calls["mixing"]) == 1
    first.radio(key="w_o_mode").set_value("identity").run()  # another switch: computed anew
    assert not first.exception, first.exception
    assert len(calls["mixing"]) == 2


@pytest.mark.usefixtures("fresh_app")
def test_minilm_ov_numbers_shown_equal_a_fresh_computation():
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    from tfviz.ui import compute
    from tfviz.ui.models import PRETRAINED, load_pretrained

    at = open_ov(f"pretrained:{pretrained.NAME}")
    model = load_pretrained("cpu")[0]
    fresh = analysis.ov_spectra(model)
    shown = ov_chart(at)
    assert len(shown["data"]) == 6 * 12  # one line per head of every layer
    cache = compute.weight_views_cache(PRETRAINED.digest, _model=model)  # the app's, not a new one
    assert cache.known(("learned", "ov"))  # what the page drew: computed by the app, kept
    cached = cache(("learned", "ov"))
    np.testing.assert_array_equal(cached["singular_values"], fresh.singular_values)
    np.testing.assert_array_equal(cached["numerical_rank"], fresh.numerical_rank)
    comp = analysis.composition_scores(model)
    np.testing.assert_array_equal(cached["composition"].v, comp.v)
    # ... and the circuit's own spectrum, the slow way, for a few heads
    attn = model.layers[3].attn
    for h in (0, 7):
        ov = analysis.ov_matrix(attn.W_v.weight, attn.W_o.weight, h, 12)
        s = np.linalg.svd(ov, compute_uv=False)[:32]
        np.testing.assert_allclose(cached["singular_values"][3, h], s, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):  # shared by every session: nobody may write into it
        cached["singular_values"][0, 0, 0] = 1.0
    with pytest.raises(ValueError):
        cached["composition"].q[0, 0, 0] = 1.0


@pytest.mark.usefixtures("fresh_app")
def test_the_weights_numbers_are_computed_ahead_while_another_section_is_read():
    from tfviz.ui import compute

    at = start_app("Analysis")  # opens on norm-based attention: no weights-only section shown
    assert not any(
        "OV" in json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")
    )
    model = at.session_state["model"]
    assert model == "bundled:reverse"
    cache = compute.weight_views_cache(file_digest(MODELS / "reverse.safetensors"), _model=None)
    wait_until(lambda: cache.known(("learned", "ov")) and cache.known(("learned", "mixing")))


def test_a_weight_in_training_is_not_remembered_between_steps_even_without_grad():
    """Fused Adam changes a weight in place without bumping its _version: a map remembered at a
    look under no_grad (the metric between steps) would go stale. It never is remembered."""
    W = torch.nn.Parameter(weight(3))
    b = torch.nn.Parameter(torch.zeros(W.shape[0]))
    opt = torch.optim.Adam([W, b], lr=0.1, fused=True)
    with torch.no_grad():
        before = wo.effective(W, b, wo.BLOCK_DIAGONAL, 2)[0].clone()
    W.sum().backward()
    opt.step()
    with torch.no_grad():
        after = wo.effective(W, b, wo.BLOCK_DIAGONAL, 2)[0]
        want = W * wo.block_mask(W.shape[0], 2, W)
    assert torch.equal(after, want) and not torch.equal(after, before)
