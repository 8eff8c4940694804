"""tfviz.core.trace and the small helpers around it: the numbers behind the views, checked against
identities that must hold."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch

from tests.conftest import MODELS
from tfviz import get_task
from tfviz.core import trace, wo
from tfviz.core.interventions import Interventions, head_names, parse_head_name
from tfviz.core.metrics import headline
from tfviz.core.model import STACKED, Encoder
from tfviz.plots.export import attention_csv
from tfviz.training.evaluate import evaluate
from tfviz.ui.text import changed_tokens, prediction_table, width

TEXT = "abcdefg"


@pytest.fixture(scope="module")
def task():
    return get_task("reverse")


@pytest.fixture(scope="module")
def model(task) -> Encoder:
    """A random reverse-task model with non-zero biases, so a dropped b_o shows."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Encoder(task.model_config(d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0))
        for p in model.parameters():
            if p.dim() == 1:
                p.data.normal_(0, 0.1)
    return model.eval().requires_grad_(False)


@pytest.fixture(scope="module")
def learned(model, task) -> trace.TraceArrays:
    return trace.run_trace(model, task, TEXT)


def test_run_trace_shapes_and_dtypes(learned, task):
    L, H, T, D = 2, 4, len(TEXT) + 1, 16  # + BOS
    assert learned.attn.shape == (L, H, T, T)
    assert learned.z.shape == (L, H, T, D // H)
    for name in ("concat", "attn_out", "resid_mid", "resid_out"):
        assert getattr(learned, name).shape == (L, T, D), name
    assert learned.b_o.shape == (L, D)
    for name in ("attn", "concat", "attn_out", "resid_out", "b_o"):
        assert getattr(learned, name).dtype == np.float32, name
    assert learned.labels == task.labels(TEXT)
    assert learned.answer == list(reversed(TEXT))
    assert len(learned.prediction) == len(TEXT)
    np.testing.assert_allclose(learned.attn.sum(-1), 1.0, atol=1e-5)
    assert learned.output is None  # a toy model answers through its head: no embedding to pool


def test_run_trace_matches_the_model(model, task, learned):
    ids, pad = task.encode_batch([TEXT])
    out = model(ids, pad, trace=True)
    np.testing.assert_allclose(learned.attn_out[1], out.trace.layers[1].attn_out[0].numpy())
    W = trace.w_o_used(model, learned.w_o_modes)
    np.testing.assert_array_equal(W[0], model.layers[0].attn.W_o.weight.numpy())
    contrib = out.trace.layers[1].head_contributions()[0].numpy()
    np.testing.assert_allclose(wo.head_contributions(learned.z[1], W[1]), contrib, atol=1e-6)
    assert learned.prediction == task.predict_tokens(model, TEXT)


def test_run_trace_refuses_bad_text(model, task):
    with pytest.raises(ValueError, match="not allowed"):
        trace.run_trace(model, task, "abz")


def test_decomposition_error_is_float32_rounding(model, learned):
    W = trace.w_o_used(model, learned.w_o_modes)
    assert trace.decomposition_error(learned, W) < 1e-5
    assert trace.decomposition_error(learned, W, layer=0) < 1e-5


def test_decomposition_error_notices_a_missing_bias_or_a_wrong_w_o(model, learned):
    W = trace.w_o_used(model, learned.w_o_modes)
    broken = trace.TraceArrays(**{**learned.__dict__, "b_o": np.zeros_like(learned.b_o)})
    assert trace.decomposition_error(broken, W) > 1e-3
    assert trace.decomposition_error(learned, W.transpose(0, 2, 1)) > 1e-3


def test_identity_mode_passes_concat_through(model, task):
    off = trace.run_trace(model, task, TEXT, w_o="identity")
    assert off.w_o_modes == ["identity", "identity"]
    np.testing.assert_allclose(trace.cosine_per_token(off.concat, off.attn_out), 1.0, atol=1e-6)
    W = trace.w_o_used(model, off.w_o_modes)
    np.testing.assert_array_equal(W[1], np.eye(W.shape[-1], dtype=np.float32))
    assert trace.decomposition_error(off, W) < 1e-6
    # Without W_o each head writes only into its own block of dims: block-diagonal terms.
    d_k = off.z.shape[-1]
    contrib = wo.head_contributions(off.z[0], W[0])
    for h in range(off.n_heads):
        outside = np.delete(contrib[h], np.s_[h * d_k : (h + 1) * d_k], axis=-1)
        assert np.abs(outside).max() == 0.0


def test_learned_w_o_spreads_every_head_over_every_dim(model, learned):
    W = trace.w_o_used(model, learned.w_o_modes)
    for layer in range(len(learned.w_o_modes)):
        # These are the terms the pass really added: with b_o they rebuild its attn_out.
        assert trace.decomposition_error(learned, W, layer=layer) < 1e-5
        terms = wo.head_contributions(learned.z[layer], W[layer])  # (H, T, D)
        reach = np.abs(terms).max(axis=1)  # (H, D): the most head h writes into dim d
        # Every head writes into every dim, its own block's and all the others'.
        assert (reach > 1e-4).all(), f"layer {layer}: some head leaves a dim untouched"


def test_cosine_per_token_range_and_zero_vectors(learned):
    cos = trace.cosine_per_token(learned.concat, learned.attn_out)
    assert cos.shape == learned.concat.shape[:2]
    assert np.all(cos >= -1.0) and np.all(cos <= 1.0)
    assert cos.min() < 0.99  # a random W_o turns vectors
    np.testing.assert_array_equal(trace.cosine_per_token(np.zeros((3, 4)), np.ones((3, 4))), 0.0)
    np.testing.assert_allclose(trace.cosine_per_token([[1.0, 0.0]], [[-2.0, 0.0]]), [-1.0])
    with pytest.raises(ValueError, match="cannot compare shapes"):
        trace.cosine_per_token(np.ones((2, 3)), np.ones((2, 4)))


def test_drift_is_zero_for_the_same_pass_and_grows_with_a_switch(model, task, learned):
    np.testing.assert_allclose(trace.drift_per_layer(learned, learned), 0.0, atol=1e-6)
    zero = trace.run_trace(model, task, TEXT, w_o="zero")
    drift = trace.drift_per_layer(learned, zero)
    assert drift.shape == (2,) and np.all(drift > 1e-3) and np.all(drift <= 2.0)
    # Switching only the last layer leaves the first layer's residual stream untouched.
    last = trace.run_trace(model, task, TEXT, w_o={1: "zero"})
    drift_last = trace.drift_per_layer(learned, last)
    assert drift_last[0] == pytest.approx(0.0, abs=1e-6) and drift_last[1] > 1e-3


def test_drift_refuses_different_sequences(model, task, learned):
    other = trace.run_trace(model, task, "abc")
    with pytest.raises(ValueError, match="same sequence"):
        trace.drift_per_layer(learned, other)


def test_ablation_zeroes_the_head_before_w_o(model, task):
    ablated = trace.run_trace(model, task, TEXT, ablate_heads=[(0, 2)])
    assert ablated.interventions.ablate_heads == ((0, 2),)
    assert np.abs(ablated.z[0, 2]).max() == 0.0
    W = trace.w_o_used(model, ablated.w_o_modes)
    assert np.abs(wo.head_contributions(ablated.z[0], W[0])[2]).max() == 0.0
    assert np.abs(ablated.z[0, 1]).max() > 0.0


def test_head_names_round_trip():
    names = head_names(2, 3)
    assert names == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    assert [parse_head_name(n) for n in names][-1] == (1, 2)
    for bad in ("L1", "H1", "LxH2", ""):
        with pytest.raises(ValueError, match="named like"):
            parse_head_name(bad)


def test_changed_tokens():
    assert changed_tokens(list("abcd"), list("abxd")) == [2]
    assert changed_tokens([], []) == []
    with pytest.raises(ValueError, match="3 and 2 tokens"):
        changed_tokens("abc", "ab")


def test_downstream_layers():
    assert Interventions(w_o="identity").downstream_layers(3) == [1, 2]
    assert Interventions(w_o={1: "zero"}).downstream_layers(3) == [2]
    assert Interventions(w_o={2: "identity"}).downstream_layers(3) == []
    assert Interventions(ablate_heads=[(1, 0)]).downstream_layers(3) == [2]
    assert Interventions(w_o={2: "zero"}, ablate_heads=[(0, 1)]).downstream_layers(3) == [1, 2]
    assert Interventions().downstream_layers(3) == []


def test_prediction_table_aligns_and_marks_wrong_tokens():
    table = prediction_table(
        [("input", ["a", "b", "c"]), ("answer", ["10", "2", "3"]), ("model", ["10", "9", "3"])],
        ["10", "2", "3"],
    )
    lines = table.split("\n")
    assert lines[0] == "input   a  b c"
    assert lines[2] == "model   10 9 3"
    assert lines[3] == "           ^"
    assert lines[3].index("^") == lines[2].index("9")
    right = prediction_table([("model", ["x"])], ["x"])
    assert "^" not in right


def test_prediction_table_aligns_chinese_row_names_by_display_width():
    # 输入 and 模型 take four monospace columns each, like "abcd": the marks stay under the tokens.
    table = prediction_table([("输入", ["a", "b"]), ("模型", ["a", "x"])], ["a", "b"])
    lines = table.split("\n")
    assert lines[1] == "模型  a x"
    assert width(lines[2][: lines[2].index("^")]) == width(lines[1][: lines[1].index("x")])
    assert width("模型 a") == 6 and width("abc") == 3


def test_prediction_table_shows_markup_literally():
    table = prediction_table([("model", ["<b>x</b>"])], ["y"])
    assert "<b>x</b>" in table


def test_headline_metric(task):
    assert headline(task.metric, {"token_accuracy": 0.987}) == ("token accuracy", "98.7%")
    assert headline(get_task("sum").metric, {"mae": 0.25}) == ("mean absolute error", "0.250")
    assert headline(task.metric, {}) is None


def test_accuracy_with_a_switch_is_fixed_and_reacts(task):
    # The bundled reverse model: a trained model's accuracy surely falls with W_o zeroed (a random
    # one's may not move: it can answer the same constant either way).
    from tfviz.training.checkpoint import load_checkpoint

    model, _ = load_checkpoint(MODELS / "reverse.safetensors")
    a = evaluate(model, task, 256, seed=7)
    assert a == evaluate(model, task, 256, seed=7)  # same examples every time
    assert a["n"] == 256 and a["token_accuracy"] > 0.95
    zero = evaluate(model, task, 256, seed=7, interventions=Interventions(w_o="zero"))
    assert zero["token_accuracy"] < a["token_accuracy"] - 0.3


def test_attention_csv(learned):
    text = attention_csv(learned.attn, learned.labels)
    rows = list(csv.DictReader(io.StringIO(text)))
    L, H, T, _ = learned.attn.shape
    assert list(rows[0]) == ["layer", "head", "query", "key", "weight"]
    assert len(rows) == L * H * T * T
    last = rows[-1]
    assert (last["layer"], last["head"]) == (str(L - 1), str(H - 1))
    assert (last["query"], last["key"]) == (learned.labels[-1], learned.labels[-1])
    assert float(last["weight"]) == pytest.approx(learned.attn[-1, -1, -1, -1], rel=1e-5)
    with pytest.raises(ValueError, match="8 keys but 3 tokens"):
        attention_csv(learned.attn, ["a", "b", "c"])


def test_random_example_is_valid(task):
    rng = np.random.default_rng(0)
    for _ in range(20):
        text = task.random_example(rng)
        assert task.validate(text) == text


def test_diff_of_two_inputs_splits_the_change_by_head(model, task):
    a = trace.run_trace(model, task, "abcdefg")
    b = trace.run_trace(model, task, "abcjefg")
    W = trace.w_o_used(model, a.w_o_modes)
    d = trace.diff_inputs(a, b, W)
    assert d.positions == [4]  # BOS first, so the 4th letter is position 4
    np.testing.assert_allclose(d.attn, b.attn - a.attn)
    L, H, T = a.attn.shape[:3]
    assert d.head_terms.shape == (L, H, T)
    # The per-head changes after W_o add up to the change of attn_out (the bias cancels).
    for lay in range(L):
        terms = wo.head_contributions(b.z[lay], W[lay]) - wo.head_contributions(a.z[lay], W[lay])
        np.testing.assert_allclose(terms.sum(0), d.attn_out[lay], atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(terms, axis=-1), d.head_terms[lay], atol=1e-5)


@pytest.mark.parametrize(
    "b_text, switches, message",
    [
        ("abc", {}, "same length"),
        ("abcdefg", {}, "are the same"),
        ("abcjefg", {"w_o": "identity"}, "same switches"),
    ],
)
def test_diff_refuses_what_cannot_be_compared(model, task, b_text, switches, message):
    a = trace.run_trace(model, task, "abcdefg")
    b = trace.run_trace(model, task, b_text, **switches)
    with pytest.raises(ValueError, match=message):
        trace.diff_inputs(a, b, trace.w_o_used(model, a.w_o_modes))


def test_a_trace_holds_each_site_of_every_layer_in_one_stacked_tensor(model, task):
    """The layers' tensors are views of the stacked sites (run_trace reads those without a
    copy), the attention written there in place, and each holds what its own layer computed:
    the weights recomputed by hand from the layer's recorded input."""
    ids, pad = task.encode_batch([TEXT])
    out = model(ids, pad, trace=True)
    stacked = out.trace.stacked
    assert set(stacked) == set(STACKED)
    for i, (layer, lt) in enumerate(zip(model.layers, out.trace.layers, strict=True)):
        for name in STACKED:
            assert getattr(lt, name).data_ptr() == stacked[name][i].data_ptr(), (i, name)
        if i:  # a layer's input is the one before's output, not a copy of it
            assert lt.resid_pre.data_ptr() == stacked["resid_out"][i - 1].data_ptr()
        x = lt.resid_pre if model.config.norm == "post" else layer.norm1(lt.resid_pre)
        att = layer.attn
        q = att.W_q(x).view(1, -1, att.n_heads, att.d_k).transpose(1, 2)
        k = att.W_k(x).view(1, -1, att.n_heads, att.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / att.d_k**0.5
        if pad is not None:
            scores = scores.masked_fill(pad[:, None, None], float("-inf"))
        torch.testing.assert_close(stacked["attn"][i], scores.softmax(-1), rtol=0, atol=1e-6)
        z = stacked["attn"][i] @ att.W_v(x).view(1, -1, att.n_heads, att.d_k).transpose(1, 2)
        torch.testing.assert_close(lt.z, z, rtol=0, atol=1e-6)  # read back from concat
        assert lt.z.data_ptr() == stacked["concat"][i].data_ptr()
    layers = out.trace.layers
    torch.testing.assert_close(layers[-1].resid_out, stacked["resid_out"][-1])


def test_a_traced_pass_with_gradients_gives_the_fast_passs_gradients(task):
    """With gradients on, the weights are not written into the trace's buffer (an out= softmax
    has no backward): the traced pass still differentiates, to the fused path's gradients."""
    torch.manual_seed(1)
    model = Encoder(task.model_config(d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0))
    ids, pad = task.encode_batch([TEXT, TEXT[:4]])
    grads = []
    for traced in (True, False):
        model.zero_grad()
        model(ids, pad, trace=traced).logits.square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for traced, fast in zip(*grads, strict=True):
        torch.testing.assert_close(traced, fast, rtol=1e-4, atol=1e-6)


def test_top_next_a_few_rows_at_a_time_equals_the_softmax_over_all():
    torch.manual_seed(0)
    rows = 3 * trace.ROWS_AT_ONCE + 5
    logits = torch.randn(2, rows, 300) * 4
    ids, probs = trace.top_next(logits, k=5)
    want = logits.softmax(-1).topk(5, dim=-1)
    assert ids.shape == probs.shape == (2, rows, 5)
    torch.testing.assert_close(ids, want.indices)
    torch.testing.assert_close(probs, want.values, rtol=1e-5, atol=1e-7)


def test_the_top_k_from_the_best_blocks_is_topk():
    torch.manual_seed(0)
    k = trace.TOP_K
    logits = torch.randn(2, 7, 40 * trace.BLOCK) * 3
    # Rows whose k best share one block, and rows whose k best are in k different blocks.
    logits[0, 0, 5 * trace.BLOCK : 5 * trace.BLOCK + k] = torch.arange(k) + 20.0
    logits[0, 1, :: trace.BLOCK] = 30.0 + torch.arange(40.0)
    for x in (logits, logits[0, 0], logits[..., : 3 * trace.BLOCK - 1]):  # (and plain topk)
        values, ids = trace.top_k_by_blocks(x, k)
        want = x.topk(k, dim=-1)
        assert torch.equal(values, want.values) and torch.equal(ids, want.indices)


@pytest.mark.parametrize("bias", [True, False, "zero", None])
def test_the_heads_top_next_a_vocabulary_chunk_at_a_time_equals_the_whole_logits(bias, monkeypatch):
    torch.manual_seed(0)
    # Products of 128 rows of the head, chunks of three products (384 logits a row): the
    # vocabulary's last chunk is shorter than the others, and its last product too.
    monkeypatch.setattr(trace, "PRODUCT_COLUMNS", 128)
    monkeypatch.setattr(trace, "CHUNK_BYTES", 40 * 4 * 3 * 128)
    V = 5 * 128 + 77
    head = torch.nn.Linear(24, V, bias=bias not in (False, None))
    if bias == "zero":  # a decoder's head: its bias is zero
        torch.nn.init.zeros_(head.bias)
    hidden = torch.randn(40, 24) * 3
    if bias is None:  # leading axes kept: (2, 20, k) answers for (2, 20, D) hidden states
        hidden = hidden.view(2, 20, 24)
    ids, probs = trace.head_top_next(hidden, head)
    want_ids, want_probs = trace.top_next(head(hidden))
    assert ids.shape == probs.shape == (*hidden.shape[:-1], trace.TOP_K)
    torch.testing.assert_close(ids, want_ids)
    torch.testing.assert_close(probs, want_probs, rtol=1e-5, atol=1e-8)
    assert (ids >= 3 * 128).any()  # answers came from the second (last) chunk
    assert (ids < 3 * 128).any()  # and from the first


def test_a_traces_bytes_count_each_array_once(learned):
    """z is concat's heads apart (the same memory), so it is not counted again."""
    assert np.shares_memory(learned.z, learned.concat)
    sites = ("attn", "concat", "attn_out", "resid_mid", "resid_out", "b_o")
    assert learned.nbytes == sum(getattr(learned, name).nbytes for name in sites)
