"""The OV sandbox: what W_o's freedom is, measured on a model's own weights.

Per head h, W_v and W_o only ever act as the product W_OV^h = W_V^h W_O^h (D x D, rank <= d_k):
head h writes sum_j alpha_ij x_j W_V^h W_O^h (+ its value bias through W_o, below). So any
invertible d_k x d_k change of basis A inside the head's value space,

    W_V^h <- W_V^h A,   b_V^h <- b_V^h A,   W_O^h <- A^-1 W_O^h,

leaves W_OV^h, the bias term and every output unchanged while the numbers of W_o (its heatmap)
change. What a fixed W_o (identity) takes away is therefore not what a head can write but WHERE it
writes: the row space of W_O^h in D, which A leaves unchanged. With identity W_o head h writes
into coordinates h*d_k..(h+1)*d_k, the same disjoint blocks for every model; learned, the model
chooses the subspaces (write_spaces measures the angles between them).

Conventions (as tfviz.core.wo): concat = [z_0 | ... | z_{H-1}] (B, T, D) is the heads side by
side before W_o, attn_out = concat W_o + b_o in row-vector form, so W_O^h (d_k, D) is the block of
rows h*d_k.. of that W_o. The model stores nn.Linear weights (out, in): the row-form W_o is
`attn.W_o.weight.T`, so W_O^h = weight[:, h*d_k:(h+1)*d_k].T, and W_V^j = W_v.weight[j*d_k:..].T
(D, d_k), b_V^j = W_v.bias[j*d_k:..] (a row vector).

Grouped-query attention (GQA: Llama, Qwen2): n_kv value heads, each read by group = H / n_kv
consecutive query heads (query head h reads value head h // group, as the forward's
repeat_interleave does). The OV circuit of query head h is W_V^{h // group} W_O^h; a change of
basis in value head j is matched by A^-1 in the W_O block of every query head that reads it.

Value bias: a query's attention weights sum to 1, so head h's output is (sum_j alpha_ij x_j) W_V^h
+ b_V^h, and it writes b_V^h W_O^h, the same D-vector at every token (except a query with every
key padded, which writes nothing). HeadOV.bias_out reports it; the change of basis keeps it.

Everything here reads the model and never changes it (models are shared by every session):
change_basis returns a new model, a deep copy. Arrays are float64 numpy unless said.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import _w_o_of
from tfviz.analysis.circuits import head_block, numerical_rank, ov_matrix, singular_values
from tfviz.core import wo
from tfviz.core.model import Transformer, layer_modes

BASIS_KINDS = ("scale", "rotate", "random")
RANK_RTOL = 1e-5  # a singular value below this fraction of the largest counts as zero


def _f64(t: Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def value_head_of(model: Transformer, head: int) -> int:
    """The value (key/value) head that query head `head` reads: head // (H / n_kv)."""
    cfg = model.config
    _check_head(model, 0, head)
    return head // (cfg.n_heads // cfg.kv_heads)


def heads_reading(model: Transformer, kv_head: int) -> tuple[int, ...]:
    """The query heads that read value head kv_head (one head without GQA: itself)."""
    cfg = model.config
    group = cfg.n_heads // cfg.kv_heads
    if not 0 <= kv_head < cfg.kv_heads:
        raise ValueError(f"value head {kv_head} is not in 0..{cfg.kv_heads - 1}")
    return tuple(range(kv_head * group, (kv_head + 1) * group))


def _check_head(model: Transformer, layer: int, head: int) -> None:
    cfg = model.config
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer {layer} is not in 0..{cfg.n_layers - 1}")
    if not 0 <= head < cfg.n_heads:
        raise ValueError(f"head {head} is not in 0..{cfg.n_heads - 1}")


def value_block(model: Transformer, layer: int, kv_head: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_V^j (D, d_k), b_V^j (d_k,)) of value head j, row-vector form, float64."""
    cfg = model.config
    lin = model.layers[layer].attn.W_v
    rows = slice(kv_head * cfg.d_k, (kv_head + 1) * cfg.d_k)
    # A Llama-style W_v has no bias (its module's bias is None): a zero one adds nothing.
    b = np.zeros(cfg.d_k) if lin.bias is None else _f64(lin.bias[rows])
    return head_block(lin.weight, kv_head, cfg.kv_heads, "in"), b


def output_block(model: Transformer, layer: int, head: int, w_o: str = "learned") -> np.ndarray:
    """W_O^h (d_k, D) of query head h, float64, from the map the layer applies in mode w_o."""
    W = _w_o_of(model, layer, w_o)  # (D, D) nn.Linear layout (out, in)
    return head_block(W, head, model.config.n_heads, "out")


@dataclass(frozen=True)
class HeadOV:
    """One query head's OV circuit, row-vector form: x W_V^j W_O^h is what it writes for a
    token x it attends to with weight 1."""

    layer: int
    head: int  # the query head
    kv_head: int  # the value head it reads (= head without GQA)
    sharing: tuple[int, ...]  # every query head that reads kv_head (this one included)
    ov: np.ndarray  # (D, D) W_V^{kv_head} W_O^h
    singular_values: np.ndarray  # (d_k,) of ov, largest first (the other D - d_k are 0)
    rank: int  # singular values above RANK_RTOL times the largest: <= d_k
    bias_out: np.ndarray  # (D,) b_V^{kv_head} W_O^h: written at every token, whatever it reads
    w_o: str  # the W_o mode W_O^h was taken from


def head_ov(model: Transformer, layer: int, head: int, w_o: str = "learned") -> HeadOV:
    """Query head `head`'s OV circuit in `layer`, with W_o in mode w_o (tfviz.core.wo)."""
    _check_head(model, layer, head)
    wo.check_mode(w_o)
    cfg = model.config
    kv = value_head_of(model, head)
    _, b_V = value_block(model, layer, kv)
    W_O = output_block(model, layer, head, w_o)
    W_v = model.layers[layer].attn.W_v.weight
    ov = ov_matrix(W_v, _w_o_of(model, layer, w_o), head, cfg.n_heads, cfg.kv_heads)
    s = singular_values(ov)[: cfg.d_k]
    rank = numerical_rank(s, RANK_RTOL)
    return HeadOV(
        layer=layer,
        head=head,
        kv_head=kv,
        sharing=heads_reading(model, kv),
        ov=ov,
        singular_values=s,
        rank=rank,
        bias_out=b_V @ W_O,
        w_o=w_o,
    )


# -- a change of basis inside one head's value space ------------------------------------------


def basis_matrix(kind: str, d_k: int, seed: int = 0) -> np.ndarray:
    """A (d_k, d_k) invertible float64 matrix, seeded.

    scale: diagonal, entries 2^u with u uniform in [-2, 2] (factors from 1/4 to 4);
    rotate: orthogonal (the Q of a Gaussian matrix's QR, signs fixed: Haar-distributed);
    random: U diag(s) V^T with U, V random orthogonal and s = 2^u, u in [-1, 1], so that it is
    invertible with condition number at most 4 (well away from singular: float32 weights stay
    exact to a few ulps).
    """
    if kind not in BASIS_KINDS:
        raise ValueError(f"a change of basis is one of {BASIS_KINDS}, not {kind!r}")
    rng = np.random.default_rng(seed)
    if kind == "scale":
        return np.diag(2.0 ** rng.uniform(-2, 2, d_k))

    def orthogonal() -> np.ndarray:
        Q, R = np.linalg.qr(rng.standard_normal((d_k, d_k)))
        return Q * np.sign(np.diag(R))

    if kind == "rotate":
        return orthogonal()
    return (orthogonal() * 2.0 ** rng.uniform(-1, 1, d_k)) @ orthogonal().T


@dataclass(frozen=True)
class BasisChange:
    """A model with one value head's basis changed, and by how much its weights moved."""

    model: Transformer  # the new model (a deep copy); the given one is untouched
    layer: int
    kv_head: int  # the value head whose W_V^j, b_V^j became W_V^j A, b_V^j A
    heads: tuple[int, ...]  # the query heads whose W_O^h became A^-1 W_O^h (all that read kv_head)
    kind: str  # scale, rotate, random, or "given" for a caller's matrix
    A: np.ndarray  # (d_k, d_k) float64
    condition: float  # A's condition number (largest / smallest singular value)
    w_v_change: float  # max |W_v' - W_v| over the layer's value weight and bias
    w_o_change: float  # max |W_o' - W_o| over the layer's output weight
    w_o_relative: float  # ||W_o' - W_o||_F / ||W_o||_F
    ov_change: float  # max over the changed heads of max |W_OV'^h - W_OV^h| (float rounding)


def change_basis(
    model: Transformer,
    layer: int,
    head: int,
    kind: str = "random",
    seed: int = 0,
    A: np.ndarray | None = None,
) -> BasisChange:
    """A copy of model with a change of basis A inside the value space that query head `head`
    reads in `layer`: W_V^j <- W_V^j A, b_V^j <- b_V^j A (j = value_head_of(head)), and
    W_O^h <- A^-1 W_O^h for every query head h that reads j (GQA: all of heads_reading(j)), so
    every W_OV^h and b_V^j W_O^h, hence every output, stays the same up to float rounding.

    In nn.Linear layout: W_v.weight[rows j] <- A^T W_v.weight[rows j], W_v.bias[rows j] <-
    A^T W_v.bias[rows j], W_o.weight[:, cols h] <- W_o.weight[:, cols h] A^-T. The product is
    formed in float64 and stored in the model's dtype. A: the caller's own (d_k, d_k) matrix in
    place of kind and seed.
    """
    _check_head(model, layer, head)
    d_k = model.config.d_k
    given = A is not None
    A = np.asarray(A, dtype=np.float64) if given else basis_matrix(kind, d_k, seed)
    s = np.linalg.svd(A, compute_uv=False) if A.shape == (d_k, d_k) else np.zeros(1)
    if A.shape != (d_k, d_k) or s[-1] <= 1e-12 * s[0]:
        raise ValueError(f"A must be an invertible {d_k} x {d_k} matrix")
    kv = value_head_of(model, head)
    heads = heads_reading(model, kv)
    new = copy.deepcopy(model)
    attn, new_attn = model.layers[layer].attn, new.layers[layer].attn
    rows = slice(kv * d_k, (kv + 1) * d_k)
    A_inv_T = np.linalg.inv(A).T
    with torch.no_grad():
        for name in ("weight", "bias"):
            t = getattr(new_attn.W_v, name)
            if t is not None:  # a Llama-style W_v has no bias
                t[rows] = _as(A.T @ _f64(getattr(attn.W_v, name)[rows]), t)
        W = new_attn.W_o.weight
        for h in heads:
            cols = slice(h * d_k, (h + 1) * d_k)
            W[:, cols] = _as(_f64(attn.W_o.weight[:, cols]) @ A_inv_T, W)
    before = [head_ov(model, layer, h).ov for h in heads]
    after = [head_ov(new, layer, h).ov for h in heads]
    W_o0, W_o1 = _f64(attn.W_o.weight), _f64(new_attn.W_o.weight)
    return BasisChange(
        model=new,
        layer=layer,
        kv_head=kv,
        heads=heads,
        kind="given" if given else kind,
        A=A,
        condition=float(s[0] / s[-1]),
        w_v_change=max(
            float(np.abs(_f64(t1) - _f64(t0)).max())
            for t0, t1 in zip(attn.W_v.parameters(), new_attn.W_v.parameters(), strict=True)
        ),
        w_o_change=float(np.abs(W_o1 - W_o0).max()),
        w_o_relative=float(np.linalg.norm(W_o1 - W_o0) / max(np.linalg.norm(W_o0), 1e-300)),
        ov_change=max(float(np.abs(b - a).max()) for a, b in zip(before, after, strict=True)),
    )


def _as(x: np.ndarray, like: Tensor) -> Tensor:
    return torch.from_numpy(x).to(like.device, like.dtype)


def output_difference(
    original: Transformer,
    changed: Transformer,
    ids: Tensor,
    pad_mask: Tensor | None = None,
    w_o: str | dict = "learned",
    token_types: Tensor | None = None,
) -> float:
    """max |output(original) - output(changed)| on the same input, both under the w_o switch.

    The output is what Transformer.forward returns as logits: the head's logits, or the final
    hidden states for a model with no head. Padded positions (per-token outputs) are left out.
    Learned, a change of basis leaves it at float rounding; with W_o switched to identity the
    change of basis is no longer undone, and the difference is the change itself.
    """
    with torch.no_grad():
        outs = [
            m(ids, pad_mask, trace=False, token_types=token_types, w_o=w_o).logits.double()
            for m in (original, changed)
        ]
    diff = (outs[0] - outs[1]).abs()
    if pad_mask is not None and diff.dim() == 3 and diff.shape[:2] == pad_mask.shape:
        diff = diff[~pad_mask]
    return float(diff.max()) if diff.numel() else 0.0


# -- where each head writes --------------------------------------------------------------------


def _row_basis(M: np.ndarray) -> np.ndarray:
    """(D, r) orthonormal basis of M's row space (M (k, D)), r its numerical rank."""
    _, s, Vh = np.linalg.svd(M, full_matrices=False)
    return Vh[: numerical_rank(s, RANK_RTOL)].T


def principal_angles(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Principal angles in degrees, smallest first, between the spans of U (D, p) and V (D, q),
    both with orthonormal columns: arccos of the singular values of U^T V (min(p, q) of them)."""
    if U.shape[1] == 0 or V.shape[1] == 0:
        return np.zeros(0)
    cos = np.linalg.svd(U.T @ V, compute_uv=False)
    return np.degrees(np.arccos(np.clip(cos, 0.0, 1.0)))


@dataclass(frozen=True)
class WriteSpaces:
    """The subspaces of D the heads write into (row spaces of W_O^h), compared pairwise."""

    angles: np.ndarray  # (L, H, H, d_k) principal angles in degrees, smallest first; NaN
    # past min(rank_h, rank_g) (a head of lower rank writes into fewer directions)
    smallest: np.ndarray  # (L, H, H) the smallest angle of each pair: how close they come
    rank: np.ndarray  # (L, H) int: the dimension of each head's write space (<= d_k)
    modes: tuple[str, ...]  # the W_o mode of each layer


def write_spaces(model: Transformer, w_o: str | dict = "learned") -> WriteSpaces:
    """Principal angles between every pair of heads' write spaces, layer by layer, for the w_o
    switch: identity gives 90 degrees for every pair (disjoint coordinate blocks), as does
    block_diagonal; learned gives what the model chose; zero has no write space (rank 0, NaN).
    A change of basis (change_basis) leaves every angle as it is: rowspace(A^-1 W_O) =
    rowspace(W_O)."""
    cfg = model.config
    L, H, d_k = cfg.n_layers, cfg.n_heads, cfg.d_k
    modes = tuple(layer_modes(w_o, L))
    angles = np.full((L, H, H, d_k), np.nan)
    rank = np.zeros((L, H), dtype=np.int64)
    for layer, mode in enumerate(modes):
        bases = [_row_basis(output_block(model, layer, h, mode)) for h in range(H)]
        rank[layer] = [b.shape[1] for b in bases]
        for h in range(H):
            for g in range(H):
                a = principal_angles(bases[h], bases[g])
                angles[layer, h, g, : a.size] = a
    with np.errstate(all="ignore"):
        smallest = np.where(rank[:, :, None] * rank[:, None, :] > 0, angles[..., 0], np.nan)
    return WriteSpaces(angles=angles, smallest=smallest, rank=rank, modes=modes)


# -- how much a linear map downstream can undo ------------------------------------------------


def linear_fit(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, float]:
    """The least-squares affine map from rows of X (N, p) to rows of Y (N, q): ([M; c] (p+1, q),
    relative residual ||Y - X M - c||_F / ||Y - mean(Y)||_F). 0: Y is an affine image of X;
    1: X explains none of Y's variation. With N <= p + 1 points any Y fits: read n_points."""
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    X1 = np.hstack([X, np.ones((X.shape[0], 1))])
    M, *_ = np.linalg.lstsq(X1, Y, rcond=None)
    spread = np.linalg.norm(Y - Y.mean(axis=0))
    return M, float(np.linalg.norm(Y - X1 @ M) / spread) if spread > 0 else 0.0


@dataclass(frozen=True)
class LinearUndo:
    """How well one affine map undoes switching one layer's W_o to identity (relative residuals
    of least-squares fits over the input's real tokens; see undo_by_linear_map)."""

    layer: int
    n_points: int  # real tokens fitted; a fit with n_points <= D + 1 is exact whatever the data
    d_model: int
    attn_out: float  # learned attn_out from the switched pass's attn_out (= concat)
    resid_mid: float  # learned stream after attention's add from the switched stream there
    resid_out: float  # learned layer output (the next layer's input) from the switched one
    trained: float | None  # learned attn_out from `other`'s attn_out (a model trained with
    # identity W_o), or None without it


def _sites(model: Transformer, ids: Tensor, pad_mask, layer: int, w_o) -> dict[str, np.ndarray]:
    with torch.no_grad():
        lt = model(ids, pad_mask, w_o=w_o).trace.layers[layer]
    keep = torch.ones(ids.shape, dtype=torch.bool) if pad_mask is None else ~pad_mask.cpu()
    return {s: _f64(getattr(lt, s).cpu()[keep]) for s in ("attn_out", "resid_mid", "resid_out")}


def undo_by_linear_map(
    model: Transformer,
    ids: Tensor,
    layer: int,
    pad_mask: Tensor | None = None,
    other: Transformer | None = None,
) -> LinearUndo:
    """Switch W_o of `layer` alone to identity (the layers before run as learned, so the layer's
    concat is the learned pass's), and fit each learned site from the switched one by one
    affine map, on the real tokens of ids:

    attn_out: learned concat W_o + b_o from concat: W_o is itself such a map, so the residual is
    float rounding: read alone, what W_o does is undone by any linear reader.
    resid_mid, resid_out: the stream after the sublayer, where attn_out is added to the layer's
    input x. One map of x + concat must turn it into x + concat W_o + b_o, applying W_o to one
    summand and not the other: only where their spans separate can it. The residual measures
    what it cannot.
    trained: with `other` (the same architecture trained with identity W_o, same ids), the
    learned model's attn_out from other's: two models' representations, a number, not an
    identity.
    """
    if not 0 <= layer < model.config.n_layers:
        raise ValueError(f"layer {layer} is not in 0..{model.config.n_layers - 1}")
    learned = _sites(model, ids, pad_mask, layer, "learned")
    switched = _sites(model, ids, pad_mask, layer, {layer: "identity"})
    fits = {s: linear_fit(switched[s], learned[s])[1] for s in learned}
    trained = None
    if other is not None:
        theirs = _sites(other, ids, pad_mask, layer, "learned")
        trained = linear_fit(theirs["attn_out"], learned["attn_out"])[1]
    return LinearUndo(
        layer=layer,
        n_points=int(learned["attn_out"].shape[0]),
        d_model=model.config.d_model,
        trained=trained,
        **fits,
    )
