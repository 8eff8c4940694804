"""5. OV circuits W_V^h W_O^h and their spectra (effective rank: Roy & Vetterli 2007), and Q-, K-
and V-composition between heads of consecutive layers (Elhage et al. 2021), from the weights alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tfviz.analysis.base import _np, _w_o_of
from tfviz.core import wo
from tfviz.core.model import Transformer, layer_modes


def head_block(W: Tensor | np.ndarray, head: int, n_heads: int, side: str) -> np.ndarray:
    """Head h's part of a D x D nn.Linear weight (out, in), in row-vector convention.

    side="in": for W_q/W_k/W_v, whose *outputs* h*d_k..(h+1)*d_k belong to head h: returns
    W[rows].T, shape (D, d_k), so x @ result is head h's query/key/value.
    side="out": for W_o, whose *inputs* from head h are columns h*d_k..: returns W[:, cols].T,
    shape (d_k, D), so z_h @ result is head h's term of attn_out.
    """
    W = np.asarray(_np(W), dtype=np.float64)
    if side == "in":
        d_k = W.shape[0] // n_heads
        return W[head * d_k : (head + 1) * d_k, :].T
    if side == "out":
        return wo.head_block(W, head, n_heads)
    raise ValueError(f"side must be 'in' or 'out', got {side!r}")


def ov_matrix(
    W_v: Tensor | np.ndarray,
    W_o: Tensor | np.ndarray,
    head: int,
    n_heads: int,
    kv_heads: int | None = None,
):
    """W_OV^h = W_V^j W_O^h, (D, D) float64, from nn.Linear weights of W_v and W_o.

    x @ W_OV^h is what head h writes (bias aside) for a token x it attends to with weight 1.
    kv_heads: grouped-query attention's value heads (W_v has kv_heads * d_k rows); query head h
    reads value head j = h // (n_heads / kv_heads). None: one value head per query head (j = h).
    """
    kv = kv_heads or n_heads
    W_V = head_block(W_v, head // (n_heads // kv), kv, "in")
    return W_V @ head_block(W_o, head, n_heads, "out")


def singular_values(M: np.ndarray) -> np.ndarray:
    """Singular values of a matrix, largest first (float64 for the rank tests)."""
    return np.linalg.svd(np.asarray(M, dtype=np.float64), compute_uv=False)


def effective_rank(s: np.ndarray) -> float:
    """Entropy effective rank (Roy & Vetterli, 'The effective rank: a measure of effective
    dimensionality', EUSIPCO 2007): exp(-sum p_i log p_i) with p = s / sum(s).

    1 for a rank-1 matrix, r for r equal singular values; 0 for the zero matrix.
    """
    s = np.abs(np.asarray(s, dtype=np.float64))
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def numerical_rank(s: np.ndarray, rtol: float = 0.01) -> int:
    """How many singular values exceed rtol times the largest (default: 1% of it)."""
    s = np.abs(np.asarray(s, dtype=np.float64))
    if s.size == 0 or s.max() <= 0:
        return 0
    return int((s > rtol * s.max()).sum())


@dataclass(frozen=True)
class OVSpectra:
    """What the spectrum of every head's OV circuit says, without the (D, D) circuits."""

    singular_values: np.ndarray  # (L, H, d_k) the top d_k (the rest are 0: rank <= d_k)
    effective_rank: np.ndarray  # (L, H) Roy & Vetterli entropy effective rank, 0..d_k
    numerical_rank: np.ndarray  # (L, H) int: singular values above rtol * the largest
    frobenius: np.ndarray  # (L, H) ||W_OV^h||_F: how strongly the head can write
    rtol: float


@dataclass(frozen=True)
class OVCircuits(OVSpectra):
    """The OV circuit of every head and what its spectrum says."""

    ov: np.ndarray  # (L, H, D, D) W_V^h W_O^h, row-vector convention


# The weights-only numbers below (OV spectra, composition) are computed in torch, float64, on
# the CPU: the app limits torch to one thread per kernel (tfviz.serve.jobs.limit_torch_threads),
# while numpy's OpenBLAS starts a thread per core for every small product and QR; on a loaded 2-core
# server those threads wait on each other, and the same numbers took several times as long.
def _f64(W: Tensor) -> Tensor:
    return W.detach().to("cpu", torch.float64)


def _ov_factors(model: Transformer, w_o="learned") -> list[tuple[Tensor, Tensor]]:
    """Per layer (V, O): V (H, D, d_k) every head's W_V^h and O (H, d_k, D) its W_O^h in the
    layer's W_o mode, float64 CPU tensors, so that W_OV^h = V[h] @ O[h]."""
    cfg = model.config
    modes = layer_modes(w_o, cfg.n_layers)
    H, D, d_k = cfg.n_heads, cfg.d_model, cfg.d_k
    factors = []
    for layer in range(cfg.n_layers):
        attn = model.layers[layer].attn
        W_v = _f64(attn.per_head(attn.W_v.weight))  # (D, D): head h's rows h*d_k..
        V = W_v.reshape(H, d_k, D).transpose(1, 2)  # (H, D, d_k): each head's rows, .T
        O = wo.head_blocks(_f64(_w_o_of(model, layer, modes[layer])), H)  # (H, d_k, D)
        factors.append((V, O.contiguous()))
    return factors


def _reduced(V: Tensor, O: Tensor) -> Tensor:
    """(H, d_k, D) A[h] = R[h] @ O[h], where V[h] = Q[h] R[h] (reduced QR, Q with orthonormal
    columns), so that ||V[h] @ O[h] @ M||_F = ||A[h] @ M||_F for every M, and the nonzero
    singular values of W_OV^h = V[h] O[h] are those of A[h].

    Why: W_OV^h is D x D (384 x 384 for MiniLM) but of rank <= d_k; its SVD per head cost
    seconds for 72 heads (a minute on a loaded 2-core server), while A[h] is d_k x D. Exact in
    algebra; the float64 results agree with the full SVD to ~1e-13 relative.
    """
    R = torch.linalg.qr(V, mode="r").R  # (H, d_k, d_k)
    return R @ O


def ov_spectra(model: Transformer, w_o="learned", rtol: float = 0.01) -> OVSpectra:
    """The singular values, ranks and norms of every head's OV circuit, for the w_o switch,
    without forming the (L, H, D, D) circuits (see _reduced).

    Args:
        model: any Transformer (read, never changed).
        w_o: "learned", "identity", "zero" or {layer: mode}, as Transformer.forward.
        rtol: threshold of numerical_rank, relative to the largest singular value.
    Returns:
        OVSpectra with arrays of shapes (L, H, d_k) and (L, H), float32 (ranks int64).
    """
    cfg = model.config
    L, H, d_k = cfg.n_layers, cfg.n_heads, cfg.d_k
    with torch.no_grad():
        reduced = [_reduced(V, O) for V, O in _ov_factors(model, w_o)]  # L x (H, d_k, D)
        sv = torch.stack([torch.linalg.svdvals(A)[:, :d_k] for A in reduced]).numpy()
        fro = torch.stack([torch.linalg.matrix_norm(A) for A in reduced]).numpy()  # (L, H)
    eff = np.array([[effective_rank(s) for s in row] for row in sv]).reshape(L, H)
    num = np.array([[numerical_rank(s, rtol) for s in row] for row in sv], dtype=np.int64)
    return OVSpectra(
        singular_values=sv.astype(np.float32),
        effective_rank=eff.astype(np.float32),
        numerical_rank=num.reshape(L, H),
        frobenius=fro.astype(np.float32),
        rtol=rtol,
    )


def ov_circuits(model: Transformer, w_o="learned", rtol: float = 0.01) -> OVCircuits:
    """OV circuits of every head, with the W_o each layer applies for the w_o switch.

    Args:
        model: any Transformer.
        w_o: "learned", "identity", "zero" or {layer: mode}, as Transformer.forward.
        rtol: threshold of numerical_rank, relative to the largest singular value.
    Returns:
        OVCircuits: ov_spectra's arrays and the circuits themselves, (L, H, D, D) float32
        (for MiniLM 42 MB: the views ask ov_spectra, which does not form them).
    """
    spectra = ov_spectra(model, w_o, rtol)
    with torch.no_grad():
        ov = torch.stack([V @ O for V, O in _ov_factors(model, w_o)])  # (L, H, D, D)
    return OVCircuits(**vars(spectra), ov=ov.numpy().astype(np.float32))


def composition_score(writer: np.ndarray, reader: np.ndarray) -> float:
    """||writer @ reader||_F / (||writer||_F ||reader||_F), in [0, 1]; 0 if either is zero.

    writer: (D, D) a head's OV circuit (row-vector convention); reader: (D, k) the matrix a later
    head reads the residual stream with (its W_Q^g, W_K^g or W_V^g). 1 means everything the
    writer can write lies where the reader looks (and both are rank-1 aligned); 0 means the
    reader is blind to it.
    """
    writer, reader = np.asarray(writer, np.float64), np.asarray(reader, np.float64)
    denom = np.linalg.norm(writer) * np.linalg.norm(reader)
    return float(np.linalg.norm(writer @ reader) / denom) if denom > 0 else 0.0


@dataclass(frozen=True)
class Composition:
    """Composition scores from each head of layer l to each head of layer l + 1."""

    q: np.ndarray  # (L-1, H, H): [l, h, g] head h of layer l into the query of head g of l+1
    k: np.ndarray  # (L-1, H, H) into its key
    v: np.ndarray  # (L-1, H, H) into its value
    baseline: float  # what unrelated random matrices score: about 1/sqrt(D)
    fold_layernorm: bool


def layernorm_fold(model: Transformer, layer: int) -> np.ndarray:
    """(D, D) linear part of the LayerNorms between layer's attention output and layer+1's input.

    LayerNorm(y) = gamma * (y - mean(y)) / sigma + beta: in row-vector form
    y @ P diag(gamma) / sigma + beta, with P = I - 11^T/D the centring. sigma depends on the token
    (a common factor that cancels in the composition ratio) and beta adds a constant, so both are
    left out. Post-norm: norm1 then norm2 of this layer lie on the residual path; pre-norm: the
    next layer's norm1. The post-norm path also crosses the feed-forward net, which no matrix
    captures.
    """
    D = model.config.d_model
    # RMSNorm (Llama-style) scales without centring: its linear part is diag(gamma) alone.
    centre = model.config.norm_type == "layer"
    P = np.eye(D) - np.full((D, D), 1.0 / D) if centre else np.eye(D)

    def ln(norm) -> np.ndarray:
        return P @ np.diag(norm.weight.detach().cpu().double().numpy())

    if model.config.norm == "post":
        return ln(model.layers[layer].norm1) @ ln(model.layers[layer].norm2)
    return ln(model.layers[layer + 1].norm1)


def _fold_gammas(model: Transformer, layer: int) -> list[Tensor]:
    """The LayerNorm gammas of layernorm_fold(model, layer) = prod_i P diag(gamma_i), in order."""
    if model.config.norm == "post":
        norms = (model.layers[layer].norm1, model.layers[layer].norm2)
    else:
        norms = (model.layers[layer + 1].norm1,)
    return [_f64(norm.weight) for norm in norms]


def _fold(X: Tensor, gammas: list[Tensor], side: str, centre: bool = True) -> Tensor:
    """N @ X (side "left", X (D, n)) or X @ N (side "right", X (..., D)) for
    N = prod_i P diag(gamma_i) (layernorm_fold), in O(D^2) instead of a D x D product: P
    centres (subtracts the mean over the D axis), diag(gamma) scales it."""
    if side == "left":  # P diag(g1) P diag(g2) X: apply the last factor first
        for g in reversed(gammas):
            X = g[:, None] * X
            X = X - X.mean(dim=0, keepdim=True) if centre else X
        return X
    for g in gammas:  # X P diag(g1) P diag(g2): apply the first factor first
        X = X - X.mean(dim=-1, keepdim=True) if centre else X
        X = X * g
    return X


def composition_scores(
    model: Transformer, w_o="learned", fold_layernorm: bool = True
) -> Composition:
    """Q-, K- and V-composition of each head with each head of the next layer (Elhage et al. 2021).

    score[l, h, g] = ||W_OV^{l,h} N W_X^{l+1,g}||_F / (||W_OV^{l,h}||_F ||N W_X^{l+1,g}||_F), X in
    {Q, K, V}, where N is layernorm_fold (or the identity when fold_layernorm is False).

    Args:
        model: any Transformer (a single-layer model gives arrays with a first axis of 0).
        w_o: the w_o switch used for the writer's OV circuit.
        fold_layernorm: fold the LayerNorms' centring and gamma into the readers.
    Returns:
        Composition with (L-1, H, H) arrays q, k, v and the random baseline 1/sqrt(D).
    """
    cfg = model.config
    L, H, D, d_k = cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_k
    scores = {x: np.zeros((max(L - 1, 0), H, H)) for x in "qkv"}
    factors = _ov_factors(model, w_o)
    for layer in range(L - 1):
        # ||W_OV^h N R_g||_F = ||A[h] N R_g||_F with A[h] = R[h] W_O^h (d_k, D) (_reduced), and
        # ||W_OV^h||_F = ||A[h]||_F: no D x D circuit is formed, nor N itself (_fold).
        with torch.no_grad():
            A = _reduced(*factors[layer])  # (H, d_k, D)
            writer = torch.linalg.matrix_norm(A)  # (H,)
            gammas = _fold_gammas(model, layer) if fold_layernorm else []
            centre = cfg.norm_type == "layer"  # RMSNorm does not centre
            A_N = _fold(A, gammas, side="right", centre=centre)  # (H, d_k, D): A[h] @ N
            nxt = model.layers[layer + 1].attn
            for x, lin in (("q", nxt.W_q), ("k", nxt.W_k), ("v", nxt.W_v)):
                # (D, D): columns g*d_k.. are head_block(W, g, "in"); shared key/value heads
                # repeated for each query head that reads them
                W_T = _f64(nxt.per_head(lin.weight)).T
                reader = _fold(W_T, gammas, "left", centre).reshape(D, H, d_k)  # N @ R_g
                reader = reader.pow(2).sum(dim=(0, 2)).sqrt()  # (H,) ||N R_g||_F
                written = (A_N @ W_T).reshape(H, d_k, H, d_k)  # [h, :, g, :] = A[h] N R_g
                num = written.pow(2).sum(dim=(1, 3)).sqrt()  # (H, H): [h, g]
                denom = writer[:, None] * reader[None, :]
                score = torch.where(denom > 0, num / denom.clamp_min(1e-300), 0.0)
                scores[x][layer] = score.numpy()
    return Composition(
        q=scores["q"].astype(np.float32),
        k=scores["k"].astype(np.float32),
        v=scores["v"].astype(np.float32),
        baseline=1.0 / math.sqrt(D),
        fold_layernorm=fold_layernorm,
    )
