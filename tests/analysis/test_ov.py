"""The OV sandbox (tfviz.analysis.ov), each number checked against the test's own float64 numpy
computation from the model's weights (nn.Linear layout read directly, not through tfviz.core.wo):

- W_OV^h = W_V^j W_O^h, its rank <= d_k, its singular values, the value bias through W_o;
- a change of basis (scale, rotate, random) keeps every output to 1e-5 while W_o moves by a
  sizeable fraction, puts exactly the expected weights in a copy, leaves the given model
  bit-identical, and is not undone once W_o is switched to identity;
- identity (and block-diagonal) W_o's write spaces meet at 90 degrees; learned angles equal
  the test's own principal angles (QR bases) and survive a change of basis;
- Q-, K-, V-composition (tfviz.analysis.circuits.composition_scores, the one implementation)
  equal the test's own formula on full D x D matrices, with and without the layer norms folded,
  learned and identity, grouped-query attention included;
- the linear-undo residuals equal the test's own least squares.

Families: a random toy encoder (post-norm), the bundled reverse model, and tiny random BERT,
GPT-2 and Llama (grouped-query attention: 4 query heads on 2 value heads) folders, built with
bench's builders and every weight jiggled so that a dropped bias shows.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

from tests.conftest import MODELS, make_model
from tfviz import hf, load_checkpoint
from tfviz.analysis.circuits import composition_scores
from tfviz.analysis.ov import (
    BASIS_KINDS,
    change_basis,
    head_ov,
    linear_fit,
    output_difference,
    undo_by_linear_map,
    write_spaces,
)

IN_CI = os.environ.get("CI", "").lower() == "true"
FAMILIES = ("toy", "reverse", "bert", "gpt2", "llama")
TEXTS = ["the cat sat on the mat", "a dog ran over the lazy fox and the cat"]
OUT_TOL = 1e-5


def jiggled(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """A copy with every parameter moved by N(0, 0.1): no bias stays zero, no gamma one."""
    model = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g).to(p.dtype) * 0.1)
    return model.eval()


def hf_family(kind: str, root) -> tuple:
    """(model, ids, pad_mask) of a tiny random folder of this family, as tfviz opens it."""
    if not IN_CI:
        pytest.importorskip("transformers")
    from bench import decoder_folders, encoder_folders

    folder = root / kind
    if kind == "bert":
        encoder_folders.build("bert", folder, dict(layers=2, heads=4, hidden=32, ff=64))
    else:
        sizes = dict(layers=2, heads=4, hidden=32, ff=64, vocab=400, positions=64)
        if kind == "llama":
            sizes.update(kv_heads=2, rope_theta=10_000.0, eps=1e-6)
        decoder_folders.build(kind, folder, sizes)
    loaded = hf.open_folder(folder)
    batch = loaded.tokenizer.batch(TEXTS)
    return jiggled(loaded.model, len(kind)), batch.ids, batch.pad_mask


@pytest.fixture(scope="module")
def families(tmp_path_factory) -> dict:
    g = torch.Generator().manual_seed(2)
    reverse, _ = load_checkpoint(MODELS / "reverse.safetensors")
    out = {
        "toy": (make_model(), torch.randint(0, 12, (4, 9), generator=g), None),
        "reverse": (
            reverse,
            torch.randint(0, reverse.config.vocab_size, (4, 12), generator=g),
            None,
        ),
    }
    root = tmp_path_factory.mktemp("ov")
    for kind in ("bert", "gpt2", "llama"):
        out[kind] = hf_family(kind, root)
    return out


def attention_weights(model, layer: int) -> dict[str, np.ndarray]:
    """The layer's attention weights in nn.Linear layout (out, in), float64 numpy."""
    attn, out = model.layers[layer].attn, {}
    for name in ("W_q", "W_k", "W_v", "W_o"):
        lin = getattr(attn, name)
        out[f"{name}.weight"] = lin.weight.detach().double().numpy()
        # a Llama-style W_q, W_k, W_v has no bias: zero
        none = np.zeros(lin.weight.shape[0])
        out[f"{name}.bias"] = none if lin.bias is None else lin.bias.detach().double().numpy()
    return out


def row_form(model, layer: int, w_o: str = "learned") -> dict[str, list[np.ndarray]]:
    """Per query head, the test's own row-form W_Q, W_K, W_V (D, d_k) and W_O (d_k, D): value and
    key heads shared by group = H / n_kv query heads (head h reads h // group)."""
    cfg, w = model.config, attention_weights(model, layer)
    H, d_k = cfg.n_heads, cfg.d_model // cfg.n_heads
    group = H // (cfg.n_kv_heads or H)
    W_o = {"learned": w["W_o.weight"], "identity": np.eye(cfg.d_model)}[w_o]
    rows = [slice(h * d_k, (h + 1) * d_k) for h in range(H)]
    return {
        "Q": [w["W_q.weight"][rows[h]].T for h in range(H)],
        "K": [w["W_k.weight"][rows[h // group]].T for h in range(H)],
        "V": [w["W_v.weight"][rows[h // group]].T for h in range(H)],
        "bV": [w["W_v.bias"][rows[h // group]] for h in range(H)],
        "O": [W_o[:, rows[h]].T for h in range(H)],
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_the_ov_circuit_is_w_v_times_w_o_of_rank_at_most_d_k(families, family):
    model = families[family][0]
    cfg = model.config
    d_k = cfg.d_model // cfg.n_heads
    for layer in range(cfg.n_layers):
        mine = row_form(model, layer)
        for h in range(cfg.n_heads):
            got = head_ov(model, layer, h)
            ov = mine["V"][h] @ mine["O"][h]
            np.testing.assert_allclose(got.ov, ov, rtol=0, atol=1e-12)
            assert np.linalg.matrix_rank(ov) <= d_k and got.rank <= d_k
            s = np.linalg.svd(ov, compute_uv=False)
            np.testing.assert_allclose(got.singular_values, s[:d_k], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(got.bias_out, mine["bV"][h] @ mine["O"][h], atol=1e-12)
            assert h in got.sharing and got.kv_head == h * (cfg.n_kv_heads or cfg.n_heads) // (
                cfg.n_heads
            )
    if family == "llama":  # 4 query heads on 2 value heads
        assert head_ov(model, 0, 3).sharing == (2, 3) and head_ov(model, 0, 1).kv_head == 0


def expected_change(model, layer: int, head: int, A: np.ndarray) -> dict[str, np.ndarray]:
    """The test's own W_v weight and bias and W_o weight after the change of basis (nn.Linear
    layout): value head j's rows A^T W, its bias A^T b, every reading head's columns W A^-T."""
    cfg, w = model.config, attention_weights(model, layer)
    H, d_k = cfg.n_heads, cfg.d_model // cfg.n_heads
    group = H // (cfg.n_kv_heads or H)
    j = head // group
    rows = slice(j * d_k, (j + 1) * d_k)
    W_v, b_v, W_o = w["W_v.weight"].copy(), w["W_v.bias"].copy(), w["W_o.weight"].copy()
    W_v[rows], b_v[rows] = A.T @ W_v[rows], A.T @ b_v[rows]
    for h in range(j * group, (j + 1) * group):
        cols = slice(h * d_k, (h + 1) * d_k)
        W_o[:, cols] = W_o[:, cols] @ np.linalg.inv(A).T
    return {"W_v.weight": W_v, "W_v.bias": b_v, "W_o.weight": W_o}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", BASIS_KINDS)
def test_a_change_of_basis_keeps_the_outputs_and_moves_w_o(families, family, kind):
    model, ids, pad_mask = families[family]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    layer, head = model.config.n_layers - 1, 1
    change = change_basis(model, layer, head, kind, seed=5)
    diff = output_difference(model, change.model, ids, pad_mask)
    assert diff < OUT_TOL, f"{family} {kind}: outputs moved by {diff:.2e}"
    assert change.w_o_relative > 0.1 and change.w_o_change > 0.01 and change.w_v_change > 0.01
    # the weights put in the copy are the test's own A^T W_v, A^T b_v, W_o A^-T (float32)
    mine, theirs = (
        expected_change(model, layer, head, change.A),
        attention_weights(change.model, layer),
    )
    if model.layers[layer].attn.W_v.bias is None:
        del mine["W_v.bias"]
    for name, want in mine.items():
        np.testing.assert_allclose(theirs[name], want, rtol=0, atol=1e-5)
    np.testing.assert_allclose(
        np.abs(mine["W_o.weight"] - attention_weights(model, layer)["W_o.weight"]).max(),
        change.w_o_change,
        atol=1e-5,
    )
    # every other weight of the copy, and every weight of the given model, are unchanged
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    changed = {f"layers.{layer}.attn.{name}" for name in mine}
    new = change.model.state_dict()
    assert all(torch.equal(before[k], new[k]) for k in before if k not in changed)
    # with W_o switched off nothing undoes A: the outputs move
    assert output_difference(model, change.model, ids, pad_mask, w_o="identity") > 100 * OUT_TOL


def test_a_change_of_basis_refuses_a_singular_matrix(families):
    model = families["toy"][0]
    with pytest.raises(ValueError, match="invertible"):
        change_basis(model, 0, 0, A=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="scale"):
        change_basis(model, 0, 0, kind="shear")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["identity", "block_diagonal"])
def test_heads_write_at_right_angles_without_mixing(families, family, mode):
    spaces = write_spaces(families[family][0], mode)
    H = families[family][0].config.n_heads
    off = ~np.eye(H, dtype=bool)
    assert np.abs(spaces.angles[:, off] - 90.0).max() < 1e-6
    assert (spaces.rank == families[family][0].config.d_k).all()


def own_angles(O_h: np.ndarray, O_g: np.ndarray) -> np.ndarray:
    """Principal angles (degrees, smallest first) between the row spaces of two (d_k, D)
    blocks, from QR bases (write_spaces takes SVD ones)."""
    U, V = np.linalg.qr(O_h.T)[0], np.linalg.qr(O_g.T)[0]
    cos = np.linalg.svd(U.T @ V, compute_uv=False)
    return np.degrees(np.arccos(np.clip(cos, 0, 1)))


@pytest.mark.parametrize("family", FAMILIES)
def test_learned_write_space_angles_are_the_tests_own_and_survive_a_basis_change(families, family):
    model = families[family][0]
    spaces = write_spaces(model)
    for layer in range(model.config.n_layers):
        O = row_form(model, layer)["O"]
        for h in range(len(O)):
            for g in range(len(O)):
                want = own_angles(O[h], O[g])
                np.testing.assert_allclose(spaces.angles[layer, h, g], want, atol=1e-5)
    changed = write_spaces(change_basis(model, 0, 1, "random", seed=1).model)
    np.testing.assert_allclose(changed.angles, spaces.angles, atol=1e-2)


def own_fold(model, layer: int, fold: bool) -> np.ndarray:
    """The test's own (D, D) linear part of the norms between layer's attention output and the
    next layer's reader: P diag(gamma) per norm (P the centring; RMSNorm: no P), post-norm this
    layer's norm1 then norm2, pre-norm the next layer's norm1; the identity when not folded."""
    D = model.config.d_model
    if not fold:
        return np.eye(D)
    P = np.eye(D) - 1.0 / D if model.config.norm_type == "layer" else np.eye(D)
    if model.config.norm == "post":
        norms = (model.layers[layer].norm1, model.layers[layer].norm2)
    else:
        norms = (model.layers[layer + 1].norm1,)
    N = np.eye(D)
    for norm in norms:
        N = N @ P @ np.diag(norm.weight.detach().double().numpy())
    return N


def own_composition(model, w_o: str, fold: bool) -> dict[str, np.ndarray]:
    """Elhage et al.'s scores of each head into each head of the next layer on full D x D
    matrices: ||W_OV^h N W_X^g||_F / (||W_OV^h||_F ||N W_X^g||_F), X in {Q, K, V}, (L-1, H, H)."""
    L, H = model.config.n_layers, model.config.n_heads
    f = [row_form(model, layer, w_o) for layer in range(L)]
    out = {x: np.zeros((L - 1, H, H)) for x in "qkv"}
    for l in range(L - 1):
        N = own_fold(model, l, fold)
        for h in range(H):
            ov = f[l]["V"][h] @ f[l]["O"][h]
            for g in range(H):
                for x in "qkv":
                    reader = N @ f[l + 1][x.upper()][g]
                    num = np.linalg.norm(ov @ reader)
                    out[x][l, h, g] = num / (np.linalg.norm(ov) * np.linalg.norm(reader))
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["learned", "identity"])
@pytest.mark.parametrize("fold", [False, True])
def test_composition_scores_are_the_papers_formula(families, family, mode, fold):
    model = families[family][0]
    got = composition_scores(model, mode, fold_layernorm=fold)
    want = own_composition(model, mode, fold)
    for x in "qkv":
        # circuits returns float32: its scores in [0, 1] agree to float32 rounding
        np.testing.assert_allclose(getattr(got, x), want[x], rtol=0, atol=1e-6)
    assert got.q.shape == (model.config.n_layers - 1,) + (model.config.n_heads,) * 2


def real_sites(model, ids, pad_mask, layer, w_o) -> dict[str, np.ndarray]:
    with torch.no_grad():
        lt = model(ids, pad_mask, w_o=w_o).trace.layers[layer]
    keep = torch.ones(ids.shape, dtype=torch.bool) if pad_mask is None else ~pad_mask
    return {s: getattr(lt, s)[keep].double().numpy() for s in ("attn_out", "resid_mid")}


def own_residual(X: np.ndarray, Y: np.ndarray) -> float:
    """Relative residual of the least-squares affine fit, by the pseudo-inverse."""
    X1 = np.hstack([X, np.ones((len(X), 1))])
    R = Y - X1 @ (np.linalg.pinv(X1) @ Y)
    return float(np.linalg.norm(R) / np.linalg.norm(Y - Y.mean(0)))


@pytest.mark.parametrize("family", ["toy", "gpt2"])
def test_a_linear_map_undoes_w_o_read_alone_not_in_the_stream(families, family):
    model = families[family][0]
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, model.config.vocab_size, (12, 10), generator=g)  # 120 > D + 1 points
    other = jiggled(model, 9)
    undo = undo_by_linear_map(model, ids, 0, other=other)
    learned = real_sites(model, ids, None, 0, "learned")
    switched = real_sites(model, ids, None, 0, {0: "identity"})
    assert undo.n_points == 120 > model.config.d_model + 1
    assert undo.attn_out < 1e-5  # W_o is itself an affine map of concat
    np.testing.assert_allclose(
        undo.resid_mid, own_residual(switched["resid_mid"], learned["resid_mid"]), rtol=1e-6
    )
    assert undo.resid_mid > 1e-3
    theirs = real_sites(other, ids, None, 0, "learned")
    np.testing.assert_allclose(
        undo.trained, own_residual(theirs["attn_out"], learned["attn_out"]), rtol=1e-6
    )
    M, r = linear_fit(learned["attn_out"], learned["attn_out"])
    assert r < 1e-10 and M.shape == (model.config.d_model + 1, model.config.d_model)
