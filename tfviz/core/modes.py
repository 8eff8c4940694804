"""The W_o modes, named once: what the forward's switch, a training run, an experiment's
condition and an atlas arm may be. Every other module asks here (tfviz.core.wo applies them, the
plots colour them, the catalogue words them), so a new mode is written in one place and
tests/core/test_modes.py lists every place that must then say something about it.

- "learned": the trained W_o.
- "identity": W_o switched off: concat goes on unmixed and without bias.
- "zero": the attention sublayer adds nothing to the residual stream.
- "block_diagonal": each head keeps its own d_k x d_k block of W_o (its map back onto its own
  slice) and nothing mixes across heads; the bias is kept (it mixes no heads).
- "rank:K": W_o's K largest singular directions (truncated SVD), applied to a trained W_o.

No torch here: a page or tool that only names modes does not pay for it.
"""

from __future__ import annotations

LEARNED = "learned"
IDENTITY = "identity"
ZERO = "zero"
BLOCK_DIAGONAL = "block_diagonal"
RANK_PREFIX = "rank:"

SWITCH = (LEARNED, IDENTITY, ZERO)  # the sidebar's on/off/zero switch, every model
TAKEN_APART = (BLOCK_DIAGONAL,)  # W_o kept in part; with "rank:K" the dissect view's modes
TRAINING = (LEARNED, IDENTITY, ZERO, BLOCK_DIAGONAL)  # what a model can be trained with
CONDITIONS = (LEARNED, IDENTITY, BLOCK_DIAGONAL)  # an experiment's arms, learned first
AGAINST = (IDENTITY, BLOCK_DIAGONAL)  # what the learned W_o is compared with


def rank(k: int) -> str:
    """The mode that keeps W_o's k largest singular directions."""
    return f"{RANK_PREFIX}{k}"


def rank_of(mode: object) -> int | None:
    """K of a "rank:K" mode; None for any other mode."""
    if isinstance(mode, str) and mode.startswith(RANK_PREFIX):
        k = mode[len(RANK_PREFIX) :]
        if k.isascii() and k.isdigit():
            return int(k)
    return None


def check(mode: object) -> str:
    """mode itself if it names a W_o mode the forward applies; ValueError saying which are
    allowed otherwise (K's upper bound, d_model, is checked where the model is known)."""
    if isinstance(mode, str) and mode in (*SWITCH, *TAKEN_APART):
        return mode
    if isinstance(mode, str) and mode.startswith(RANK_PREFIX):
        k = rank_of(mode)
        if k is not None and k >= 1:
            return mode
        raise ValueError(
            f"a rank-k W_o is written 'rank:K' with K a whole number >= 1, got {mode!r}"
        )
    raise ValueError(f"w_o must be one of {SWITCH}, {BLOCK_DIAGONAL!r} or 'rank:K', got {mode!r}")


def label_key(mode: str) -> str:
    """The catalogue key of a mode's name on a switch ("common.w_o.identity"; rank: {k})."""
    return "common.w_o.rank" if rank_of(mode) is not None else f"common.w_o.{mode}"
