"""Previous-token, induction and duplicate-token scores (tfviz.analysis.induction): on hand-made
attention, against a plain double loop on random attention, on repeated random tokens, and on
causal models: a random one (against its own traced pass and an independent cross-entropy), one
built by hand to attend to the previous token, and one whose head is overridden to do so."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import make_model
from tfviz.analysis.induction import (
    InductionScores,
    duplicate_token_score,
    induction_score,
    measure_induction,
    previous_token_score,
    repeated_random_tokens,
)
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.core.model import Encoder

V = 20  # the tiny language model's vocabulary
LM = dict(
    vocab_size=V,
    n_out=V,
    d_model=16,
    n_heads=2,
    n_layers=2,
    d_ff=32,
    max_len=32,
    causal=True,
    dropout=0.0,
    norm="pre",
    pool="none",
)


@pytest.fixture(scope="module")
def lm() -> Encoder:
    """A random tiny causal language model whose heads do not attend almost evenly, so that a
    switch visibly moves their scores: make_model draws every 1-d weight near 0, norms' too,
    which would leave q and k near 0 (norms put near 1 here, q and k made 4 times larger)."""
    model = make_model(3, **LM)
    with torch.no_grad():
        for layer in model.layers:
            layer.norm1.weight.add_(1.0)
            layer.norm2.weight.add_(1.0)
            layer.attn.W_q.weight.mul_(4.0)
            layer.attn.W_k.weight.mul_(4.0)
        model.norm_f.weight.add_(1.0)
    return model.requires_grad_(False)  # as the app loads models


def _causal_uniform(L: int, H: int, T: int) -> np.ndarray:
    """(L, H, T, T): query t spreads evenly over keys 0..t."""
    rows = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    return np.broadcast_to(rows, (L, H, T, T)).copy()


def _random_causal(rng, shape: tuple[int, ...]) -> np.ndarray:
    """Softmax rows of random scores, keys after the query masked."""
    T = shape[-1]
    scores = rng.normal(size=shape) * 2.0
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _loop_score(attn: np.ndarray, lag: int, first_query: int) -> np.ndarray:
    """The plain definition: for every sequence, layer and head, the mean over queries
    t = first_query..T-1 of attn[t, t - lag]; then the mean over sequences."""
    a = attn if attn.ndim == 5 else attn[None]
    B, L, H, T, _ = a.shape
    out = np.zeros((L, H))
    for b in range(B):
        for layer in range(L):
            for h in range(H):
                values = [a[b, layer, h, t, t - lag] for t in range(first_query, T)]
                out[layer, h] += sum(values) / len(values) / B
    return out


# ---- scores on hand-made attention ---------------------------------------------------------------


def test_an_exact_previous_token_pattern_scores_one_and_no_induction():
    L, H, T, n = 2, 3, 12, 6
    attn = np.zeros((L, H, T, T))
    attn[..., 0, 0] = 1.0  # the first query has no previous token: it reads itself
    for t in range(1, T):
        attn[..., t, t - 1] = 1.0
    assert previous_token_score(attn) == pytest.approx(np.ones((L, H)))
    assert induction_score(attn, n) == pytest.approx(np.zeros((L, H)))
    assert duplicate_token_score(attn, n) == pytest.approx(np.zeros((L, H)))
    assert previous_token_score(attn).dtype == np.float32
    assert previous_token_score(attn).shape == (L, H)


@pytest.mark.parametrize("offset", [0, 2])
def test_an_exact_induction_pattern_scores_one(offset):
    L, H, n = 1, 2, 5
    T = offset + 2 * n
    attn = _causal_uniform(L, H, T)
    for t in range(offset + n, T):
        attn[..., t, :] = 0.0
        attn[..., t, t - n + 1] = 1.0  # the token after the earlier occurrence of token t
    assert induction_score(attn, n, offset) == pytest.approx(np.ones((L, H)))
    assert duplicate_token_score(attn, n, offset) == pytest.approx(np.zeros((L, H)))
    # And a duplicate-token head (to t - n) is told apart from it.
    for t in range(offset + n, T):
        attn[..., t, :] = 0.0
        attn[..., t, t - n] = 1.0
    assert duplicate_token_score(attn, n, offset) == pytest.approx(np.ones((L, H)))
    assert induction_score(attn, n, offset) == pytest.approx(np.zeros((L, H)))


def test_a_uniform_causal_pattern_scores_what_is_worked_by_hand():
    # T = 6, period 3: query t puts 1/(t + 1) on each key.
    attn = _causal_uniform(2, 2, 6)
    previous = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 5  # queries 1..5
    repeat = (1 / 4 + 1 / 5 + 1 / 6) / 3  # queries 3..5
    assert np.allclose(previous_token_score(attn), previous)
    assert np.allclose(induction_score(attn, 3), repeat)
    assert np.allclose(duplicate_token_score(attn, 3), repeat)
    # With a prefix of 1 (T = 7): the repeat's queries are 4..6.
    attn = _causal_uniform(1, 1, 7)
    assert np.allclose(induction_score(attn, 3, offset=1), (1 / 5 + 1 / 6 + 1 / 7) / 3)


@pytest.mark.parametrize(
    ("shape", "period", "offset"),
    [
        ((1, 1, 6, 6), 3, 0),
        ((2, 3, 9, 9), 4, 1),
        ((3, 2, 17, 17), 8, 1),
        ((4, 2, 3, 20, 20), 5, 3),  # a batch of 4 sequences, more than two copies' positions
        ((2, 1, 4, 13, 13), 6, 0),
    ],
)
def test_every_score_equals_a_plain_double_loop_on_random_attention(shape, period, offset):
    rng = np.random.default_rng(sum(shape) + period + offset)
    attn = _random_causal(rng, shape)
    first = offset + period
    assert np.allclose(previous_token_score(attn), _loop_score(attn, 1, 1), atol=1e-6)
    assert np.allclose(
        induction_score(attn, period, offset), _loop_score(attn, period - 1, first), atol=1e-6
    )
    assert np.allclose(
        duplicate_token_score(attn, period, offset), _loop_score(attn, period, first), atol=1e-6
    )
    # A tensor scores the same.
    assert np.allclose(induction_score(torch.from_numpy(attn), period, offset),
                       induction_score(attn, period, offset))  # fmt: skip


def test_scores_refuse_what_they_cannot_measure():
    attn = _causal_uniform(1, 2, 10)
    with pytest.raises(ValueError, match="attention has 10 positions; a period of 6 needs at le"):
        induction_score(attn, 6)
    with pytest.raises(ValueError, match="after 1 prefix positions needs at least 11"):
        duplicate_token_score(attn, 5, offset=1)
    with pytest.raises(ValueError, match="period must be at least 3"):
        induction_score(attn, 2)  # the induction target would be the previous token
    for bad in (0, 3.0, True, "4"):
        with pytest.raises(ValueError, match="period"):
            induction_score(attn, bad)
    with pytest.raises(ValueError, match="offset"):
        induction_score(attn, 3, offset=-1)
    for wrong in (attn[0], attn[None, None], attn[..., :-1]):  # rank 3, rank 6, not square
        with pytest.raises(ValueError, match=r"\(L, H, T, T\) or \(B, L, H, T, T\)"):
            previous_token_score(wrong)
    nan = attn.copy()
    nan[0, 0, 3, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        previous_token_score(nan)


# ---- repeated random tokens ----------------------------------------------------------------------


def test_repeated_random_tokens_repeat_keep_the_prefix_and_draw_only_the_given_ids():
    ids = [3, 5, 7, 11]
    rows = repeated_random_tokens(50, 9, ids, np.random.default_rng(1), prefix=(0, 1))
    assert rows.shape == (50, 2 + 18) and rows.dtype == torch.int64
    assert (rows[:, :2] == torch.tensor([0, 1])).all()
    assert torch.equal(rows[:, 2:11], rows[:, 11:])
    assert set(rows[:, 2:].unique().tolist()) == set(ids)  # every id drawn, no other
    assert not (rows[:, 2:11] == rows[:1, 2:11]).all()  # not one row fifty times
    again = repeated_random_tokens(50, 9, ids, np.random.default_rng(1), prefix=(0, 1))
    assert torch.equal(rows, again)
    # The ids are a set: their order and duplicates do not change the draw.
    shuffled = repeated_random_tokens(50, 9, [11, 7, 7, 5, 3], np.random.default_rng(1), (0, 1))
    assert torch.equal(rows, shuffled)
    other = repeated_random_tokens(50, 9, ids, np.random.default_rng(2), prefix=(0, 1))
    assert not torch.equal(rows, other)
    plain = repeated_random_tokens(2, 3, torch.tensor([4]), np.random.default_rng(0))
    assert plain.tolist() == [[4] * 6, [4] * 6]


def test_repeated_random_tokens_refuse_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="empty"):
        repeated_random_tokens(2, 4, [], rng)
    with pytest.raises(ValueError, match="period must be at least 3"):
        repeated_random_tokens(2, 2, [1, 2], rng)
    with pytest.raises(ValueError, match="n_seqs"):
        repeated_random_tokens(0, 4, [1, 2], rng)
    with pytest.raises(ValueError, match="token_ids"):
        repeated_random_tokens(2, 4, [1.5, 2], rng)
    with pytest.raises(ValueError, match="prefix"):
        repeated_random_tokens(2, 4, [1, 2], rng, prefix=(-1,))
    with pytest.raises(TypeError, match="Generator"):
        repeated_random_tokens(2, 4, [1, 2], 0)


# ---- the model -----------------------------------------------------------------------------------


def _independent_losses(logits: torch.Tensor, ids: torch.Tensor, period: int, offset: int):
    """Mean cross-entropy of the first copy's tokens 1..n-1 and of the repeat's tokens but its
    first, one target at a time (log-softmax of the logits at the position before it)."""
    logp = torch.log_softmax(logits.double(), -1)  # (N, T, V)
    N, T = ids.shape

    def mean_loss(targets) -> float:
        losses = [-logp[b, j - 1, ids[b, j]].item() for b in range(N) for j in targets]
        return sum(losses) / len(losses)

    first = range(offset + 1, offset + period)
    repeat = range(offset + period + 1, T)
    return mean_loss(first), mean_loss(repeat)


@pytest.mark.parametrize(("period", "prefix"), [(7, ()), (5, (0,))])
def test_measure_induction_equals_the_scores_of_a_plain_traced_pass(lm, period, prefix):
    ids = repeated_random_tokens(7, period, range(1, V), np.random.default_rng(5), prefix)
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    got = measure_induction(
        lm, ids, offset=len(prefix), batch_size=3
    )  # three passes: 3, 3 and 1 sequences
    for k, v in lm.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed"
    assert not lm.training

    offset = len(prefix)
    with torch.no_grad():
        out = lm(ids, trace=True)
    attn = torch.stack([lt.attn for lt in out.trace.layers], 1).numpy()  # (N, L, H, T, T)
    assert np.allclose(got.previous_token, previous_token_score(attn), atol=1e-6)
    assert np.allclose(got.induction, induction_score(attn, period, offset), atol=1e-6)
    assert np.allclose(got.duplicate, duplicate_token_score(attn, period, offset), atol=1e-6)

    first, repeat = _independent_losses(out.logits, ids, period, offset)
    assert got.loss_first == pytest.approx(first, abs=1e-5)
    assert got.loss_repeat == pytest.approx(repeat, abs=1e-5)
    assert got.in_context_drop == pytest.approx(first - repeat, abs=1e-5)
    T = ids.shape[1]
    assert got.loss_by_position.shape == (T - 1,)
    logp = torch.log_softmax(out.logits.double(), -1)
    at_10 = -logp[:, 9].gather(-1, ids[:, 10:11]).mean().item()  # predicting token 10
    assert got.loss_by_position[9] == pytest.approx(at_10, abs=1e-5)
    assert (got.period, got.offset, got.n_seqs) == (period, offset, 7)
    assert got.interventions.is_default
    # Even attention's scores on this probe: what the scoring functions give a uniform pattern.
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # (T, T) causal rows
    assert got.even() == pytest.approx(induction_score(uniform[None, None], period, offset)[0, 0])
    assert got.even("previous_token") == pytest.approx(
        previous_token_score(uniform[None, None])[0, 0]
    )
    # One pass, or a batch size of its own choosing, gives the same numbers.
    whole = measure_induction(lm, ids, offset=offset, period=period, batch_size=64)
    auto = measure_induction(lm, ids, offset=offset)
    for other in (whole, auto):
        assert np.allclose(other.induction, got.induction, atol=1e-6)
        assert np.allclose(other.loss_by_position, got.loss_by_position, atol=1e-5)


def test_measure_induction_passes_the_switches_on(lm):
    ids = repeated_random_tokens(4, 6, range(V), np.random.default_rng(8))
    iv = Interventions(w_o={0: "identity"})  # W_o off in layer 0 only
    base = measure_induction(lm, ids)
    switched = measure_induction(lm, ids, iv)
    assert switched.interventions == iv
    # Layer 0's attention is made before its W_o; layer 1 reads what layer 0 wrote.
    assert np.allclose(switched.previous_token[0], base.previous_token[0], atol=1e-6)
    assert np.allclose(switched.induction[0], base.induction[0], atol=1e-6)
    assert not np.allclose(switched.previous_token[1], base.previous_token[1], atol=1e-4)
    assert not np.allclose(switched.induction[1], base.induction[1], atol=1e-4)
    assert switched.loss_repeat != pytest.approx(base.loss_repeat, abs=1e-4)
    with torch.no_grad():
        out = lm(ids, interventions=iv, trace=True)
    attn = torch.stack([lt.attn for lt in out.trace.layers], 1).numpy()
    assert np.allclose(switched.induction, induction_score(attn, 6), atol=1e-6)


def test_a_head_overridden_to_the_previous_token_scores_exactly_one(lm):
    ids = repeated_random_tokens(3, 5, range(V), np.random.default_rng(9), prefix=(0,))
    got = measure_induction(lm, ids, Interventions(patterns=[(1, 0, "previous")]), offset=1)
    assert got.previous_token[1, 0] == pytest.approx(1.0, abs=1e-6)
    assert got.induction[1, 0] == pytest.approx(0.0, abs=1e-6)
    assert got.duplicate[1, 0] == pytest.approx(0.0, abs=1e-6)
    assert got.previous_token[1, 1] < 0.9  # its neighbour keeps its own pattern


def _previous_token_model(T: int = 16) -> Encoder:
    """One causal attention-only layer with one head that reads the previous token by its
    position alone: x_t = 4 e_t (token embeddings zero), k = x, q = 8 S x with S e_t = e_{t-1},
    so the score of key t - 1 is 8 * 4 * 4 / sqrt(16) = 32 and of every other key 0."""
    cfg = ModelConfig(
        vocab_size=V, n_out=V, d_model=16, n_heads=1, n_layers=1, max_len=T, causal=True,
        dropout=0.0, ffn=False, norm="post", pool="none",
    )  # fmt: skip
    model = Encoder(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.pos[0] = 4.0 * torch.eye(T, 16)  # position t: 4 e_t
        attn = model.layers[0].attn
        attn.W_k.weight.copy_(torch.eye(16))
        attn.W_q.weight.copy_(8.0 * torch.eye(16).roll(-1, dims=0))  # (S x)_{t-1} = x_t
        attn.W_v.weight.copy_(torch.eye(16))
        attn.W_o.weight.copy_(torch.eye(16))
    return model.requires_grad_(False)


def test_a_model_built_to_read_the_previous_token_scores_so():
    model = _previous_token_model()
    ids = repeated_random_tokens(4, 7, range(V), np.random.default_rng(4), prefix=(0,))
    got = measure_induction(model, ids, offset=1)
    assert got.previous_token.shape == (1, 1)
    assert got.previous_token[0, 0] > 0.99
    assert got.induction[0, 0] < 0.01 and got.duplicate[0, 0] < 0.01
    # With the head's own weights swapped for a uniform pattern, the score falls.
    flat = measure_induction(model, ids, Interventions(patterns=[(0, 0, "uniform")]), offset=1)
    assert flat.previous_token[0, 0] < 0.5


def test_measure_induction_refuses_what_it_cannot_measure(lm):
    ids = repeated_random_tokens(2, 5, range(V), np.random.default_rng(0))
    broken = ids.clone()
    broken[0, -1] = (broken[0, 4] + 1) % V
    with pytest.raises(ValueError, match="do not repeat with period 5"):
        measure_induction(lm, broken)
    with pytest.raises(ValueError, match="pass offset"):
        measure_induction(lm, ids[:, :-1])
    with pytest.raises(ValueError, match="a period of 6 needs at least 12"):
        measure_induction(lm, ids, period=6)
    with pytest.raises(ValueError, match="ids must lie in"):
        measure_induction(lm, ids + V)
    with pytest.raises(ValueError, match="batch_size"):
        measure_induction(lm, ids, batch_size=0)
    with pytest.raises(TypeError, match="Interventions"):
        measure_induction(lm, ids, {"w_o": "identity"})
    encoder = make_model(0, vocab_size=V, n_out=V, max_len=16)  # not causal
    with pytest.raises(ValueError, match="causal language model"):
        measure_induction(encoder, ids)
    training = make_model(0, **LM).train()
    with pytest.raises(ValueError, match="training mode"):
        measure_induction(training, ids)


def test_best_and_ranked_read_the_scores():
    scores = InductionScores(
        previous_token=np.array([[0.9, 0.1], [0.2, 0.3]], dtype=np.float32),
        induction=np.array([[0.0, 0.2], [0.7, 0.2]], dtype=np.float32),
        duplicate=np.array([[0.1, 0.5], [0.0, 0.0]], dtype=np.float32),
        loss_by_position=np.zeros(9, dtype=np.float32),
        loss_first=3.0,
        loss_repeat=1.25,
        period=5,
        offset=0,
        n_seqs=1,
        interventions=Interventions(),
    )
    assert scores.in_context_drop == 1.75
    layer, head, best = scores.best()
    assert (layer, head) == (1, 0) and best == pytest.approx(0.7)
    ranked = scores.ranked()
    assert [(lay, h) for lay, h, _, _ in ranked] == [
        (1, 0),
        (0, 1),
        (1, 1),
        (0, 0),
    ]  # ties: L-major
    assert ranked[0] == pytest.approx((1, 0, 0.2, 0.7))
    assert [(lay, h) for lay, h, _, _ in scores.ranked("previous_token")][0] == (0, 0)
    assert [(lay, h) for lay, h, _, _ in scores.ranked("duplicate")][0] == (0, 1)
    with pytest.raises(ValueError, match="by must be one of"):
        scores.ranked("loss")
