"""The numbers behind the guided lessons: each claim of the seed articles, computed, not pictured.

The Lessons tab (tfviz/ui/views/lessons.py) walks a student through the three articles' claims; this
module computes what each step shows, without Streamlit, so every number is tested here:

1. Concatenation is not integration (seed 000). `two_head_example` runs the article's 2-head
   example (head outputs [1, 0] and [0, 2], a 4x4 W_o, attn_out = concat · W_o as the article
   writes it) through W_o and through the identity ("no W_o") and says which heads each output
   dimension draws on; `weight_dependency` gives the same map for a trained model's real W_o,
   from its weights alone.
2. One big projection then view/transpose equals H per-head projections (seed 004):
   `projection_equivalence` computes both on a live model and returns the largest difference.
3. The digit-sum model in its original setting (seed 002): `RecipeWork` trains a bundled recipe
   (tfviz/training/recipes.py, `sum_seed`) as a job of the app's one JobManager (tfviz.serve.jobs)
   and keeps the model in memory; `predict` reads the answer for typed digits.
4. Switch W_o off and watch the outputs change: `w_o_switch`.

Steps 5-8 look inside a decoder, the bundled character language model (models/language/; the
view loads it): nothing here knows its weights, every number is measured on the model given.

5. The causal mask: `causal_rows` measures, on a typed line's attention, that every row sums to
   1 over the keys at or before its query and that no weight falls on a key after it.
6. A previous-token head: `previous_token_head` picks the head with the highest previous-token
   score on tfviz's probe (tfviz.analysis.induction), `previous_token_line` measures it on a
   typed line.
7. An induction head on a repeated sentence: `repeated_sentence` types a sentence twice and
   measures the loss and next-character accuracy on each copy (the probe's own measure,
   tfviz.analysis.induction.measure_induction, on this one text); `random_letters` draws letters
   as the probe does, the alternative to a sentence.
8. W_o switched off in layer 0: the view measures the probe under each switch; `head_kept` says
   whether the learned model's induction head kept its score.
A head is called formed, weak or absent by tfviz.analysis.induction.head_verdict, against what
even attention scores, so that a lesson never calls a head formed that is not.

The algebra of W_o is tfviz.core.wo's (head_blocks, head_contributions, head_energy): nothing here
re-derives it. Dimensions: B batch, T tokens, H heads, d_k per head, D = H * d_k.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfviz.analysis import induction
from tfviz.core import wo
from tfviz.core.interventions import switches
from tfviz.core.metrics import compact
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task, get_task
from tfviz.core.trace import TraceArrays, run_trace
from tfviz.messages import Message, say
from tfviz.refusal import Refusal
from tfviz.serve.checks import whole_number
from tfviz.serve.jobs import Stopped, step_reporter
from tfviz.settings import MAX_STEPS
from tfviz.training.evaluate import evaluate
from tfviz.training.recipes import RECIPES
from tfviz.training.train import resolve_device, train

# ---- 1. concatenation is not integration -----------------------------------------------------

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
    _check_layer(model, layer)
    W_o = model.layers[layer].attn.W_o.weight.detach()
    return weight_dependency(W_o, model.config.n_heads)


def _check_layer(model: Transformer, layer) -> int:
    n = model.config.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"layer must be a whole number from 0 to {n - 1}, got {layer!r}")
    return layer


# ---- 2. one big projection equals H per-head projections -----------------------------------


@dataclass(frozen=True)
class ProjectionCheck:
    """Seed 004's equivalence measured: big projection + view/transpose vs per-head ones."""

    max_diff: dict[str, float]  # role ("q", "k", "v") -> max |big - separate| over everything
    shape: tuple[int, ...]  # (B, H, T, d_k) of both results
    big_first: np.ndarray  # (d_k,) head 0, first token, from the big projection's W_q
    separate_first: np.ndarray  # (d_k,) the same from head 0's own (d_k, D) projection

    @property
    def exact(self) -> bool:
        """True when both ways agree to the last bit for q, k and v: no rounding showed at all
        (the same products summed in the same order), which a lesson must not call rounding."""
        return all(diff == 0.0 for diff in self.max_diff.values())


@torch.no_grad()
def projection_equivalence(
    model: Transformer, layer: int, ids: Tensor, pad_mask: Tensor | None = None
) -> ProjectionCheck:
    """Compute q, k, v of one layer both ways on live input and measure the difference.

    Big: W(x) with the layer's D x D projection, then .view(B, T, H, d_k).transpose(1, 2), as the
    model does. Separate: for each head h, its own projection with rows h*d_k..(h+1)*d_k of W and
    of the bias, (d_k, D), applied to the same x. x is what the layer's attention reads (its
    input, after the pre-norm LayerNorm for a pre-norm model).

    Args:
        model: a Transformer (not changed).
        layer: 0..L-1.
        ids: (B, T) token ids; pad_mask: (B, T) True at padding, or None.
    Returns:
        ProjectionCheck; the differences are float rounding only (about 1e-7 or exactly 0).
    """
    _check_layer(model, layer)
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        raise ValueError("ids must be a 2-d tensor of token ids, shape (batch, tokens)")
    block = model.layers[layer]
    x = model(ids, pad_mask).trace.layers[layer].resid_pre  # (B, T, D)
    if block.pre_norm:
        x = block.norm1(x)
    attn = block.attn
    B, T, D = x.shape
    H, d_k = attn.n_heads, attn.d_k
    diffs, first = {}, None
    for role, lin in (("q", attn.W_q), ("k", attn.W_k), ("v", attn.W_v)):
        big = lin(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        heads = [
            F.linear(x, lin.weight[h * d_k : (h + 1) * d_k], lin.bias[h * d_k : (h + 1) * d_k])
            for h in range(H)
        ]  # H x (B, T, d_k)
        separate = torch.stack(heads, dim=1)  # (B, H, T, d_k)
        diffs[role] = float((big - separate).abs().max())
        if first is None:
            first = (big[0, 0, 0].double().cpu().numpy(), separate[0, 0, 0].double().cpu().numpy())
    return ProjectionCheck(
        max_diff=diffs, shape=(B, H, T, d_k), big_first=first[0], separate_first=first[1]
    )


# ---- 3. the digit-sum model in its original setting, trained as a job ------------------------

LESSON_RECIPE = "sum_seed"  # seed 002's exact settings (tfviz/training/recipes.py)
# What train() takes from a recipe (tfviz.cli.train reads the same keys to build the bundled
# models).
_TRAIN_KEYS = ("steps", "batch_size", "lr", "seed", "w_o", "min_len", "max_len", "schedule")
EVAL_N = 500  # fresh examples behind the MAE shown after training (at the recipe's length)


@dataclass(frozen=True)
class RecipeSpec:
    """Train a bundled recipe again; steps None keeps the recipe's own number of steps."""

    recipe: str = LESSON_RECIPE
    steps: int | None = None

    def check(self) -> dict:
        """The recipe with the steps applied, or ValueError (Refused for the steps) saying what is
        allowed."""
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; known: {', '.join(RECIPES)}")
        recipe = dict(RECIPES[self.recipe])
        if self.steps is not None:
            recipe["steps"] = whole_number(self.steps, "steps", 1, MAX_STEPS, int_only=True)
        return recipe

    @property
    def task(self) -> str:
        return RECIPES[self.recipe]["task"] if self.recipe in RECIPES else ""

    @property
    def total_steps(self) -> int:
        return self.check()["steps"]


@dataclass(frozen=True)
class RecipeResult:
    """A model trained from a recipe, kept in memory (never saved), and how it scores."""

    model: Transformer
    history: dict
    metrics: dict  # tfviz.training.evaluate on EVAL_N fresh examples at the recipe's eval length


class RecipeWork:
    """A job (tfviz.serve.jobs' Work protocol) that trains a recipe exactly as the bundled model
    was.

    tfviz.serve.work.TrainWork trains from a JobSpec, which cannot say "value embedding, dropout
    0.1, length 8 only, constant learning rate" (seed 002's setting), and saves into the shared
    models folder; a lesson wants the recipe as it is and a model for this session only. Same
    manager, same cap and queue, same job states.
    """

    kind = "lesson"

    def __init__(self, spec: RecipeSpec, device: str = "auto"):
        self.spec = spec
        self.device = device
        self.result: RecipeResult | None = None
        self._recipe: dict | None = None

    @property
    def total(self) -> int:
        return self.spec.total_steps

    @property
    def claim(self) -> None:
        return None  # nothing is written: any number of lessons may train side by side

    def validate(self, claimed: Collection[Hashable]) -> None:
        self._recipe = self.spec.check()

    def run(self, report, should_stop: Callable[[], bool]) -> Message:
        recipe = self._recipe or self.spec.check()
        task = get_task(recipe["task"])
        config = task.model_config(**recipe.get("sizes", {}))
        kwargs = {key: recipe[key] for key in _TRAIN_KEYS if key in recipe}
        report(message=say("training"))

        on_step = step_reporter(report, should_stop)
        model, history = train(
            task, config, device=str(resolve_device(self.device)), on_step=on_step, **kwargs
        )
        if history["cancelled"]:
            raise Stopped(say("after_steps", steps=history["steps_done"]))
        report(message=say("evaluating", n=EVAL_N))
        n = recipe.get("eval_len")
        metrics = evaluate(model, task, n=EVAL_N, min_len=n, max_len=n)
        self.result = RecipeResult(model=model, history=history, metrics=metrics)
        return say("recipe_trained", recipe=self.spec.recipe, steps=history["steps_done"])


def predict(model: Transformer, task: Task, text: str, **switches_) -> tuple[str, str]:
    """(the model's answer, the right answer) for a typed sequence; ValueError if text is bad."""
    task.validate(text)
    return task.predict(model, text, **switches_), task.solve(text)


@dataclass(frozen=True)
class AttentionPair:
    """Seed 002's point measured: the same model's attention for two inputs."""

    attn: tuple[np.ndarray, np.ndarray]  # each (L, H, T, T)
    labels: tuple[list[str], list[str]]  # each input's T position labels
    max_diff: np.ndarray  # (L,) max |weight a - weight b| over heads and positions, per layer


def attention_pair(model: Transformer, task: Task, a: str, b: str) -> AttentionPair:
    """The attention of two typed sequences of the same length (ValueError otherwise), and how
    far apart they are: the weights are computed from the input, so they differ with it."""
    traces = [run_trace(model, task, text) for text in (a, b)]
    attn = tuple(np.asarray(tr.attn, dtype=np.float64) for tr in traces)
    if attn[0].shape != attn[1].shape:
        raise ValueError(f"the two sequences must have the same length, got {len(a)} and {len(b)}")
    diff = np.abs(attn[0] - attn[1]).reshape(len(attn[0]), -1).max(axis=1)
    return AttentionPair(attn, (list(traces[0].labels), list(traces[1].labels)), diff)


# ---- 4. switch W_o off and watch the outputs change -----------------------------------------


@dataclass(frozen=True)
class SwitchResult:
    """The same sequence with the learned W_o and with W_o switched."""

    learned: str  # the model's answer with its learned W_o
    switched: str  # with the switch
    answer: str  # the right answer
    tokens_changed: int  # answer tokens that differ between learned and switched
    max_change: float  # max |output| change over the model's raw outputs (logits or values)


@torch.no_grad()
def w_o_switch(
    model: Transformer, task: Task, text: str, w_o: str = "identity", layer: int | None = None
) -> SwitchResult:
    """Predict text with the learned W_o and with W_o switched (all layers, or one layer).

    The model is not changed: the switch is a forward argument (tfviz.core.interventions).
    """
    task.validate(text)
    if layer is not None:
        _check_layer(model, layer)
    iv = switches(w_o, layer)
    ids, pad = task.encode_batch([text], device=model.device)
    base = model(ids, pad, trace=False).logits
    changed = model(ids, pad, iv, trace=False).logits
    learned_tokens = task.answer_from_logits(base[0], len(text))
    switched_tokens = task.answer_from_logits(changed[0], len(text))
    differ = sum(a != b for a, b in zip(learned_tokens, switched_tokens, strict=True))
    change = float((changed - base).abs().max())
    return SwitchResult(
        learned=task.sep.join(learned_tokens),
        switched=task.sep.join(switched_tokens),
        answer=task.solve(text),
        tokens_changed=differ,
        max_change=change if math.isfinite(change) else float("inf"),
    )


# ---- 5-8. a decoder: the bundled character language model --------------------------------------

# The learned model's induction head is "kept" under a switch while its score stays at least this
# share of its learned score.
KEPT_SHARE = 0.5
RANDOM_LETTERS = 24  # letters of step 7's alternative to a sentence (one copy)


def _square(attn) -> np.ndarray:
    a = np.asarray(attn, dtype=np.float64)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[-1] == 0:
        raise ValueError(f"attention must have shape (..., T, T) with T >= 1, got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("attention weights must be finite (pass the weights, not the drawn map)")
    return a


@dataclass(frozen=True)
class CausalRows:
    """A decoder's attention on one text, checked against its causal mask."""

    row_error: float  # max |sum of a row over the keys at or before its query - 1|
    above: float  # the largest weight on a key after its query: 0 in a causal model
    allowed: int  # cells of one map at or below the diagonal, T (T + 1) / 2
    masked: int  # cells above it, T (T - 1) / 2: blank in the drawn map


def causal_rows(attn) -> CausalRows:
    """Check attention weights (..., T, T) (queries on rows) against a causal mask: each row's sum
    over the keys a query may read (k <= t), and the largest weight outside them."""
    a = _square(attn)
    T = a.shape[-1]
    below = np.tril(np.ones((T, T), dtype=bool))  # (T, T) key k <= query t
    sums = np.where(below, a, 0.0).sum(axis=-1)  # (..., T)
    above = np.where(below, 0.0, np.abs(a)).max() if T > 1 else 0.0
    return CausalRows(
        row_error=float(np.abs(sums - 1.0).max()),
        above=float(above),
        allowed=T * (T + 1) // 2,
        masked=T * (T - 1) // 2,
    )


def previous_token_head(scores: induction.InductionScores) -> tuple[int, int, float]:
    """(layer, head, score) of the highest previous-token score (the first, layer-major, on a
    tie), as InductionScores.best() gives it for the induction score."""
    prev = scores.previous_token
    layer, head = np.unravel_index(int(np.argmax(prev)), prev.shape)
    return int(layer), int(head), float(prev[layer, head])


@dataclass(frozen=True)
class PreviousToken:
    """One head's attention on one text, read as a previous-token head's."""

    score: float  # mean weight from each query t >= 1 to key t - 1
    hits: int  # queries t >= 1 whose largest allowed weight is on key t - 1
    queries: int  # T - 1
    even: float  # induction.even_score(T, 1): the score of even attention on this text


def previous_token_line(weights) -> PreviousToken:
    """weights: one head's (T, T) attention (T >= 2), queries on rows, keys after a query
    masked (0 or NaN)."""
    a = _square(np.nan_to_num(np.asarray(weights, dtype=np.float64), nan=0.0))
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"give one head's (T, T) attention with T >= 2, got {a.shape}")
    T = a.shape[0]
    score = induction.previous_token_score(a[None, None])[0, 0]
    masked = np.where(np.tril(np.ones((T, T), dtype=bool)), a, -np.inf)
    hits = int((masked[1:].argmax(axis=1) == np.arange(T - 1)).sum())
    return PreviousToken(float(score), hits, T - 1, induction.even_score(T, 1))


@dataclass(frozen=True)
class RepeatedSentence:
    """A sentence typed twice, through a decoder: the probe's measure on this one text."""

    text: str  # (sentence + " ") twice
    period: int  # n: characters of one copy
    trace: TraceArrays  # the text's trace, learned W_o: its labels, attention (L, H, T, T), ...
    scores: induction.InductionScores  # every head's scores and the losses on this text
    correct: np.ndarray  # (T - 1,) bool: position t's likeliest next character is character t + 1

    @property
    def acc_first(self) -> float:
        """Next-character accuracy on the first copy (its characters 1..n-1): the slice of
        InductionScores.loss_first."""
        return float(self.correct[: self.period - 1].mean())

    @property
    def acc_repeat(self) -> float:
        """The same on the repeat, but its first character (InductionScores.loss_repeat's)."""
        return float(self.correct[self.period :].mean())


def repeated_sentence(model: Transformer, task, sentence: str) -> RepeatedSentence:
    """Run a character language model on (sentence + " ") typed twice.

    Args:
        model: a causal language model (measure_induction's kind), not changed.
        task: its tfviz.hf.NextTokenTask with a character tokenizer (one position a character).
        sentence: the text of one copy, but its closing space.
    Raises:
        ValueError (tfviz.core.tasks.InputError for a character outside the model's alphabet):
        a copy shorter than induction.MIN_PERIOD, or two that do not fit the model's context.
    """
    copy = sentence + " "
    text = copy * 2
    task.validate(text)
    n = len(copy)
    if n < induction.MIN_PERIOD:
        raise ValueError(f"a sentence needs at least {induction.MIN_PERIOD - 1} characters")
    ids, _ = task.encode_batch([text], device=model.device)
    if ids.shape[1] != 2 * n:
        raise ValueError(
            f"the sentence typed twice is {2 * n} characters; the model reads "
            f"{model.config.max_len} at most, one position a character"
        )
    trace = run_trace(model, task, text)
    scores = induction.measure_induction(model, ids, period=n)
    correct = np.asarray(trace.top_ids[:-1, 0]) == ids[0, 1:].cpu().numpy()
    return RepeatedSentence(
        text=text,
        period=n,
        trace=trace,
        scores=scores,
        correct=correct,
    )


def random_letters(tokenizer, token_ids, n: int = RANDOM_LETTERS) -> str:
    """n letters drawn as tfviz's probe draws them (induction.repeated_random_tokens from
    token_ids with induction.PROBE_SEED), spelled by the tokenizer: one copy."""
    rng = np.random.default_rng(induction.PROBE_SEED)
    row = induction.repeated_random_tokens(1, n, token_ids, rng)[0, :n]
    return "".join(tokenizer.piece_text(int(i)) for i in row)


def head_kept(learned: float, switched: float) -> bool:
    """Whether a head's score under a switch is still at least KEPT_SHARE of its learned one."""
    return switched >= KEPT_SHARE * learned
