"""The decoder switches of the one model (tfviz.core.model, tfviz.core.config) checked exactly:
causal attention, grouped-query heads, rotary positions, RMSNorm, the gated feed-forward net and
the tied head, against identities and torch's own modules; and W_o's identities on every decoder.

Every test compares with something written independently of the code under test (a hand-built
model, a formula, torch's module), so a wrong mask, a misplaced head or a dropped term fails it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import make_model
from tests.core.test_model import GPT2_LIKE, LLAMA_LIKE
from tfviz.core import modes, wo
from tfviz.core.config import ModelConfig
from tfviz.core.model import (
    Encoder,
    FeedForward,
    layer_norm,
    make_norm,
    override_patterns,
    rotary_angles,
    rotate,
)
from tfviz.core.packing import pack, unpack

ATOL = 1e-5
# The trainer's causal toy model (learned positions, post-norm) beside the two decoder families.
CAUSAL_TOY = dict(causal=True)
DECODERS = {"toy": CAUSAL_TOY, "gpt2": GPT2_LIKE, "llama": LLAMA_LIKE}
PAD = 0  # any id: padding is what pad_mask says


@pytest.fixture(params=list(DECODERS), ids=list(DECODERS))
def decoder(request) -> Encoder:
    return make_model(**DECODERS[request.param])


def _ids(B: int, T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 12, (B, T), generator=torch.Generator().manual_seed(seed))


def _left_padded(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """ids and pad_mask (B, T) with each row's tokens at the right end, padding on the left."""
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), PAD, dtype=torch.long)
    pad = torch.ones(len(rows), T, dtype=torch.bool)
    for b, r in enumerate(rows):
        ids[b, T - len(r) :] = r
        pad[b, T - len(r) :] = False
    return ids, pad


ROWS = [_ids(1, 8, 5)[0], _ids(1, 4, 6)[0], _ids(1, 1, 7)[0], _ids(1, 6, 8)[0]]


# ---- causality --------------------------------------------------------------------------------
@pytest.mark.parametrize("trace", [True, False])
def test_a_later_token_never_changes_an_earlier_position(decoder, trace):
    ids = _ids(2, 8)
    for j in (7, 4, 1):
        changed = ids.clone()
        changed[:, j] = (changed[:, j] + 5) % 12
        with torch.no_grad():
            a = decoder(ids, trace=trace)
            b = decoder(changed, trace=trace)
        torch.testing.assert_close(a.logits[:, :j], b.logits[:, :j], atol=1e-6, rtol=0)
        assert not torch.allclose(a.logits[:, j], b.logits[:, j], atol=1e-4)  # it reaches j
        if trace:
            for la, lb in zip(a.trace.layers, b.trace.layers, strict=True):
                for site in ("resid_pre", "concat", "attn_out", "resid_mid", "resid_out"):
                    x, y = getattr(la, site)[:, :j], getattr(lb, site)[:, :j]
                    torch.testing.assert_close(x, y, atol=1e-6, rtol=0, msg=site)
                torch.testing.assert_close(la.attn[:, :, :j], lb.attn[:, :, :j], atol=1e-6, rtol=0)
                torch.testing.assert_close(la.z[:, :, :j], lb.z[:, :, :j], atol=1e-6, rtol=0)


def test_an_encoder_does_read_later_tokens():
    # The same check on the encoder fails: the test above can tell the two apart.
    model = make_model()
    ids = _ids(2, 8)
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 5) % 12
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    assert not torch.allclose(a[:, 0], b[:, 0], atol=1e-4)


@pytest.mark.parametrize("padded", [False, True])
def test_weights_above_the_diagonal_are_exactly_zero_and_rows_sum_to_one(decoder, padded):
    ids, pad = _left_padded(ROWS) if padded else (_ids(3, 8), None)
    with torch.no_grad():
        out = decoder(ids, pad)
    real = torch.ones_like(ids, dtype=torch.bool) if pad is None else ~pad
    for lt in out.trace.layers:
        A = lt.attn  # (B, H, T, T)
        assert torch.equal(A.triu(1), torch.zeros_like(A))
        sums = A.sum(-1)  # (B, H, T)
        queries = real[:, None, :].expand_as(sums)
        torch.testing.assert_close(sums[queries], torch.ones_like(sums[queries]))
        if pad is not None:
            assert not sums[~queries].any()  # a padded query reads nothing
            assert not A.masked_select(pad[:, None, None, :].expand_as(A)).any()  # nor is read


# ---- traced path = fused path; a padded batch = each sequence alone ------------------------------
@pytest.mark.parametrize("padded", [False, True])
def test_traced_and_fused_paths_agree(decoder, padded):
    ids, pad = _left_padded(ROWS) if padded else (_ids(3, 8), None)
    with torch.no_grad():
        traced = decoder(ids, pad, trace=True).logits
        fused = decoder(ids, pad, trace=False).logits
    assert torch.isfinite(traced).all() and torch.isfinite(fused).all()
    torch.testing.assert_close(traced, fused, atol=ATOL, rtol=0)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("trace", [True, False])
def test_a_padded_batch_gives_each_sequence_its_logits_alone(decoder, side, trace):
    # Left: how a decoder's batch is padded; right: how the tasks' training batches are.
    if side == "left":
        ids, pad = _left_padded(ROWS)
    else:
        ids, pad = _left_padded([r.flip(0) for r in ROWS])
        ids, pad = ids.flip(1), pad.flip(1)
    with torch.no_grad():
        batch = decoder(ids, pad, trace=trace).logits
        for b, row in enumerate(ROWS):
            alone = decoder(row[None], trace=trace).logits[0]
            torch.testing.assert_close(batch[b][~pad[b]], alone, atol=ATOL, rtol=0)


def test_positions_count_real_tokens_in_a_left_padded_batch():
    model = make_model(**CAUSAL_TOY)
    _, pad = _left_padded(ROWS)
    pos = model.positions_of(pad)
    for b, row in enumerate(ROWS):
        assert pos[b][~pad[b]].tolist() == list(range(len(row)))
    assert make_model().positions_of(pad) is None  # an encoder: its index


# ---- grouped-query attention ------------------------------------------------------------------
def test_grouped_query_attention_equals_multi_head_with_repeated_key_value_heads():
    gqa = make_model(**LLAMA_LIKE)
    cfg = gqa.config
    assert cfg.kv_heads == 2 < cfg.n_heads == 4
    full = Encoder(ModelConfig(**{**cfg.to_dict(), "n_kv_heads": 0})).eval()
    state = gqa.state_dict()
    d_k = cfg.d_k
    for key in list(state):
        if ".W_k." in key or ".W_v." in key:
            # Query head h reads key/value head kv_head(h): its rows, written out head by head.
            blocks = state[key].split(d_k, dim=0)
            state[key] = torch.cat([blocks[cfg.kv_head(h)] for h in range(cfg.n_heads)])
    full.load_state_dict(state)
    assert [cfg.kv_head(h) for h in range(4)] == [0, 0, 1, 1]  # consecutive heads share
    ids, pad = _left_padded(ROWS)
    for trace in (False, True):
        with torch.no_grad():
            a = gqa(ids, pad, trace=trace)
            b = full(ids, pad, trace=trace)
        torch.testing.assert_close(a.logits, b.logits, atol=ATOL, rtol=0)
    for la, lb in zip(a.trace.layers, b.trace.layers, strict=True):
        torch.testing.assert_close(la.attn, lb.attn, atol=ATOL, rtol=0)
        torch.testing.assert_close(la.v, lb.v, atol=ATOL, rtol=0)
    assert gqa.config.n_params < full.config.n_params  # fewer key/value weights


# ---- rotary positions -------------------------------------------------------------------------
def _rotated(x: torch.Tensor, positions: list[int], theta: float) -> torch.Tensor:
    """x (T, d_k) at positions, turned by rotate(rotary_angles(...))."""
    cos, sin = rotary_angles(torch.tensor([positions]), x.shape[-1], theta, x.dtype)
    return rotate(x[None, None], cos, sin)[0, 0]


@pytest.mark.parametrize("theta", [10_000.0, 100.0])
def test_a_rotary_score_depends_only_on_the_offset(theta):
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g), torch.randn(8, generator=g)
    x = torch.stack([q, k])  # (2, d_k): q at the first position, k at the second

    def score(m: int, n: int) -> float:
        rq, rk = _rotated(x, [m, n], theta)
        return float(rq @ rk)

    for m, n in [(3, 1), (5, 5), (2, 7), (0, 9)]:
        for shift in (1, 4, 20):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-5)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-3)  # the offset does matter
    assert score(0, 0) == pytest.approx(float(q @ k), abs=1e-6)  # offset 0: no turn at all


def test_rotary_equals_a_complex_rotation_of_the_split_halves():
    d_k, theta, T = 8, 10_000.0, 10
    x = torch.randn(T, d_k, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    got = _rotated(x, list(range(T)), theta).numpy()
    half = d_k // 2
    z = x[:, :half].numpy() + 1j * x[:, half:].numpy()  # pair (i, i + d_k/2) as one number
    freq = theta ** (-2.0 * np.arange(half) / d_k)
    turned = z * np.exp(1j * np.arange(T)[:, None] * freq[None, :])
    want = np.concatenate([turned.real, turned.imag], axis=1)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_rotary_model_tells_token_orders_apart():
    # No position table: order reaches the model only through the turned q and k. (Norm weights
    # at 1: make_model's small random ones leave the scores too flat to see it.)
    model = make_model(**LLAMA_LIKE)
    assert not hasattr(model, "pos")
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.RMSNorm):
                m.weight.fill_(1.0)
        a = model(torch.tensor([[1, 2, 3, 4]]))
        b = model(torch.tensor([[2, 1, 3, 4]]))
    # The last query reads the same keys in another order; without positions its weights would
    # only swap places with the keys.
    swapped = a.trace.layers[0].attn[0, :, 3][:, [1, 0, 2, 3]]
    assert not torch.allclose(b.trace.layers[0].attn[0, :, 3], swapped, atol=1e-4)
    assert not torch.allclose(a.logits[0, -1], b.logits[0, -1], atol=1e-4)


def test_a_value_embedding_runs_with_rotary_positions():
    # embed "value" once took its dtype from the position table, which a rotary model lacks.
    model = make_model(embed="value", positions="rotary", causal=True)
    with torch.no_grad():
        out = model(torch.tensor([[1, 2, 3]]))
    assert torch.isfinite(out.logits).all()


# ---- RMSNorm and the gated feed-forward net ----------------------------------------------------
def test_rms_norm_equals_torchs_rms_norm_and_its_formula():
    norm = nn.RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        norm.weight.normal_(1.0, 0.3)
    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(2)) * 3 + 1
    got = layer_norm(x, norm)
    torch.testing.assert_close(got, norm(x), atol=1e-6, rtol=0)
    by_hand = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(got, by_hand, atol=1e-5, rtol=0)
    # Stacked weights (R, D) (tfviz.training.ensemble): run r's own weight on x[r].
    stacked = nn.RMSNorm(16, eps=1e-5)
    stacked.weight = nn.Parameter(torch.randn(3, 16))
    rows = layer_norm(x, stacked)
    for r in range(3):
        one = nn.RMSNorm(16, eps=1e-5)
        one.weight = nn.Parameter(stacked.weight[r])
        torch.testing.assert_close(rows[r], one(x[r]), atol=1e-6, rtol=0)


def test_an_rms_config_builds_rms_norms_with_its_eps():
    cfg = ModelConfig(vocab_size=5, n_out=2, d_model=8, n_heads=2, norm_type="rms", norm_eps=1e-6)
    norm = make_norm(cfg)
    assert isinstance(norm, nn.RMSNorm) and norm.eps == 1e-6 and norm.weight.shape == (8,)
    model = make_model(**LLAMA_LIKE)
    norms = [m for m in model.modules() if isinstance(m, (nn.RMSNorm, nn.LayerNorm))]
    assert norms and all(isinstance(m, nn.RMSNorm) for m in norms)


def test_the_gated_feed_forward_net_is_fc2_of_silu_fc1_times_up():
    cfg = ModelConfig(
        vocab_size=5, n_out=2, d_model=8, n_heads=2, d_ff=12, mlp="gated", activation="silu",
        dropout=0.0,
    )  # fmt: skip
    torch.manual_seed(4)
    ff = FeedForward(cfg).eval()
    x = torch.randn(2, 3, 8)

    def lin(m: nn.Linear, v: torch.Tensor) -> torch.Tensor:
        return v @ m.weight.T + m.bias

    gate = lin(ff.fc1, x)
    want = lin(ff.fc2, gate * torch.sigmoid(gate) * lin(ff.up, x))
    torch.testing.assert_close(ff(x), want, atol=1e-6, rtol=0)
    plain = FeedForward(ModelConfig(**{**cfg.to_dict(), "mlp": "plain"}))
    assert not hasattr(plain, "up")


# ---- W_o's identities on every decoder ---------------------------------------------------------
ALL_MODES = [*modes.SWITCH, *modes.TAKEN_APART, modes.rank(1), modes.rank(5)]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_head_terms_plus_bias_are_attn_out_in_every_mode(decoder, mode):
    ids, pad = _left_padded(ROWS)
    for ablate in ((), ((0, 1), (1, 3))):
        with torch.no_grad():
            out = decoder(ids, pad, w_o=mode, ablate_heads=ablate)
        for i, lt in enumerate(out.trace.layers):
            assert lt.w_o_mode == mode
            rebuilt = lt.head_contributions().sum(dim=1) + lt.b_o
            torch.testing.assert_close(rebuilt, lt.attn_out, atol=ATOL, rtol=0)
            W_eff, b_eff = wo.effective(
                decoder.layers[i].attn.W_o.weight, decoder.layers[i].attn.W_o.bias, mode, 4
            )
            torch.testing.assert_close(lt.W_o, W_eff, atol=0, rtol=0)
            torch.testing.assert_close(lt.b_o, b_eff, atol=0, rtol=0)
            for layer, head in ablate:
                if layer == i:
                    assert not lt.z[:, head].any()
            if mode == "identity":
                assert torch.equal(lt.attn_out, lt.concat)  # exactly: W_o switched off
            if mode == "zero":
                assert not lt.attn_out.any()
        with torch.no_grad():
            fused = decoder(ids, pad, w_o=mode, ablate_heads=ablate, trace=False).logits
        torch.testing.assert_close(fused, out.logits, atol=ATOL, rtol=0)


def test_concat_is_the_heads_z_side_by_side(decoder):
    with torch.no_grad():
        out = decoder(_ids(2, 6))
    for lt in out.trace.layers:
        B, H, T, d_k = lt.z.shape
        torch.testing.assert_close(lt.concat, lt.z.transpose(1, 2).reshape(B, T, H * d_k))


# ---- replaced attention patterns ---------------------------------------------------------------
def test_a_uniform_pattern_on_a_causal_model_spreads_over_keys_up_to_the_query():
    model = make_model(**CAUSAL_TOY)
    ids, pad = _left_padded(ROWS)
    with torch.no_grad():
        out = model(ids, pad, patterns=[(0, 2, "uniform")])
    A = out.trace.layers[0].attn[:, 2]  # (B, T, T)
    T = ids.shape[1]
    for b in range(len(ROWS)):
        real = (~pad[b]).nonzero().flatten().tolist()
        for i in range(T):
            seen = [j for j in real if j <= i]
            want = torch.zeros(T)
            if i in real:
                want[seen] = 1.0 / len(seen)
            torch.testing.assert_close(A[b, i], want, atol=1e-7, rtol=0)
    # Plain encoder's uniform row: every real key alike, for every query.
    with torch.no_grad():
        enc = make_model()(_ids(1, 5), patterns=[(0, 0, "uniform")])
    torch.testing.assert_close(enc.trace.layers[0].attn[0, 0], torch.full((5, 5), 0.2))


def test_an_anti_diagonal_pattern_is_refused_on_a_causal_model():
    model = make_model(**CAUSAL_TOY)
    with pytest.raises(ValueError, match="cannot read a later token"):
        model(_ids(1, 5), patterns=[(0, 0, "anti_diagonal")])
    with pytest.raises(ValueError, match="cannot read a later token"):
        model(_ids(1, 5), patterns=[(1, 3, "anti_diagonal")], trace=False)
    make_model()(_ids(1, 5), patterns=[(0, 0, "anti_diagonal")])  # an encoder may


def test_a_previous_token_pattern_never_reads_left_padding():
    ids, pad = _left_padded(ROWS)
    attn = torch.full((len(ROWS), 1, ids.shape[1], ids.shape[1]), 0.5)
    got = override_patterns(attn, ((0, "previous"),), pad, causal=True)[:, 0]
    for b in range(len(ROWS)):
        first = int((~pad[b]).nonzero()[0])
        for i in range(ids.shape[1]):
            want = torch.zeros(ids.shape[1])
            if i >= first:
                want[max(i - 1, first)] = 1.0
            assert torch.equal(got[b, i], want), (b, i)


# ---- the tied head -----------------------------------------------------------------------------
def test_a_tied_head_is_the_embedding_itself():
    model = make_model(**GPT2_LIKE)
    assert model.head.weight is model.embed.weight
    assert model.head.weight.data_ptr() == model.embed.weight.data_ptr()
    unique = {id(p): p for p in model.parameters()}  # parameters() lists a shared one once
    assert model.config.n_params == sum(p.numel() for p in unique.values())
    untied = make_model(**{**GPT2_LIKE, "tie_head": False})
    assert untied.config.n_params - model.config.n_params == 12 * 16  # one V x D matrix less
    # Trained, they stay one matrix: the embedding's gradient and the head's add up.
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(_ids(2, 5), trace=False).logits.square().mean()
    loss.backward()
    opt.step()
    assert model.head.weight is model.embed.weight
    # The logits are the final hidden states read out with the embedding matrix.
    model.eval()
    with torch.no_grad():
        out = model(_ids(2, 5))
        hidden = layer_norm(out.trace.layers[-1].resid_out, model.norm_f)
        want = hidden @ model.embed.weight.T + model.head.bias
    torch.testing.assert_close(out.logits, want, atol=ATOL, rtol=0)


# ---- the packed pass (tfviz.training.ensemble) runs causally too --------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        dict(causal=True, pool="none"),
        dict(causal=True, pool="last"),
        dict(
            causal=True, norm="pre", norm_type="rms", mlp="gated", activation="silu",
            n_kv_heads=2, pool="none",
        ),
    ],
    ids=["per-token", "last-token", "llama-ish"],
)  # fmt: skip
@pytest.mark.parametrize("side", ["right", "left"])
def test_the_packed_causal_pass_equals_the_plain_one(extra, side):
    from tfviz.training import ensemble as En

    cfg = ModelConfig(vocab_size=12, n_out=5, d_model=16, n_heads=4, d_ff=32, max_len=10,
                      dropout=0.0, **extra)  # fmt: skip
    blocks = En.layout(cfg)
    states = [En.initial_state(cfg, s) for s in (0, 1)]
    flat = torch.stack([En.flatten(blocks, st) for st in states])
    runs = []
    for r in range(2):
        rows = [_ids(1, n, 10 * r + n)[0] for n in (7, 3, 5, 1)]
        ids, pad = _left_padded(rows)
        if side == "right":
            ids, pad = _left_padded([x.flip(0) for x in rows])
            ids, pad = ids.flip(1), pad.flip(1)
        runs.append((ids, pad))
    ids, pad = torch.stack([i for i, _ in runs]), torch.stack([p for _, p in runs])
    packing = pack(ids, pad)
    with torch.no_grad():
        got = En.forward(Encoder(cfg), blocks, flat, packing, ["learned"] * 2, False)
        if cfg.pool == "none":
            got = unpack(packing, got)
        for r, state in enumerate(states):
            model = Encoder(cfg).eval()
            model.load_state_dict(state)
            want = model(ids[r], pad[r], trace=False).logits
            mine = got[r]
            if cfg.pool == "none":
                want, mine = want[~pad[r]], mine[~pad[r]]
            torch.testing.assert_close(mine, want, atol=ATOL, rtol=0)
            encoder = Encoder(ModelConfig(**{**cfg.to_dict(), "causal": False})).eval()
            encoder.load_state_dict(state)
            other = encoder(ids[r], pad[r], trace=False).logits
            if cfg.pool == "none":
                other = other[~pad[r]]
            assert not torch.allclose(other, want, atol=1e-4)  # the mask is what differs


# ---- pooling at the last real token ------------------------------------------------------------
def test_last_pooling_reads_the_last_real_token_on_either_side():
    cfg = dict(causal=True, pool="last")
    model = make_model(**cfg)
    per_token = make_model(**{**cfg, "pool": "none"})
    per_token.load_state_dict(model.state_dict())
    ids, pad = _left_padded(ROWS)
    with torch.no_grad():
        pooled = model(ids, pad).logits
        for b, row in enumerate(ROWS):
            alone = per_token(row[None]).logits[0, -1]
            torch.testing.assert_close(pooled[b], alone, atol=ATOL, rtol=0)
            right = model(row[None]).logits[0]
            torch.testing.assert_close(pooled[b], right, atol=ATOL, rtol=0)
    assert math.isfinite(float(pooled.sum()))


# ---- the trainer's causal toy model (the Train form's box) -------------------------------------
def test_a_causal_model_is_offered_exactly_for_the_tasks_it_can_learn():
    from tfviz.core.tasks import TASKS

    rng = np.random.default_rng(0)
    for task in TASKS.values():
        if task.kind != "token":
            # One answer per sequence, read at the last token, which has seen every token.
            assert task.learns_causally and task.model_pool(causal=True) == "last"
            continue
        # A per-token task answers at some position with a token that comes later: changing
        # only the last token changes an earlier position's answer.
        assert not task.learns_causally and task.model_pool(causal=True) == "none"
        text = task.random_example(rng)
        while len(text) < 3:
            text = task.random_example(rng)
        later = [text[:-1] + ch for ch in task.alphabet]
        earlier = {tuple(task.solve_tokens(t)[:-1]) for t in later}
        assert len(earlier) > 1, task.name


@pytest.mark.parametrize("name", ["sum", "max_position", "balanced", "sort"])
def test_a_tasks_causal_config_reads_its_answer_where_a_causal_model_can(name):
    from tfviz.core.tasks import get_task

    task = get_task(name)
    encoder = task.model_config(d_model=16, n_heads=2)
    causal = task.model_config(d_model=16, n_heads=2, causal=True)
    assert not encoder.causal and encoder.pool == task.pool
    assert causal.causal and causal.pool == ("none" if task.kind == "token" else "last")
    assert {**causal.to_dict(), "causal": False, "pool": task.pool} == encoder.to_dict()
    task.check_config(causal)
    task.check_config(encoder)


def test_the_job_spec_carries_causal_and_refuses_it_for_a_per_token_task():
    from tfviz.messages import Refused
    from tfviz.serve.work import JobSpec

    config = JobSpec(task="balanced", name="b", causal=True).model_config()
    assert config.causal and config.pool == "last" and config.positions == "learned"
    assert config.norm == "post"  # as the form's encoder: only the attention's reach differs
    assert not JobSpec(task="balanced", name="b").model_config().causal
    with pytest.raises(Refused) as refused:
        JobSpec(task="reverse", name="r", causal=True).model_config()
    assert refused.value.message.key == "causal_per_token"


def test_the_command_line_trains_a_causal_model(tmp_path, capsys):
    from tfviz.cli.train import main
    from tfviz.training.checkpoint import load_checkpoint

    out = tmp_path / "c.safetensors"
    threads = torch.get_num_threads()  # main sets the process's; later tests want theirs
    try:
        assert main(["--task", "max_position", "--out", str(out), "--steps", "2", "--causal"]) == 0
        with pytest.raises(SystemExit):
            main(["--task", "sort", "--out", str(tmp_path / "s.safetensors"), "--causal"])
    finally:
        torch.set_num_threads(threads)
    _, meta = load_checkpoint(out)
    assert meta.config.causal and meta.config.pool == "last"
    assert "one answer per sequence" in capsys.readouterr().err
