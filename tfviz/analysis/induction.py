"""7. Previous-token and induction heads (Elhage et al. 2021; Olsson et al. 2022, "In-context
Learning and Induction Heads"), and the in-context loss drop on repeated random tokens.

An induction head completes a pattern it has seen earlier in the context: at a token x it looks
back to where x occurred before and attends to the token that came *after* it, then copies that
token as its guess for what comes next ([A][B] ... [A] -> [B]). It usually needs a
previous-token head in an earlier layer, which writes "the token before me was A" into each
position for the induction head's keys to match: a two-layer circuit, composed through the
residual stream that W_o writes into.

The standard probe is a random sequence repeated twice: x_0..x_{n-1} x_0..x_{n-1} (period n),
possibly after a fixed prefix such as BOS. Nothing in the first copy is predictable, everything
in the second is (but its first token), so a model with induction heads predicts the second copy
far better: the in-context loss drop. On the same sequences each head's attention is scored by
where its queries look:

    previous-token score   attention from t to t - 1            (all queries t >= 1)
    induction score        attention from t to t - n + 1        (queries in the repeat)
    duplicate-token score  attention from t to t - n            (queries in the repeat)

The duplicate-token score tells a head that finds the earlier copy of the current token apart
from an induction head, which looks one token further on.

The scoring functions are plain numpy on attention patterns (testable on hand-made attention);
measure_induction runs a causal language model (tfviz.core.model.Transformer with causal=True,
pool="none", n_out == vocab_size) on such sequences under any switches, batch by batch. As
everywhere in tfviz.analysis, nothing here changes the model: the switches are forward
arguments (tfviz.core.interventions.Interventions).

Dimensions: L layers, B (or N) sequences, H heads, T positions, V vocabulary, n the period.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfviz.analysis.base import _check_eval
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer

# Below 3 the scores stop meaning different things: with period 2 the induction target t - n + 1
# is the previous token t - 1, so a previous-token head would score as a perfect induction head.
MIN_PERIOD = 3
# Bytes of one forward pass's trace and logits that measure_induction aims to stay under when it
# picks a batch size itself; the batch never grows past MAX_BATCH sequences.
TRACE_BUDGET = 64 * 2**20
MAX_BATCH = 64
RANK_KEYS = ("induction", "previous_token", "duplicate")


@dataclass(frozen=True)
class InductionScores:
    """Every head's scores on repeated random tokens, and the model's loss on each copy.

    Score arrays are (L, H) float32 in [0, 1]: the mean attention weight that the head's queries
    put on the key the score names (module docstring). Losses are next-token cross-entropy in
    nats, averaged over the sequences.
    """

    previous_token: np.ndarray  # (L, H) attention from t to t - 1, queries t >= 1
    induction: np.ndarray  # (L, H) attention from t to t - n + 1, queries in the repeat
    duplicate: np.ndarray  # (L, H) attention from t to t - n, queries in the repeat
    # (T-1,) entry t: the loss of predicting token t + 1 from position t, mean over sequences
    loss_by_position: np.ndarray
    loss_first: float  # predicting tokens 1..n-1 of the first copy (token 0 is a random draw)
    loss_repeat: float  # predicting every token of the repeat but its first (also a random draw)
    period: int  # n
    offset: int  # positions before the first copy (a prefix such as BOS)
    n_seqs: int
    interventions: Interventions  # the switches the passes ran with

    def even(self, by: str = "induction") -> float:
        """What a head spreading each query's weight evenly over the keys it may read scores on
        this probe (even_score): the previous-token score's queries from position 1, the
        induction and duplicate scores' from the repeat."""
        first = 1 if by == "previous_token" else self.offset + self.period
        return even_score(self.offset + 2 * self.period, first)

    @property
    def in_context_drop(self) -> float:
        """loss_first - loss_repeat: how much better the model predicts a token it has seen
        (Olsson et al.'s in-context learning, on the sequence's repeat)."""
        return self.loss_first - self.loss_repeat

    def best(self) -> tuple[int, int, float]:
        """(layer, head, score) of the highest induction score (the first, layer-major, on a
        tie)."""
        layer, head = np.unravel_index(int(np.argmax(self.induction)), self.induction.shape)
        return int(layer), int(head), float(self.induction[layer, head])

    def ranked(self, by: str = "induction") -> list[tuple[int, int, float, float]]:
        """Every head as (layer, head, previous_token, induction), highest `by` score first.

        Args:
            by: "induction", "previous_token" or "duplicate": the score to sort by. Ties keep
                layer-major order.
        Returns:
            L * H tuples of plain ints and floats.
        """
        if by not in RANK_KEYS:
            raise ValueError(f"by must be one of {RANK_KEYS}, got {by!r}")
        key = getattr(self, by)  # (L, H)
        L, H = key.shape
        order = sorted(
            ((lay, h) for lay in range(L) for h in range(H)), key=lambda p: -float(key[p])
        )
        return [
            (lay, h, float(self.previous_token[lay, h]), float(self.induction[lay, h]))
            for lay, h in order
        ]


# ---- scores on attention patterns -------------------------------------------------------------


def previous_token_score(attn: np.ndarray | Tensor) -> np.ndarray:
    """Each head's mean attention to the previous token.

    Args:
        attn: (L, H, T, T) attention weights, rows indexed by query; or (B, L, H, T, T), whose
            sequences are averaged.
    Returns:
        (L, H) float32: the mean over queries t = 1..T-1 (position 0 has no previous token) of
        attn[..., t, t - 1].
    """
    a = _attention(attn)
    T = a.shape[-1]
    if T < 2:
        raise ValueError(f"attention has {T} position; a previous-token score needs at least 2")
    return _stripe(a, lag=1, first_query=1)


def induction_score(attn: np.ndarray | Tensor, period: int, offset: int = 0) -> np.ndarray:
    """Each head's mean attention to the token after the current token's earlier occurrence.

    Args:
        attn: (L, H, T, T) or (B, L, H, T, T) attention of sequences whose tokens from `offset`
            on repeat with period n: x_0..x_{n-1} x_0..x_{n-1} (more copies are allowed).
        period: n, at least 3 (MIN_PERIOD).
        offset: positions before the first copy (e.g. 1 for a BOS prefix).
    Returns:
        (L, H) float32: the mean over the repeat's queries t = offset + n .. T-1 of
        attn[..., t, t - n + 1].
    """
    a = _attention(attn)
    _check_period(a.shape[-1], period, offset)
    return _stripe(a, lag=period - 1, first_query=offset + period)


def duplicate_token_score(attn: np.ndarray | Tensor, period: int, offset: int = 0) -> np.ndarray:
    """Each head's mean attention to the earlier occurrence of the current token itself.

    Args:
        attn, period, offset: as for induction_score.
    Returns:
        (L, H) float32: the mean over the repeat's queries t = offset + n .. T-1 of
        attn[..., t, t - n].
    """
    a = _attention(attn)
    _check_period(a.shape[-1], period, offset)
    return _stripe(a, lag=period, first_query=offset + period)


def _attention(attn: np.ndarray | Tensor) -> np.ndarray:
    """attn as float64 numpy of rank 4 or 5 with square (queries, keys) axes, or ValueError."""
    if isinstance(attn, Tensor):
        attn = attn.detach().to("cpu", torch.float64).numpy()
    a = np.asarray(attn, dtype=np.float64)
    if a.ndim not in (4, 5) or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"attention must have shape (L, H, T, T) or (B, L, H, T, T), got {a.shape}"
        )
    if not np.isfinite(a).all():
        raise ValueError("attention weights must be finite")
    return a


def _check_whole(name: str, value, low: int) -> None:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")


def _check_period(T: int, period, offset) -> None:
    """ValueError unless period and offset are whole numbers that fit two copies into T
    positions."""
    _check_period_alone(period)
    _check_whole("offset", offset, 0)
    need = offset + 2 * period
    if T < need:
        after = f" after {offset} prefix positions" if offset else ""
        raise ValueError(
            f"attention has {T} positions; a period of {period}{after} needs at least {need}"
        )


def _check_period_alone(period) -> None:
    if isinstance(period, Integral) and not isinstance(period, bool) and 0 < period < MIN_PERIOD:
        raise ValueError(
            f"period must be at least {MIN_PERIOD}, got {period}: with a shorter one the "
            "induction target t - n + 1 is the previous token (or the query itself), and the "
            "scores could not tell the heads apart"
        )
    _check_whole("period", period, MIN_PERIOD)


def _stripe(a: np.ndarray | Tensor, lag: int, first_query: int):
    """The mean over queries t >= first_query of a[..., t, t - lag], a leading batch axis (rank 5)
    averaged too: (L, H). numpy in, float32 numpy out; a tensor in (measure_induction's batches),
    the per-sequence means (B, L, H) out, in its dtype, without copying the whole pattern."""
    if isinstance(a, Tensor):
        d = torch.diagonal(a, -lag, -2, -1)  # (..., T - lag): entry i is query lag + i
        return d[..., first_query - lag :].mean(-1)
    d = np.diagonal(a, -lag, -2, -1)  # (..., T - lag)
    means = d[..., first_query - lag :].mean(-1)  # (L, H) or (B, L, H)
    if means.ndim == 3:
        means = means.mean(0)  # every sequence counts alike: each has the same queries
    return means.astype(np.float32)


# ---- data --------------------------------------------------------------------------------------


def repeated_random_tokens(
    n_seqs: int,
    period: int,
    token_ids: Sequence[int] | np.ndarray | Tensor,
    rng: np.random.Generator,
    prefix: Sequence[int] = (),
) -> Tensor:
    """Random sequences repeated twice: the probe of induction heads.

    Each token of a copy is drawn uniformly, with replacement, from token_ids, so a token may
    occur twice within one copy (more often the smaller the set and the longer the period);
    the scores go by position, not by token, and do not mind.

    Args:
        n_seqs: sequences to draw.
        period: n, the length of one copy, at least 3 (MIN_PERIOD).
        token_ids: the ids to draw from, e.g. the letters only, or every id but the special
            ones; taken as a set (duplicates and their order do not change the draw).
        rng: the source of randomness; the same seed gives the same rows.
        prefix: ids put before every row unchanged (e.g. (BOS,)): the offset of the scores.
    Returns:
        (n_seqs, len(prefix) + 2 n) int64: prefix, x_0..x_{n-1}, x_0..x_{n-1}.
    """
    _check_whole("n_seqs", n_seqs, 1)
    _check_period_alone(period)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng), got {rng!r}")
    ids = _whole_numbers(token_ids, "token_ids")
    if ids.size == 0:
        raise ValueError("token_ids is empty: there is nothing to draw from")
    pool = np.unique(ids)  # (K,) sorted: the same set draws the same rows
    head = _whole_numbers(prefix, "prefix")
    first = pool[rng.integers(0, len(pool), size=(n_seqs, period))]  # (N, n)
    rows = np.concatenate([np.broadcast_to(head, (n_seqs, head.size)), first, first], axis=1)
    return torch.from_numpy(rows.astype(np.int64))


def _whole_numbers(values, name: str) -> np.ndarray:
    """values as a 1-d int64 array of ids >= 0, or ValueError."""
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    a = np.asarray(values)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a < 0).any():
        raise ValueError(f"{name} must be a flat list of token ids >= 0, got {values!r}")
    return a.astype(np.int64)


# ---- the model ---------------------------------------------------------------------------------


@torch.no_grad()
def measure_induction(
    model: Transformer,
    ids: Tensor,
    interventions: Interventions | None = None,
    *,
    period: int | None = None,
    offset: int = 0,
    batch_size: int | None = None,
) -> InductionScores:
    """Every head's previous-token, induction and duplicate-token scores, and the loss on each
    copy, of a causal language model on repeated random tokens.

    Args:
        model: a causal language model in eval mode (causal=True, pool="none",
            n_out == vocab_size); not changed.
        ids: (N, offset + 2 n) int token ids, e.g. from repeated_random_tokens; every row's
            tokens from `offset` on repeat with period n (checked).
        interventions: the switches of every pass (W_o mode per layer, heads ablated, patterns
            overridden, ...); None: the learned model.
        period: n; None: (T - offset) / 2, the two copies repeated_random_tokens makes.
        offset: positions before the first copy (len(prefix) of repeated_random_tokens).
        batch_size: sequences per forward pass; None: as many as keep one pass's trace and
            logits near TRACE_BUDGET bytes (at most MAX_BATCH).
    Returns:
        InductionScores over all N sequences.
    """
    _check_eval(model)
    _check_language_model(model.config)
    iv = Interventions.of(interventions)
    ids, n = _repeated_ids(ids, model.config.vocab_size, period, offset)
    N, T = ids.shape
    if batch_size is None:
        batch_size = _batch_size(model, T)
    _check_whole("batch_size", batch_size, 1)
    stripes = {  # score -> (lag, first query), as the scoring functions above use them
        "previous_token": (1, 1),
        "induction": (n - 1, offset + n),
        "duplicate": (n, offset + n),
    }
    sums, loss_sum = _summed_over_batches(model, ids, iv, batch_size, stripes)
    by_position = loss_sum / N  # (T-1,)
    # Entry t predicts token t + 1: the first copy's tokens 1..n-1 are targets offset+1..
    # offset+n-1, entries offset..offset+n-2; the repeat's but its first, entries offset+n..T-2.
    first_copy = by_position[offset : offset + n - 1]
    repeat = by_position[offset + n :]
    return InductionScores(
        previous_token=(sums["previous_token"] / N).astype(np.float32),
        induction=(sums["induction"] / N).astype(np.float32),
        duplicate=(sums["duplicate"] / N).astype(np.float32),
        loss_by_position=by_position.astype(np.float32),
        loss_first=float(first_copy.mean()),
        loss_repeat=float(repeat.mean()),
        period=int(n),
        offset=int(offset),
        n_seqs=int(N),
        interventions=iv,
    )


def _check_language_model(cfg: ModelConfig) -> None:
    """ValueError unless the config is a causal language model's (per token, a vocabulary out)."""
    if not cfg.causal or cfg.pool != "none" or cfg.n_out != cfg.vocab_size:
        raise ValueError(
            "measure_induction needs a causal language model (causal=True, pool='none', "
            f"n_out == vocab_size); this one has causal={cfg.causal}, pool={cfg.pool!r}, "
            f"n_out={cfg.n_out}, vocab_size={cfg.vocab_size}"
        )


def _repeated_ids(
    ids: Tensor, vocab_size: int, period: int | None, offset: int
) -> tuple[Tensor, int]:
    """(ids as a tensor, the period n): ValueError unless ids (N, offset + 2 n) are token ids
    of the vocabulary that repeat with period n after offset positions (n from T when None)."""
    ids = torch.as_tensor(ids)
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"ids must be a 2-d integer tensor of token ids (N, T), got {ids.dtype} "
            f"{tuple(ids.shape)}"
        )
    N, T = ids.shape
    _check_whole("offset", offset, 0)
    if period is None:
        if (T - offset) % 2:
            raise ValueError(
                f"{T - offset} positions after a prefix of {offset} cannot be two copies: pass "
                "offset (the prefix's length) or the period"
            )
        period = (T - offset) // 2
    _check_period(T, period, offset)
    if N < 1:
        raise ValueError("ids has no sequence")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"ids must lie in 0..{vocab_size - 1}")
    n = period
    if not torch.equal(ids[:, offset + n :], ids[:, offset : T - n]):
        raise ValueError(
            f"ids do not repeat with period {n} after {offset} prefix positions: the scores "
            "would not measure induction (make them with repeated_random_tokens)"
        )
    return ids, n


def _summed_over_batches(
    model: Transformer,
    ids: Tensor,
    iv: Interventions,
    batch_size: int,
    stripes: dict[str, tuple[int, int]],
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Traced passes over ids, batch_size sequences at a time: each stripe's attention summed
    over sequences, (L, H) per score, and the next-token loss summed by position, (T-1,).

    Sums in float64 on the CPU: the means are taken once, at the end.
    """
    cfg = model.config
    sums = {name: np.zeros((cfg.n_layers, cfg.n_heads)) for name in RANK_KEYS}
    loss_sum = np.zeros(ids.shape[1] - 1)  # (T-1,)
    for chunk in ids.split(batch_size):
        chunk = chunk.to(model.device, torch.long)  # (B, T)
        out = model(chunk, None, iv, trace=True)
        for lay, lt in enumerate(out.trace.layers):
            for name, (lag, first) in stripes.items():
                per_seq = _stripe(lt.attn, lag, first).float()  # (B, H)
                sums[name][lay] += per_seq.sum(0).cpu().numpy()
        logits = out.logits[:, :-1].float()  # (B, T-1, V): position t predicts token t + 1
        losses = F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")
        loss_sum += losses.sum(0).cpu().numpy()  # (T-1,)
        del out  # the trace goes before the next batch's is made
    return sums, loss_sum


def _batch_size(model: Transformer, T: int) -> int:
    """Sequences per pass that keep its trace and logits near TRACE_BUDGET bytes: the trace holds
    each layer's (H, T, T) attention and a few (T, D) streams per sequence, the logits (T, V)."""
    cfg = model.config
    per_layer = cfg.n_heads * T * T + 6 * T * cfg.d_model  # attn; concat, z, outputs, streams
    per_seq = (cfg.n_layers * per_layer + T * cfg.vocab_size) * 4  # float32 (or smaller)
    return int(min(MAX_BATCH, max(1, TRACE_BUDGET // per_seq)))


# ---- what a score means -------------------------------------------------------------------------

# A head "formed" when it puts at least this share of its attention where the score looks, on
# average (a clean head of the kind puts most of it there); "weak" when it puts at least
# WEAK_OVER_EVEN times what even attention would, "none" below that.
HEAD_FORMED = 0.3
WEAK_OVER_EVEN = 3.0


def even_score(T: int, first_query: int) -> float:
    """The score of a causal head that spreads each query's weight evenly over the keys it may
    read (1 / (t + 1) on each), averaged over queries t = first_query .. T-1: the level a
    previous-token or induction score must rise above to mean anything."""
    if not 0 <= first_query < T:
        raise ValueError(f"first_query must lie in 0..{T - 1}, got {first_query}")
    return float(np.mean(1.0 / np.arange(first_query + 1, T + 1)))


def head_verdict(score: float, even: float) -> str:
    """ "formed" (score >= HEAD_FORMED), "weak" (>= WEAK_OVER_EVEN x even, below that) or
    "none": what a lesson may say of a head from its score and even attention's (even_score)."""
    if score >= HEAD_FORMED:
        return "formed"
    return "weak" if score >= WEAK_OVER_EVEN * even else "none"


# ---- the probe every page and record of tfviz uses -------------------------------------------

PROBE_SEQS = 32  # sequences behind a model's scores
PROBE_SEED = 20_221_208  # fixed: every page and every record scores the same sequences
PROBE_MAX_PERIOD = 128  # a copy's length at most (a model of 1,024 positions reads 256)
# A character model's probe draws letters: its other characters (digits, brackets) are rare in
# its text, and random letters are what the induction literature probes character models with.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def probe(token_ids, max_len: int, n_seqs: int = PROBE_SEQS) -> Tensor:
    """tfviz's standard probe: n_seqs random sequences of min(max_len // 2, PROBE_MAX_PERIOD)
    tokens from token_ids (PROBE_SEED), each repeated once; (n_seqs, 2 n) int64."""
    period = min(max_len // 2, PROBE_MAX_PERIOD)
    return repeated_random_tokens(n_seqs, period, token_ids, np.random.default_rng(PROBE_SEED))
