"""The output projection W_o, written once: its modes, its per-head blocks, its per-head terms.

Every other module (the forward pass, training with W_o fixed, the trace as numpy, the analyses)
asks this one for "which map does this mode apply" and "which part of W_o reads head h", so the
algebra of seed 000 lives in a single place:

    attn_out = concat @ W_o^T + b_o = sum_h z_h @ W_O^h + b_o,

where concat = [z_0 | z_1 | ... | z_{H-1}] (heads side by side, before W_o) and W_O^h (d_k, D) is
the block of rows of W_o^T that reads head h's slice of concat. Because every W_O^h spans all D
output dimensions, every output dimension draws on every head: that is the mixing that mere
concatenation (W_o = identity) lacks.

Weights follow nn.Linear's layout (out, in); per-head blocks use the row-vector convention of the
papers (z_h @ W_O^h). Functions accept torch tensors or numpy arrays and return the same kind.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch
from torch import Tensor

from tfviz.core import modes

# The modes are named in tfviz.core.modes; these are the names this module's callers know them by.
W_O_MODES = modes.SWITCH
BLOCK_DIAGONAL = modes.BLOCK_DIAGONAL
RANK_PREFIX = modes.RANK_PREFIX
TRAINING_MODES = modes.TRAINING
check_mode = modes.check
rank_of = modes.rank_of

Array = Tensor | np.ndarray


def check_rank(mode: str, d_model: int) -> None:
    """ValueError unless a rank:K mode has K <= d_model (W_o has only d_model directions)."""
    k = rank_of(mode)
    if k is not None and not 1 <= k <= d_model:
        raise ValueError(f"rank-k W_o needs k from 1 to d_model = {d_model}, got k = {k}")


def block_mask(D: int, n_heads: int, like: Array) -> Array:
    """(D, D) 1 where output and input dimension belong to the same head, 0 elsewhere."""
    if D % n_heads:
        raise ValueError(f"W_o has {D} dimensions, not divisible into {n_heads} heads")
    head = np.arange(D) // (D // n_heads)
    mask = (head[:, None] == head[None, :]).astype(np.float32)
    if isinstance(like, Tensor):
        return torch.from_numpy(mask).to(like.device, like.dtype)
    return mask.astype(like.dtype)


# Results computed from weights, shared by every caller (every browser session). A rank-k pass
# used to take one SVD per layer per pass, so MiniLM's mode sweep (about 20 modes, two
# sentences, six layers) spent seconds on the same six SVDs; and a rank-k or block-diagonal
# forward pass rebuilt its map twice (the pass and its trace), slower than a learned pass. Two
# kinds are kept: a weight's SVD, and the map a mode applies (`effective`). key -> (the tensors'
# storages, their versions, the result): holding the storages keeps their memory from being
# reused by other tensors while the entry lives, and the version counter (shared by W,
# W.detach() and every view of it) tells an in-place change (an optimiser step) apart.
# Weights that take a gradient are never remembered: autograd needs a fresh graph.
CACHE_ENTRIES = 64  # MiniLM: 6 layers' SVD (2.4 MB each in float64) + a few modes' maps
_cache: dict = {}
_cache_lock = threading.Lock()


def cached_entries() -> int:
    """How many results (SVDs and mode maps, one cache for both kinds) are remembered now."""
    with _cache_lock:
        return len(_cache)


def clear_cache() -> None:
    """Forget every remembered SVD and mode map (the next call computes afresh)."""
    with _cache_lock:
        _cache.clear()


def _remembered(tensors: tuple[Tensor | None, ...], what: tuple, compute):
    """compute(), or what it returned for the same tensors (same memory, unchanged) and `what`."""
    present = [t for t in tensors if t is not None]
    # A tensor being trained is never remembered, even under no_grad (a look at the metric
    # between steps): fused Adam changes it in place without bumping its _version, so a
    # remembered map would go stale. Served models are frozen (requires_grad False).
    if any(t.requires_grad for t in present):
        return compute()
    key = (what,) + tuple(
        None
        if t is None
        else (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        + (t.dtype, t.device)
        for t in tensors
    )
    versions = tuple(t._version for t in present)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[1] == versions:
            return hit[2]
    result = compute()
    with _cache_lock:
        _cache.pop(key, None)  # re-inserted last: the oldest entry goes first
        _cache[key] = ([t.untyped_storage() for t in present], versions, result)
        while len(_cache) > CACHE_ENTRIES:
            _cache.pop(next(iter(_cache)))
    return result


def _svd(W: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """torch.linalg.svd(W.double(), full_matrices=False), remembered (see _remembered)."""
    if W.requires_grad and torch.is_grad_enabled():  # training through the SVD
        return torch.linalg.svd(W.double(), full_matrices=False)
    return _remembered(
        (W,), ("svd",), lambda: torch.linalg.svd(W.detach().double(), full_matrices=False)
    )


def truncated(W: Array, k: int) -> Array:
    """W's best rank-k approximation (Eckart-Young): its k largest singular directions."""
    if isinstance(W, Tensor):
        U, S, Vh = _svd(W)
        return ((U[:, :k] * S[:k]) @ Vh[:k]).to(W.dtype)
    U, S, Vh = np.linalg.svd(np.asarray(W, dtype=np.float64), full_matrices=False)
    return ((U[:, :k] * S[:k]) @ Vh[:k]).astype(W.dtype)


def effective(
    W: Array, b: Array, mode: str, n_heads: int | None = None, remember: bool = True
) -> tuple[Array, Array]:
    """(W, b) a layer applies in a mode.

    Args:
        W: (D, D) the layer's learned W_o, nn.Linear layout (out, in).
        b: (D,) its bias.
        mode: learned (W, b); identity (I, 0); zero (0, 0); block_diagonal (W with every block
            that maps one head onto another zeroed, b); rank:K (W's best rank-K approximation, b).
        n_heads: H, needed by block_diagonal.
        remember: keep the map for the next call with the same tensors (torch weights that take
            no gradient); False for a tensor made for one pass only. The result is shared: never
            change it in place.
    Returns:
        (W_eff (D, D), b_eff (D,)), of W's kind, dtype and device.
    """
    check_mode(mode)
    if mode == "learned":
        return W, b
    if isinstance(W, Tensor) and remember:
        # The same weights in the same mode give the same map: build it once, for the forward
        # pass, its trace, its numpy copy (tfviz.core.trace) and the analyses alike.
        return _remembered((W, b), (mode, n_heads), lambda: build_map(W, b, mode, n_heads))
    return build_map(W, b, mode, n_heads)


def build_map(W: Array, b: Array, mode: str, n_heads: int | None) -> tuple[Array, Array]:
    """The map (W_eff, b_eff) mode applies to W, b (not learned), built afresh every call: what
    effective() remembers. Looked up on every call, so a counter can stand in for it."""
    if mode == BLOCK_DIAGONAL:
        if n_heads is None:
            raise ValueError("a block-diagonal W_o needs n_heads")
        return W * block_mask(W.shape[0], n_heads, W), b
    if (k := rank_of(mode)) is not None:
        check_rank(mode, W.shape[0])
        return truncated(W, k), b
    if isinstance(W, Tensor):
        eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
        return (eye if mode == "identity" else torch.zeros_like(W)), torch.zeros_like(b)
    eye = np.eye(W.shape[0], dtype=W.dtype)
    return (eye if mode == "identity" else np.zeros_like(W)), np.zeros_like(b)


def apply(concat: Tensor, W: Tensor, b: Tensor, mode: str, n_heads: int | None = None) -> Tensor:
    """attn_out from concat (..., D) in a mode; the identity returns concat itself (exactly)."""
    if mode == "learned":
        return torch.nn.functional.linear(concat, W, b)
    if mode == "identity":
        return concat
    if mode == "zero":
        return torch.zeros_like(concat)
    return torch.nn.functional.linear(concat, *effective(W, b, mode, n_heads))


def head_blocks(W_o: Array, n_heads: int) -> Array:
    """W_O^h for every head, shape (H, d_k, D): block h reads head h's slice of concat.

    W_o is (D, D) in nn.Linear layout, so column block h (inputs h*d_k..(h+1)*d_k) reads head h;
    transposed, those columns become the rows of W_O^h (row-vector convention: z_h @ W_O^h).
    """
    D_out, D_in = W_o.shape
    if D_in % n_heads:
        raise ValueError(f"W_o has {D_in} input columns, not divisible into {n_heads} heads")
    return W_o.T.reshape(n_heads, D_in // n_heads, D_out)  # (H, d_k, D)


def head_block(W_o: Array, head: int, n_heads: int) -> Array:
    """W_O^h of one head, shape (d_k, D)."""
    return head_blocks(W_o, n_heads)[head]


def head_contributions(z: Array, W_o: Array) -> Array:
    """Per-head terms z_h @ W_O^h: z (..., H, T, d_k) and W_o (D, D) -> (..., H, T, D).

    Their sum over heads, plus b_o, is attn_out exactly (up to float rounding), in every mode.
    """
    blocks = head_blocks(W_o, z.shape[-3])  # (H, d_k, D)
    einsum = torch.einsum if isinstance(z, Tensor) else np.einsum
    return einsum("...htk,hkd->...htd", z, blocks)


def head_energy(W_o: Array, n_heads: int) -> np.ndarray:
    """(D, H) float64: squared weight by which output dimension d reads head h.

    The raw material of "how much does W_o mix heads": a row with energy in one column only is
    an output dimension fed by a single head.
    """
    W = W_o.detach().cpu().numpy() if isinstance(W_o, Tensor) else np.asarray(W_o)
    blocks = head_blocks(W.astype(np.float64), n_heads)  # (H, d_k, D)
    return (blocks**2).sum(axis=1).T  # (D, H)


def training_start(
    W: Tensor, b: Tensor, mode: str, n_heads: int, remember: bool = True
) -> tuple[Tensor, Tensor]:
    """The (W, b) a model trained with W_o in `mode` starts from, given nn.Linear's random draw.

    As effective(), except that a block-diagonal W_o's kept blocks (and bias) are scaled by
    sqrt(H). nn.Linear draws its entries for a fan-in of D; a block reads only d_k = D / H
    inputs, so masked alone it would start every output H times smaller in variance than a full
    W_o does, and a slower start would be measured as "mixing heads matters". Scaled, each block
    starts as nn.Linear would draw it for its own fan-in (bound 1 / sqrt(d_k)).
    """
    W_eff, b_eff = effective(W, b, mode, n_heads, remember)
    if mode == BLOCK_DIAGONAL:
        return W_eff * math.sqrt(n_heads), b_eff * math.sqrt(n_heads)
    return W_eff, b_eff


def fixed_weights(mode: str, D: int) -> tuple[Tensor, Tensor]:
    """The (W, b) a model trained with W_o fixed in this mode stores as its W_o (CPU float32)."""
    if mode not in (modes.IDENTITY, modes.ZERO):
        raise ValueError(f"only identity or zero is a fixed W_o to train with, not {mode!r}")
    return effective(torch.empty(D, D), torch.empty(D), mode)


def permute_heads(x: Array, order, n_heads: int) -> Array:
    """x (..., D) with its head slices in a new order: slice i of the result is slice order[i].

    On concat this reorders the heads side by side; W_o then reads each head with the columns
    meant for another, so the output changes, unless W_o's column blocks are permuted the same
    way (permute_columns), when it is exactly the same.
    """
    check_order(order, n_heads)
    D = x.shape[-1]
    index = np.concatenate([np.arange(h * D // n_heads, (h + 1) * D // n_heads) for h in order])
    if isinstance(x, Tensor):
        return x[..., torch.as_tensor(index, device=x.device)]
    return x[..., index]


def permute_columns(W_o: Array, order, n_heads: int) -> Array:
    """W_o (D, D) with its column blocks in the same new order as permute_heads gives concat."""
    return permute_heads(W_o, order, n_heads)  # columns are W_o's last axis: the same indexing


def check_order(order, n_heads: int) -> tuple[int, ...]:
    """order as a tuple if it is a permutation of 0..H-1; ValueError otherwise."""
    try:
        order = tuple(int(h) for h in order)
    except (TypeError, ValueError):
        raise ValueError(f"a head order is a list of head numbers, got {order!r}") from None
    if sorted(order) != list(range(n_heads)):
        raise ValueError(
            f"a head order must list each head 0..{n_heads - 1} exactly once, got {list(order)}"
        )
    return order
