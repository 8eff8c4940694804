"""Runs trained together (tfviz.training.ensemble) are the runs tfviz.training.train.train makes one
at a time: the batched pass is the Encoder's own code and equals its plain pass, token packing loses
nothing, and with dropout 0 the loss curves and weights match train()'s; with dropout they agree
in distribution."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tfviz.core import model as model_module
from tfviz.core import wo
from tfviz.core.config import ModelConfig
from tfviz.core.model import Encoder
from tfviz.core.packing import pack, pack_targets, unpack
from tfviz.core.tasks import IGNORE, get_task
from tfviz.training import ensemble as En
from tfviz.training.train import train

TINY = dict(d_model=8, n_heads=2, d_ff=16, n_layers=2)
ATOL = 1e-5


def _batch(task, seeds, batch_size=6, min_len=None, max_len=None):
    """(R, B, T) ids, pad_mask and targets: one batch per seed, padded to a common length."""
    drawn = [task.sample(batch_size, np.random.default_rng(s), min_len, max_len) for s in seeds]
    return En.stack_batches(task, drawn)


def state_with_w_o(config, seed, w_o):
    state = En.initial_state(config, seed)
    En.set_w_o(state, config, w_o)
    return state


# ---- the forward pass ---------------------------------------------------------------------------
CONFIGS = [
    ("sort", {}),  # per-token outputs, post-norm
    ("reverse", {"norm": "pre"}),  # pre-norm: a final LayerNorm
    ("sum", {}),  # mean pooling, regression
    ("sum", {"embed": "value", "norm": "pre"}),  # the id as a number (seed 002)
    ("max_position", {}),  # first-token pooling
    ("sort", {"ffn": False}),  # attention-only layers
]
if "activation" in ModelConfig.__dataclass_fields__:
    CONFIGS.append(("balanced", {"activation": "gelu"}))
    CONFIGS.append(("balanced", {"activation": "gelu_tanh"}))  # the stack must not fall to relu
if "causal" in ModelConfig.__dataclass_fields__:
    CONFIGS.append(("sort", {"causal": True}))  # the Train form's causal toy, per token
    CONFIGS.append(("max_position", {"causal": True}))  # pooled: read at the last token
    CONFIGS.append(
        ("balanced", {"causal": True, "norm": "pre", "norm_type": "rms", "mlp": "gated",
                      "activation": "silu", "n_kv_heads": 1})
    )  # fmt: skip


@pytest.mark.parametrize("name, extra", CONFIGS)
def test_the_batched_pass_equals_the_encoder_run_by_run(name, extra):
    task = get_task(name)
    config = task.model_config(**TINY, dropout=0.0, **extra)
    blocks = En.layout(config)
    runs = [(0, "learned"), (1, "identity"), (2, "zero"), (3, "learned"), (4, "block_diagonal")]
    states = [state_with_w_o(config, s, m) for s, m in runs]
    flat = torch.stack([En.flatten(blocks, st) for st in states])
    ids, pad, _ = _batch(task, [s for s, _ in runs])
    assert pad.any()  # the test must cover padding
    packing = pack(ids, pad)
    with torch.no_grad():
        got = En.forward(Encoder(config), blocks, flat, packing, [m for _, m in runs], False)
        if task.kind == "token":
            got = unpack(packing, got)  # (R, B, T, n_out)
        for r, (state, (_, mode)) in enumerate(zip(states, runs, strict=True)):
            model = Encoder(config).eval()
            model.load_state_dict(state)
            want = model(ids[r], pad[r], w_o=mode, trace=False).logits
            if task.kind == "token":  # padded positions' outputs are arbitrary in both
                want, mine = want[~pad[r]], got[r][~pad[r]]
            else:
                mine = got[r]
            torch.testing.assert_close(mine, want, atol=ATOL, rtol=0)


def test_the_batched_pass_runs_the_encoders_own_layers(monkeypatch):
    # One forward: a change to tfviz.core.model's attention is a change to the batched training.
    calls = []
    plain = model_module.MultiHeadAttention.forward

    def counted(self, x, *args):
        calls.append(tuple(x.shape))
        return plain(self, x, *args)

    monkeypatch.setattr(model_module.MultiHeadAttention, "forward", counted)
    task = get_task("sort")
    config = task.model_config(**TINY, dropout=0.0)
    En.train_runs(task, config, [(0, "learned"), (1, "identity")], steps=2, batch_size=4)
    assert len(calls) == 2 * config.n_layers  # every layer of every step, for both runs at once
    assert all(shape[0] == 2 and shape[-1] == config.d_model for shape in calls)  # (R, M, D)


def test_flat_layout_round_trips_every_weight():
    config = get_task("sort").model_config(**TINY)
    blocks = En.layout(config)
    state = En.initial_state(config, 7)
    assert [k for k, _ in blocks] == list(state)  # the Encoder's own names, in its order
    back = En.unflatten(blocks, En.flatten(blocks, state))
    assert back.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(back[key], value), key


def test_unknown_settings_and_model_parts_are_refused():
    config = get_task("sort").model_config(**TINY)
    with pytest.raises(ValueError, match="w_o must be"):
        En.check_settings(get_task("sort"), config, 5, 8, 1e-3, ["sideways"], "cosine")
    if "embed_norm" in ModelConfig.__dataclass_fields__:
        bert_like = get_task("sort").model_config(**TINY, embed_norm=True)
        with pytest.raises(ValueError, match="embed_norm=True"):
            En.check_config(bert_like)
    for part, value in (("positions", "rotary"), ("tie_head", True)):
        sizes = {**TINY, part: value, "n_out": 12, "vocab_size": 12}
        with pytest.raises(ValueError, match=f"{part}={value!r}"):
            En.check_config(ModelConfig(**sizes))


# ---- packing ------------------------------------------------------------------------------------
def test_packing_holds_every_real_token_once_in_grid_order():
    pad = torch.tensor(
        [
            [[False, False, True], [False, True, True]],  # run 0: 3 real tokens
            [[False, False, False], [False, False, True]],  # run 1: 5 real tokens
        ]
    )
    ids = torch.arange(12).view(2, 2, 3)
    p = pack(ids, pad)
    assert p.ids.shape == (2, 5) and p.grid == (2, 2, 3)
    assert p.ids[0, :3].tolist() == [0, 1, 3] and p.ids[1].tolist() == [6, 7, 8, 9, 10]
    assert p.real.tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    # The two spare slots of run 0 carry its padded positions, each once.
    assert sorted(p.slot[0].tolist()) == [0, 1, 2, 3, 4]
    assert p.lengths.tolist() == [[2, 1], [3, 2]]
    assert p.seq.tolist()[:3] == [0, 0, 1] and p.pos.tolist()[:3] == [0, 1, 0]
    assert p.seq.tolist()[5:] == [2, 2, 2, 3, 3] and p.pos.tolist()[5:] == [0, 1, 2, 0, 1]
    assert torch.equal(p.pad_mask.view(2, 2, 3), pad)
    # unpack puts slot values back on the grid; pack_targets is its inverse on real positions.
    grid = unpack(p, p.ids.unsqueeze(-1).float(), fill=-1.0).squeeze(-1)
    assert torch.equal(grid, torch.where(pad, -1.0, ids.float()))
    target = torch.where(pad, IGNORE, ids)
    packed = pack_targets(p, target)
    assert torch.equal(packed[p.real], ids[~pad]) and (packed[~p.real] == IGNORE).all()


def test_packing_refuses_an_example_without_real_tokens():
    with pytest.raises(ValueError, match="at least one real"):
        pack(torch.zeros(1, 2, 2, dtype=torch.long), torch.tensor([[[False, True], [True] * 2]]))


# ---- training against train() -------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, options",
    [
        ("sort", {}),
        ("sum", {"schedule": "constant", "clip": None}),
        ("max_position", {}),
        ("reverse", {"min_len": 5, "max_len": 5}),  # no padding at all
    ],
)
def test_train_runs_equals_train_one_run_at_a_time(name, options):
    task = get_task(name)
    config = task.model_config(**TINY, dropout=0.0)
    runs = [(0, "learned"), (0, "identity"), (1, "learned"), (1, "identity"), (2, "zero")]
    settings = dict(steps=8, batch_size=8, lr=3e-3, device="cpu", **options)
    models, history = En.train_runs(task, config, runs, **settings)
    assert history["steps_done"] == 8 and not history["cancelled"]
    probe_ids, probe_pad, _ = _batch(task, [99], batch_size=16, **_lengths(options))
    for r, (seed, mode) in enumerate(runs):
        alone, hist = train(task, config, seed=seed, w_o=mode, **settings)
        np.testing.assert_allclose(history["loss"][r], hist["loss"], rtol=1e-5, atol=1e-6)
        got, want = models[r].state_dict(), alone.state_dict()
        for key in want:
            # W_k's bias shifts every score of a query alike, which softmax ignores: its true
            # gradient is 0, and Adam blows float noise there up to lr-sized steps. It changes
            # no output (checked below), so its value is not compared.
            if not key.endswith("W_k.bias"):
                torch.testing.assert_close(got[key], want[key], atol=ATOL, rtol=0, msg=key)
        if mode != "learned":  # W_o stayed switched off: the exact map, bias 0
            w = got["layers.0.attn.W_o.weight"]
            assert torch.equal(w, torch.eye(8) if mode == "identity" else torch.zeros(8, 8))
            assert not got["layers.1.attn.W_o.bias"].any()
        with torch.no_grad():
            a = models[r](probe_ids[0], probe_pad[0], trace=False).logits
            b = alone(probe_ids[0], probe_pad[0], trace=False).logits
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        assert not models[r].training


@pytest.mark.parametrize("name", ["max_position", "sort"])
def test_causal_runs_train_as_train_does(name):
    # The Train form's causal toy model, trained together with its encoder twin's settings.
    task = get_task(name)
    config = task.model_config(**TINY, dropout=0.0, causal=True)
    runs = [(0, "learned"), (1, "identity")]
    settings = dict(steps=6, batch_size=8, lr=3e-3, device="cpu")
    models, history = En.train_runs(task, config, runs, **settings)
    for r, (seed, mode) in enumerate(runs):
        alone, hist = train(task, config, seed=seed, w_o=mode, **settings)
        np.testing.assert_allclose(history["loss"][r], hist["loss"], rtol=1e-5, atol=1e-6)
        assert models[r].config.causal


def test_a_block_diagonal_run_trains_as_train_does_and_never_mixes_heads():
    task = get_task("sort")
    config = task.model_config(**TINY, dropout=0.0)
    settings = dict(steps=8, batch_size=8, lr=3e-3, device="cpu")
    (model,), history = En.train_runs(task, config, [(2, "block_diagonal")], **settings)
    alone, hist = train(task, config, seed=2, w_o="block_diagonal", **settings)
    np.testing.assert_allclose(history["loss"][0], hist["loss"], rtol=1e-5, atol=1e-6)
    for key, value in alone.state_dict().items():
        if not key.endswith("W_k.bias"):
            torch.testing.assert_close(model.state_dict()[key], value, atol=ATOL, rtol=0)
    for lay in range(config.n_layers):
        w = model.layers[lay].attn.W_o.weight  # the blocks that would mix heads stayed zero
        assert torch.equal(w, w * wo.block_mask(8, config.n_heads, w)) and w.abs().sum() > 0


def test_in_a_mixed_batch_only_the_block_diagonal_run_keeps_its_mixing_blocks_zero():
    # The experiment trains learned and block-diagonal runs of one seed side by side.
    task = get_task("sort")
    config = task.model_config(**TINY, dropout=0.0)
    runs = [(0, "learned"), (0, "block_diagonal")]
    models, history = En.train_runs(task, config, runs, steps=6, batch_size=8, lr=1e-2)
    for lay in range(config.n_layers):
        learned, block = (m.layers[lay].attn.W_o.weight for m in models)
        mask = wo.block_mask(8, config.n_heads, block)
        assert torch.equal(block * (1 - mask), torch.zeros_like(block))
        assert (learned * (1 - mask)).abs().sum() > 0  # the learned one mixes heads
    for (seed, mode), losses in zip(runs, history["loss"], strict=True):
        _, alone = train(task, config, seed=seed, w_o=mode, steps=6, batch_size=8, lr=1e-2)
        np.testing.assert_allclose(losses, alone["loss"], rtol=1e-5, atol=1e-6)


def _lengths(options):
    return {k: options[k] for k in ("min_len", "max_len") if k in options}


def test_learned_runs_move_w_o_and_switched_off_runs_do_not():
    task = get_task("sort")
    config = task.model_config(**TINY, dropout=0.0)
    models, _ = En.train_runs(task, config, [(0, "learned"), (0, "identity")], steps=3, lr=1e-2)
    start = En.initial_state(config, 0)["layers.0.attn.W_o.weight"]
    assert not torch.allclose(models[0].layers[0].attn.W_o.weight, start)
    assert torch.equal(models[1].layers[0].attn.W_o.weight, torch.eye(8))


# ---- dropout ------------------------------------------------------------------------------------
def test_with_dropout_batched_and_sequential_agree_in_distribution():
    task = get_task("sort")
    sizes = dict(d_model=16, n_heads=2, d_ff=32, n_layers=1)
    seeds = [0, 1, 2, 3, 4, 5]
    runs = [(s, "learned") for s in seeds]
    settings = dict(steps=60, batch_size=16, lr=1e-2, device="cpu")

    def final(curve):
        return np.mean(curve[-10:])

    config = task.model_config(**sizes, dropout=0.3)
    _, history = En.train_runs(task, config, runs, **settings)
    batched = np.array([final(curve) for curve in history["loss"]])
    alone = np.array([final(train(task, config, seed=s, **settings)[1]["loss"]) for s in seeds])
    _, plain = En.train_runs(task, task.model_config(**sizes, dropout=0.0), runs, **settings)
    no_dropout = np.array([final(curve) for curve in plain["loss"]])
    spread = max(batched.std(ddof=1), alone.std(ddof=1))  # run-to-run spread of a final loss
    # The masks differ, so the runs differ, but not in distribution: the mean final losses are
    # much closer than the spread, while dropout itself moves the mean by more than the spread.
    assert not np.allclose(batched, alone)
    assert abs(batched.mean() - alone.mean()) < 0.5 * spread
    assert batched.mean() - no_dropout.mean() > spread
    # Dropout masks are seeded by the runs' seeds: a rerun repeats exactly.
    _, again = En.train_runs(task, config, runs, **settings)
    assert again["loss"] == history["loss"]


def test_each_run_draws_its_own_dropout_masks():
    # Two runs with the same seed: same weights, same batches; only the masks can differ.
    task = get_task("sum")
    settings = dict(steps=2, batch_size=8, device="cpu")
    twins = [(0, "learned"), (0, "learned")]
    _, drop = En.train_runs(task, task.model_config(**TINY, dropout=0.5), twins, **settings)
    assert drop["loss"][0][0] != drop["loss"][1][0]
    _, plain = En.train_runs(task, task.model_config(**TINY, dropout=0.0), twins, **settings)
    np.testing.assert_allclose(plain["loss"][0], plain["loss"][1], rtol=1e-6)


# ---- stopping -----------------------------------------------------------------------------------
def test_on_step_sees_every_run_and_can_stop_them_all():
    seen = []

    def stop_at_three(info: En.EnsembleStep):
        seen.append(info)
        return info.step < 3

    task = get_task("balanced")
    config = task.model_config(**TINY)
    runs = [(0, "learned"), (0, "identity"), (1, "learned")]
    models, history = En.train_runs(task, config, runs, steps=10, on_step=stop_at_three)
    assert [s.step for s in seen] == [1, 2, 3] and all(s.steps == 10 for s in seen)
    assert history["steps_done"] == 3 and history["cancelled"] and len(models) == 3
    for r in range(3):
        assert history["loss"][r] == [s.losses[r] for s in seen]
