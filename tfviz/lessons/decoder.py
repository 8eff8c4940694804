"""Lessons 5-8 look inside a decoder, the bundled character language model (models/language/; the
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfviz.analysis import induction
from tfviz.core.model import Transformer
from tfviz.core.trace import TraceArrays, run_trace

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
