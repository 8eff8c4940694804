"""tfviz.core.dissect: the mode sweep, W_o's spectrum, the head shuffle and the parsers, hand-worked
where the numbers can be worked by hand, and on a bundled model where they cannot."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from tests.conftest import MODELS, wait_until
from tfviz import get_task, plots
from tfviz.core import dissect, trace, wo
from tfviz.core.interventions import Interventions
from tfviz.training.checkpoint import load_checkpoint
from tfviz.training.evaluate import evaluate

# Two heads of width 2 and a W_o whose singular values are 4, 3, 2, 1 and that mixes no heads.
DIAG = np.diag([4.0, 3.0, 2.0, 1.0])


@pytest.fixture(scope="module")
def bundled():
    model, meta = load_checkpoint(MODELS / "reverse.safetensors")
    return model, get_task(meta.task)


def frobenius_squared(W: np.ndarray, n_heads: int = 2):
    """A measure worked by hand: ||W_eff||_F^2 of the single layer's mode."""

    def measure(iv: Interventions) -> float:
        (mode,) = iv.w_o_modes(1)
        return float((wo.effective(W, np.zeros(len(W)), mode, n_heads)[0] ** 2).sum())

    return measure


def test_the_sweep_measures_every_mode_by_hand():
    sweep = dissect.sweep_modes(frobenius_squared(DIAG), 4)
    # identity keeps 1 per dimension (4), zero nothing, block-diagonal all of a diagonal W_o.
    assert sweep.whole == {"learned": 30.0, "block_diagonal": 30.0, "identity": 4.0, "zero": 0.0}
    assert sweep.ranks == [1, 2, 3, 4]
    # Rank k keeps the k largest squared singular values: 16, 16+9, 16+9+4, all.
    np.testing.assert_allclose(sweep.rank_values, [16, 25, 29, 30])
    assert sweep.at_rank(2) == pytest.approx(25)
    with pytest.raises(ValueError, match="not swept"):
        sweep.at_rank(7)


def test_block_diagonal_drops_exactly_the_blocks_that_mix_heads():
    W = DIAG.copy()
    W[0, 3] = 5.0  # output dim 0 (head 0's slice) reads input dim 3 (head 1): mixing
    W[2, 3] = 7.0  # output dim 2 reads input dim 3: both head 1, kept
    sweep = dissect.sweep_modes(frobenius_squared(W), 4, ranks=[4])
    assert sweep.whole["learned"] == pytest.approx(30 + 25 + 49)
    assert sweep.whole["block_diagonal"] == pytest.approx(30 + 49)
    assert sweep.rank_values == [pytest.approx(30 + 25 + 49)]  # full rank is W itself


def test_the_sweep_switches_one_layer_or_all():
    seen = []
    dissect.sweep_modes(lambda iv: seen.append(iv) or 0.0, 8, layer=1, ranks=[2, 8])
    assert [iv.w_o for iv in seen] == [
        ((1, "learned"),),
        ((1, "block_diagonal"),),
        ((1, "identity"),),
        ((1, "zero"),),
        ((1, "rank:2"),),
        ((1, "rank:8"),),
    ]
    seen.clear()
    dissect.sweep_modes(lambda iv: seen.append(iv) or 0.0, 8, ranks=[3])
    assert [iv.w_o for iv in seen] == ["learned", "block_diagonal", "identity", "zero", "rank:3"]
    with pytest.raises(ValueError, match="k from 1 to d_model = 8"):
        dissect.sweep_modes(lambda iv: 0.0, 8, ranks=[9])


def test_sweep_switches_are_what_the_sweep_measures_in_order():
    seen = []
    dissect.sweep_modes(lambda iv: seen.append(iv) or 0.0, 8, layer=0, ranks=[8, 2, 2])
    assert dissect.sweep_switches(8, 0, [8, 2, 2]) == seen
    assert len(dissect.sweep_switches(64)) == len(dissect.WHOLE_MODES) + len(dissect.rank_grid(64))
    with pytest.raises(ValueError, match="k from 1 to d_model = 8"):
        dissect.sweep_switches(8, ranks=[0])


# ---- the shared measure cache ------------------------------------------------------------------


class CountedMeasure:
    """key -> key * 10, counting the calls per key; blocks on `gate` while it is cleared."""

    def __init__(self):
        self.calls: dict = {}
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()

    def __call__(self, key):
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
        self.gate.wait(10)
        if key == "bad":
            raise ValueError("cannot measure bad")
        return key * 10


def test_the_cache_measures_each_key_once():
    measure = CountedMeasure()
    cache = dissect.MeasureCache(measure)
    assert [cache(1), cache(2), cache(1)] == [10, 20, 10]
    assert measure.calls == {1: 1, 2: 1}
    assert cache.known(1) and not cache.known(3)


def test_warm_measures_ahead_in_the_background_and_skips_what_is_known():
    measure = CountedMeasure()
    cache = dissect.MeasureCache(measure)
    cache(1)
    cache.warm([1, 2, 3, 2])
    wait_until(lambda: cache.known(2) and cache.known(3))
    assert measure.calls == {1: 1, 2: 1, 3: 1}
    assert cache(3) == 30 and measure.calls[3] == 1  # a lookup now


def test_a_key_being_measured_is_waited_for_not_measured_again():
    measure = CountedMeasure()
    measure.gate.clear()  # the background measure of 5 hangs until the gate opens
    cache = dissect.MeasureCache(measure)
    cache.warm([5])
    wait_until(lambda: measure.calls.get(5) == 1)
    # The event the background sets when 5's value is in: note when someone waits on it.
    busy = cache._busy[5]
    waiting = threading.Event()
    real_wait = busy.wait

    def noted_wait(timeout=None):
        waiting.set()
        return real_wait(timeout)

    busy.wait = noted_wait
    got = []
    asker = threading.Thread(target=lambda: got.append(cache(5)))
    asker.start()
    assert waiting.wait(10), "the asker did not wait for the value being measured"
    assert got == [] and asker.is_alive()  # blocked on the background's value...
    assert measure.calls[5] == 1  # ...not measuring it a second time
    measure.gate.set()
    asker.join(10)
    assert got == [50] and measure.calls[5] == 1


def test_a_failed_measure_raises_where_it_is_asked_and_poisons_nothing():
    measure = CountedMeasure()
    cache = dissect.MeasureCache(measure)
    cache.warm(["bad", 4])  # the background drops the failure and goes on
    wait_until(lambda: cache.known(4))
    assert not cache.known("bad")
    with pytest.raises(ValueError, match="cannot measure bad"):
        cache("bad")
    assert measure.calls["bad"] == 2


def test_the_cache_keeps_at_most_max_entries_the_newest():
    cache = dissect.MeasureCache(CountedMeasure(), max_entries=3)
    for key in range(5):
        cache(key)
    assert [cache.known(key) for key in range(5)] == [False, False, True, True, True]


def test_rank_grid_covers_one_to_d_and_keeps_extra_ranks():
    assert dissect.rank_grid(4) == [1, 2, 3, 4]
    grid = dissect.rank_grid(384, points=16, extra=[100, 0, 999])
    assert grid[0] == 1 and grid[-1] == 384 and 100 in grid
    assert 0 not in grid and 999 not in grid
    assert grid == sorted(set(grid)) and len(grid) <= 17
    assert grid[:3] == [1, 2, 3]  # geometric spacing: dense where the curve moves most
    with pytest.raises(ValueError):
        dissect.rank_grid(0)


def test_rank_k_error_is_the_dropped_singular_values(bundled):
    model, _ = bundled
    sv = dissect.singular_values(model)
    L, D = len(model.layers), model.config.d_model
    assert sv.shape == (L, D) and (np.diff(sv, axis=1) <= 1e-12).all()
    W = model.layers[0].attn.W_o.weight.detach().double().numpy()
    np.testing.assert_allclose(sv[0], np.linalg.svd(W, compute_uv=False), rtol=1e-10)
    for k in (1, 5, D // 2):
        dropped = W - wo.truncated(W, k)
        frob = np.sqrt((sv[0, k:] ** 2).sum())
        assert np.linalg.norm(dropped) == pytest.approx(frob, rel=1e-8)
        assert np.linalg.norm(dropped, 2) == pytest.approx(sv[0, k], rel=1e-8)


def test_a_sweep_on_a_bundled_model_changes_no_shared_weight(bundled):
    model, task = bundled
    before = {name: p.detach().clone() for name, p in model.state_dict().items()}

    def accuracy(iv):
        return evaluate(model, task, 128, seed=5, interventions=iv)["token_accuracy"]

    sweep = dissect.sweep_modes(accuracy, model.config.d_model, ranks=[1, 64])
    for name, p in model.state_dict().items():
        assert torch.equal(p, before[name]), f"{name} changed during the sweep"
    # The bundled reverse model needs its W_o: learned is near perfect, zero is not.
    assert sweep.whole["learned"] > 0.9 > sweep.whole["zero"]
    assert sweep.at_rank(64) == pytest.approx(sweep.whole["learned"])  # full rank: W_o itself
    assert sweep.at_rank(1) < sweep.whole["learned"]


def test_shuffled_heads_change_the_output_unless_w_o_follows(bundled):
    model, task = bundled
    text, order = "abcdefgh", (2, 0, 3, 1)
    base = trace.run_trace(model, task, text)
    shuffled = trace.run_trace(model, task, text, dissect.permuted(0, order, False))
    matched = trace.run_trace(model, task, text, dissect.permuted(0, order, True))
    check = dissect.permutation_check(base, shuffled, matched)
    assert check.layer == 0 and check.order == order
    assert check.shuffled_attn_out > 1e-2 and check.shuffled_output > 1e-2
    assert check.matched_attn_out < 1e-6 and check.matched_output < 1e-5
    assert check.identical


def test_permutation_check_refuses_passes_that_do_not_pair(bundled):
    model, task = bundled
    base = trace.run_trace(model, task, "abcdefgh")
    a = trace.run_trace(model, task, "abcdefgh", dissect.permuted(0, (1, 0, 2, 3), False))
    b = trace.run_trace(model, task, "abcdefgh", dissect.permuted(1, (1, 0, 2, 3), True))
    with pytest.raises(ValueError, match="same one layer"):
        dissect.permutation_check(base, a, b)
    c = trace.run_trace(model, task, "abcdefgh", dissect.permuted(0, (1, 0, 2, 3), True))
    with pytest.raises(ValueError, match="permutes its columns"):
        dissect.permutation_check(base, c, a)
    other = trace.run_trace(model, task, "hgfedcba")
    with pytest.raises(ValueError, match="same sequence"):
        dissect.permutation_check(other, a, c)


@pytest.mark.parametrize("text, k", [("5", 5), (" 64 ", 64), ("1", 1), (3.0, 3), (7, 7)])
def test_parse_rank_accepts_whole_numbers_in_range(text, k):
    assert dissect.parse_rank(text, 64) == k


@pytest.mark.parametrize(
    "text, shown",
    [
        ("0", "got 0"),
        ("65", "got 65"),
        ("-3", "got -3"),
        ("2.5", "got 2.5"),
        ("nan", "got nan"),
        ("inf", "got inf"),
        ("1e400", "got inf"),
        ("abc", "got 'abc'"),
        ("", "got ''"),
        (float("nan"), "got nan"),
        (True, "got True"),
        (None, "got NoneType"),
    ],
)
def test_parse_rank_refuses_anything_else_with_the_range(text, shown):
    with pytest.raises(ValueError, match="k is a whole number from 1 to 64") as e:
        dissect.parse_rank(text, 64)
    assert shown in str(e.value)


def test_parse_order_reads_commas_or_spaces_and_says_what_is_wrong():
    assert dissect.parse_order("2,0,1,3", 4) == (2, 0, 1, 3)
    assert dissect.parse_order(" 3 2, 1 ,0 ", 4) == (3, 2, 1, 0)
    for bad, message in [
        ("", "such as 3,2,1,0"),
        ("2,0,1", "each head 0..3 exactly once"),
        ("2,0,1,1", "each head 0..3 exactly once"),
        ("0,1,2,9", "each head 0..3 exactly once"),
        ("a,b,c,d", "head numbers 0..3"),
        ("-1,0,1,2", "head numbers 0..3"),
        ("1.0,0,2,3", "head numbers 0..3"),
        (None, "such as"),
    ]:
        with pytest.raises(ValueError, match=message):
            dissect.parse_order(bad, 4)


def test_a_shuffle_moves_at_least_one_head():
    rng = np.random.default_rng(0)
    for n in (2, 3, 4, 12):
        for _ in range(20):
            order = dissect.shuffled_order(n, rng)
            assert sorted(order) == list(range(n)) and order != tuple(range(n))
    assert dissect.shuffled_order(1, rng) == (0,)


# ---- the figures drawn from these numbers (tfviz.plots, the "Take W_o apart" part) ------------

NAMES = {"learned": "L", "block_diagonal": "B", "identity": "I", "zero": "Z", "rank": "R"}


def test_the_mode_sweep_plot_draws_each_mode_as_a_line_and_marks_k():
    whole = {"learned": 1.0, "block_diagonal": 0.25, "identity": 0.0, "zero": 0.1}
    fig = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES, chosen_k=2, title="t")
    lines = {tr.name: list(tr.y) for tr in fig.data if tr.name}
    assert lines["B: 0.25"] == [0.25, 0.25] and lines["L: 1"] == [1.0, 1.0]
    assert lines["R"] == pytest.approx([0.1, 0.7, 1.0])
    marker = [tr for tr in fig.data if not tr.name]
    assert list(marker[0].x) == [2] and marker[0].y[0] == pytest.approx(0.7)
    assert fig.layout.shapes[0].x0 == 2
    unmarked = plots.mode_sweep_plot([1, 2, 4], [0.1, 0.7, 1.0], whole, NAMES, chosen_k=3)
    assert not unmarked.layout.shapes  # 3 was not swept: nothing to point at


@pytest.mark.parametrize(
    "ranks, values, whole, message",
    [
        ([1, 2], [0.5], {"learned": 1.0}, "one value per rank"),
        ([], [], {"learned": 1.0}, "one value per rank"),
        ([1], [0.5], {"learned": float("nan")}, "finite"),
        ([1], [0.5], {"other": 1.0}, "no legend name"),
    ],
)
def test_the_mode_sweep_plot_refuses_what_it_cannot_draw(ranks, values, whole, message):
    with pytest.raises(ValueError, match=message):
        plots.mode_sweep_plot(ranks, values, whole, NAMES)


def test_the_other_part_figures_check_their_inputs():
    sv = np.array([[3.0, 2.0, 1.0], [2.0, 1.0, 0.5]])
    fig = plots.w_o_spectrum_plot(sv, layer_ids=[0, 1], chosen_k=1)
    assert [tr.name for tr in fig.data] == ["L0", "L1"] and fig.layout.shapes[0].x0 == 1.5
    with pytest.raises(ValueError, match="non-negative"):
        plots.w_o_spectrum_plot(-sv)
    with pytest.raises(ValueError, match="layer ids"):
        plots.w_o_spectrum_plot(sv, layer_ids=[0])
    diff = np.zeros((2, 3, 3), dtype=np.float32)
    diff[1, 0, 2] = -0.5
    grid = plots.attention_diff_grid(diff, ["a", "b", "c"], layer=1, title="d")
    assert grid.layout.coloraxis.cmin == -0.5 and grid.layout.coloraxis.cmax == 0.5
    with pytest.raises(ValueError, match="tokens"):
        plots.attention_diff_grid(diff, ["a", "b"], layer=0)
    with pytest.raises(ValueError, match="non-negative"):
        plots.head_change_map(np.array([[-1.0, 0.0]]), ["a", "b"])
    bars = plots.tally_bars(["yes", "no"], [3, 0], title="n")
    assert list(bars.data[0].y) == [3, 0]
    with pytest.raises(ValueError, match="one non-negative count per choice"):
        plots.tally_bars(["yes", "no"], [1])
