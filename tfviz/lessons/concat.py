"""Lesson 1, concatenation is not integration (seed 000): the article's two-head example through
W_o and through the identity ("no W_o"), which heads each output dimension draws on, and the same
map for a trained model's real W_o, from its weights alone.

Typed numbers are checked here (LessonInputError, a tfviz.refusal.Refusal): a lesson's inputs are
refused with a code and where, which the catalogue words. The algebra of W_o is tfviz.core.wo's
(head_contributions, head_energy): nothing here re-derives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfviz.core import wo
from tfviz.core.metrics import compact
from tfviz.core.model import Transformer
from tfviz.refusal import Refusal

# Seed 000's example: two heads with d_k = 2.
ARTICLE_Z0 = (1.0, 0.0)  # head 0's output
ARTICLE_Z1 = (0.0, 2.0)  # head 1's output
# The W_o used by the lessons, in the article's notation: attn_out = concat · W_o, W_o of shape
# (h·d_k, d_model), so row j reads concat dimension j (rows 0-1 are head 0's slice, rows 2-3 head
# 1's) and column d builds output dimension d: attn_out[d] = sum_j concat[j] · W_o[j, d], the
# article's own formula. It is the article's printed matrix with two entries changed (row 0,
# column 2: 0.0 -> 0.4; row 3, column 1: 0.0 -> 0.3): with the printed one, output dimensions 1
# and 2 happen to read one head only for these head outputs, and the lesson's point is that W_o
# lets every output dimension read every head. Column 0 is the article's, so output feature 0 is
# still 1.0 · 0.8 + 2.0 · 0.5 = 1.8, drawing on both heads. (The article's worked feature 1, 0.2,
# reads the matrix by rows, against its formula; by the formula it is 0.1.)
ARTICLE_W_O = (
    (0.8, 0.1, 0.4, 0.5),
    (0.2, 0.9, 0.5, 0.0),
    (0.0, 0.1, 1.0, 0.2),
    (0.5, 0.3, 0.2, 0.8),
)
MAX_ABS = 1e6  # a typed number beyond this is refused: products would lose every digit shown
# A head counts as "drawn on" by an output dimension when its share is at least this fraction of
# the largest head's share for that dimension (exact zeros, as the identity gives, never count).
DRAWN_ON = 0.05


class LessonInputError(Refusal, ValueError):
    """A lesson input refused, with where and why as data: the catalogue words it
    ("lessons.err.<code>") in any language, naming the entry ({where}: "z0[1]", "W_o").

    code: "shape" (wrong size), "not_finite" (NaN, inf or empty), "too_large" (|x| > MAX_ABS);
    field: "z0", "z1" or "W_o"; index: the entry's position in that field (() for a shape error).
    """

    PREFIX = "lessons.err."

    def __init__(self, code: str, field: str, index: tuple[int, ...] = ()):
        self.field, self.index = field, index
        where = field + (str(list(index)) if index else "")
        limit = {"limit": compact(MAX_ABS)} if code == "too_large" else {}
        super().__init__(code, where=where, **limit)

    def __reduce__(self):  # pickled as it was made
        return type(self), (self.code, self.field, self.index)


@dataclass(frozen=True)
class HeadExample:
    """The numbers of one small example at one token: H heads of d_k numbers each, one W_o of
    shape (H·d_k, d_model), in the article's notation attn_out = concat · W_o."""

    z: np.ndarray  # (H, d_k) each head's output at one token
    W_o: np.ndarray  # (H·d_k, d_model) row j reads concat[j], column d builds attn_out[d]
    concat: np.ndarray  # (H·d_k,) the heads side by side: what W_o reads
    output: np.ndarray  # (d_model,) attn_out = concat · W_o
    output_identity: np.ndarray  # (D,) the identity applied: without W_o (= concat)
    contributions: np.ndarray  # (H, D) z_h @ W_O^h: head h's term in each output dimension
    dependency: np.ndarray  # (D, H) |contribution| of head h to output dimension d, with W
    dependency_identity: np.ndarray  # (D, H) the same without W_o

    @property
    def reach(self) -> np.ndarray:
        """(D, H) which heads can reach each output dimension through W_o, whatever z is
        (weight_dependency of W_o): every head, for a W_o with no zero block."""
        return weight_dependency(self.W_o.T, len(self.z))

    @property
    def reach_identity(self) -> np.ndarray:
        """(D, H) the same for the identity: each output dimension is reached by one head."""
        return weight_dependency(np.eye(len(self.W_o)), len(self.z))

    @property
    def heads_drawn_on(self) -> np.ndarray:
        """(D,) how many heads each output dimension draws on, with W."""
        return heads_drawn_on(self.dependency)

    @property
    def heads_drawn_on_identity(self) -> np.ndarray:
        """(D,) the same without W_o: always 1 where the head's slice is not zero."""
        return heads_drawn_on(self.dependency_identity)


def _checked(values, field: str, shape: tuple[int, ...] | None, ndim: int) -> np.ndarray:
    """values as a float64 array of the given shape (or ndim), finite and within MAX_ABS."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise LessonInputError("not_finite", field) from None  # not numbers
    if array.ndim != ndim or (shape is not None and array.shape != shape) or 0 in array.shape:
        raise LessonInputError("shape", field)
    bad = ~np.isfinite(array)
    if bad.any():
        raise LessonInputError("not_finite", field, tuple(int(i) for i in np.argwhere(bad)[0]))
    large = np.abs(array) > MAX_ABS
    if large.any():
        raise LessonInputError("too_large", field, tuple(int(i) for i in np.argwhere(large)[0]))
    return array


def head_example(z, W_o) -> HeadExample:
    """Run H heads' outputs at one token through W_o and through the identity.

    Args:
        z: (H, d_k) each head's output; H >= 1, d_k >= 1.
        W_o: (D, D) with D = H * d_k, the article's layout (in, out): attn_out = concat · W_o.
    Returns:
        HeadExample (float64 arrays).
    Raises:
        LessonInputError (a ValueError): a shape, or a value that is NaN, inf or beyond MAX_ABS.
    """
    z = _checked(z, "z", None, ndim=2)  # (H, d_k)
    H, d_k = z.shape
    D = H * d_k
    W_o = _checked(W_o, "W_o", (D, D), ndim=2)  # (D, D), (in, out)
    per_token = z[:, None, :]  # (H, T=1, d_k): head_contributions' layout
    # tfviz.core.wo keeps nn.Linear's layout (out, in): the article's W_o transposed.
    contributions = wo.head_contributions(per_token, W_o.T)[:, 0]  # (H, D)
    identity = wo.head_contributions(per_token, np.eye(D))[:, 0]  # (H, D)
    concat = z.reshape(D)  # heads side by side
    return HeadExample(
        z=z,
        W_o=W_o,
        concat=concat,
        output=concat @ W_o,
        output_identity=concat.copy(),
        contributions=contributions,
        dependency=np.abs(contributions).T,
        dependency_identity=np.abs(identity).T,
    )


def two_head_example(z0=ARTICLE_Z0, z1=ARTICLE_Z1, W_o=ARTICLE_W_O) -> HeadExample:
    """Seed 000's example: two heads' outputs z0, z1 (d_k numbers each) and a (2 d_k)^2 W_o.

    The defaults are the article's head outputs and the lessons' W_o (ARTICLE_W_O), so
    two_head_example().output[0] == 1.8, drawn from both heads.
    """
    z0 = _checked(z0, "z0", None, ndim=1)
    z1 = _checked(z1, "z1", z0.shape, ndim=1)
    return head_example(np.stack([z0, z1]), _checked(W_o, "W_o", None, ndim=2))


def heads_drawn_on(dependency: np.ndarray, share: float = DRAWN_ON) -> np.ndarray:
    """(D,) for a (D, H) dependency: how many heads reach share x the row's largest (and > 0)."""
    dep = np.asarray(dependency, dtype=np.float64)
    top = dep.max(axis=1, keepdims=True)  # (D, 1)
    return ((dep > 0) & (dep >= share * top)).sum(axis=1)


def weight_dependency(W_o, n_heads: int) -> np.ndarray:
    """(D, H) how strongly output dimension d of a real W_o reads head h, from weights alone.

    ||W_o[d, head h's columns]||, the square root of tfviz.core.wo.head_energy: the size of the
    weights through which head h can reach output d, whatever the input. For the identity it is
    1 on the head that owns dimension d and 0 elsewhere: the block staircase of concatenation.
    """
    return np.sqrt(wo.head_energy(W_o, n_heads))  # (D, H)


def model_dependency(model: Transformer, layer: int) -> np.ndarray:
    """weight_dependency of one layer's learned W_o, float64 (D, H)."""
    check_layer(model, layer)
    W_o = model.layers[layer].attn.W_o.weight.detach()
    return weight_dependency(W_o, model.config.n_heads)


def check_layer(model: Transformer, layer) -> int:
    n = model.config.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"layer must be a whole number from 0 to {n - 1}, got {layer!r}")
    return layer
