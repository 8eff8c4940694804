"""The logit lens and direct contributions (tfviz.analysis.lens), exact against an independent
computation in numpy float64 from the weights: the last layer's lens is the model's own answer,
every other layer's is the test's own norm and unembedding of that layer's stream, and the
direct contributions with the biases add up to the target's logit, learned and switched.

Families: GPT-2-style (LayerNorm, tied head) and Llama-style (RMSNorm, untied head) tiny random
folders, a BERT masked-LM folder (post-norm: the last layer's split only), and the bundled
character language model (a tfviz decoder). A toy task's model has no vocabulary: refused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.conftest import MODELS
from tests.hf.test_hf_decoders import build as build_decoder  # skips without transformers
from tests.hf.test_hf_encoders import MASKED
from tests.hf.test_hf_encoders import _build as build_encoder
from tfviz import get_task, hf, load_checkpoint
from tfviz.analysis import lens
from tfviz.core.interventions import Interventions
from tfviz.core.trace import run_trace
from tfviz.hf.pretrained import SentenceTask
from tfviz.words import catalogue

TEXT = "the quick brown fox jumps over the lazy dog"
CHAR_TEXT = "To be, or not to be, that is the question"
SWITCHED = Interventions(w_o="identity", ablate_heads=[(0, 1)])
LARGEST = {}  # family -> the largest differences measured, printed at the end (-s)


@pytest.fixture(scope="module")
def families(tmp_path_factory) -> dict:
    """family -> (model, task, text): the three tiny random folders and the bundled LM."""
    root = tmp_path_factory.mktemp("lens")
    out = {}
    for kind in ("gpt2", "llama"):
        build_decoder(kind, root / kind)
        loaded = hf.open_folder(root / kind)
        out[kind] = (loaded.model, hf.NextTokenTask(loaded.tokenizer), TEXT)
    build_encoder("bert", root / "bert")
    loaded = hf.open_folder(root / "bert")
    task = SentenceTask(loaded.tokenizer, head=loaded.head)
    out["bert"] = (loaded.model, task, MASKED)
    loaded = hf.open_folder(MODELS / "language" / "shakespeare-char")
    out["char"] = (loaded.model, hf.NextTokenTask(loaded.tokenizer), CHAR_TEXT)
    return out


def np_weights(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().double().numpy() for k, v in module.state_dict().items()}


def np_norm(x: np.ndarray, w: dict, at: str, rms: bool, eps: float) -> np.ndarray:
    """LayerNorm or RMSNorm over the last axis, from the weights named at + weight/bias."""
    if rms:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w[at + "weight"]
    centred = x - x.mean(-1, keepdims=True)
    scaled = centred / np.sqrt((centred * centred).mean(-1, keepdims=True) + eps)
    return scaled * w[at + "weight"] + w[at + "bias"]


def np_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def np_logits(model, task, x: np.ndarray) -> np.ndarray:
    """The test's own readout of streams x (..., D): final norm and unembedding (a decoder), or
    the MLM head's dense, GELU, LayerNorm and decoder (BERT)."""
    cfg = model.config
    w = np_weights(model)
    if cfg.causal:
        x = np_norm(x, w, "norm_f.", cfg.norm_type == "rms", cfg.norm_eps)
        return x @ w["head.weight"].T + w.get("head.bias", 0.0)
    h = np_weights(task.head)
    y = np_gelu(x @ h["dense.weight"].T + h["dense.bias"])
    return np_norm(y, h, "norm.", False, cfg.norm_eps) @ h["decoder.weight"].T + h["bias"]


def np_softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def streams_of(model, task, text: str, iv: Interventions | None) -> np.ndarray:
    """(L + 1, T, D) float64: the embedding, then every layer's output, from the model's trace."""
    ids, pad = task.encode_batch([task.validate(text)])
    with torch.no_grad():
        trace = model(ids, pad, iv, trace=True).trace
    rows = [trace.embed[0]] + [lt.resid_out[0] for lt in trace.layers]
    return torch.stack(rows).double().numpy()


def note(family: str, what: str, value: float) -> None:
    LARGEST.setdefault(family, {})
    LARGEST[family][what] = max(LARGEST[family].get(what, 0.0), float(value))


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "char"])
@pytest.mark.parametrize("switched", [False, True])
def test_every_layers_lens_is_the_norm_and_unembedding_of_its_stream(families, family, switched):
    model, task, text = families[family]
    iv = SWITCHED if switched else None
    got = lens.logit_lens(model, task, text, iv, k=4)
    probs = np_softmax(np_logits(model, task, streams_of(model, task, text, iv)))  # (R, T, V)
    L, T = model.config.n_layers, len(task.labels(text))
    assert got.ids.shape == got.probs.shape == got.tokens.shape == (L + 1, T, 4)
    assert got.rows == ("embed", *(f"L{i}" for i in range(L)))
    # the lens's ids carry the test's own probabilities, and those are the test's top 4
    at_ids = np.take_along_axis(probs, got.ids, axis=-1)
    diff = max(
        np.abs(at_ids - got.probs).max(), np.abs(-np.sort(-probs)[..., :4] - got.probs).max()
    )
    note(family, "lens probability (every layer)", diff)
    assert diff < 1e-5
    assert got.tokens[0, 0, 0] == task.tokenizer.piece_text(int(got.ids[0, 0, 0]))


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "char"])
def test_the_last_layers_lens_is_the_models_own_answer(families, family):
    model, task, text = families[family]
    got = lens.logit_lens(model, task, text, SWITCHED)
    if model.config.causal:
        own = run_trace(model, task, text, SWITCHED)
        np.testing.assert_array_equal(got.ids[-1], own.top_ids)
        diff = np.abs(got.probs[-1] - own.top_probs).max()
    else:
        ids, _ = task.encode_batch([task.validate(text)])
        logits = hf.masked_lm_logits(model, task.head, ids, None, SWITCHED)[0].double()
        top = torch.softmax(logits, -1).topk(got.ids.shape[-1])
        np.testing.assert_array_equal(got.ids[-1], top.indices.numpy())
        diff = np.abs(got.probs[-1] - top.values.numpy()).max()
    note(family, "last layer's lens vs the model", diff)
    assert diff < 1e-5


def np_contributions(model, task, text: str, iv, position: int, target: int) -> dict:
    """The test's own direct split of a pre-norm decoder's logit: each component through the
    final norm centred (LayerNorm), over the full stream's scale, times its weight, dotted with
    the target's unembedding row. Returns the components (name -> value) and the logit."""
    cfg, w = model.config, np_weights(model)
    ids, pad = task.encode_batch([task.validate(text)])
    with torch.no_grad():
        trace = model(ids, pad, iv, trace=True).trace
    t = position
    x = trace.layers[-1].resid_out[0, t].double().numpy()
    rms = cfg.norm_type == "rms"
    scale = np.sqrt((x * x).mean() + cfg.norm_eps) if rms else np.sqrt(x.var() + cfg.norm_eps)
    row = w["head.weight"][target]

    def through(c: np.ndarray) -> float:
        c = c if rms else c - c.mean()
        return float(c / scale * w["norm_f.weight"] @ row)

    parts = {"embed": through(trace.embed[0, t].double().numpy())}
    for i, lt in enumerate(trace.layers):
        mode = lt.w_o_mode
        W_o = np.eye(cfg.d_model) if mode == "identity" else w[f"layers.{i}.attn.W_o.weight"]
        b_o = np.zeros(cfg.d_model) if mode == "identity" else w[f"layers.{i}.attn.W_o.bias"]
        z = lt.z[0, :, t].double().numpy()  # (H, d_k), an ablated head's zero
        d_k = z.shape[-1]
        for h in range(cfg.n_heads):
            parts[f"L{i}H{h}"] = through(z[h] @ W_o[:, h * d_k : (h + 1) * d_k].T)
        parts[f"L{i} b_o"] = through(b_o)
        mid, out = lt.resid_mid[0, t].double().numpy(), lt.resid_out[0, t].double().numpy()
        parts[f"L{i} MLP"] = through(out - mid)
    logit = np_logits(model, task, x)[target]
    return dict(parts=parts, logit=logit)


@pytest.mark.parametrize("family", ["gpt2", "llama", "char"])
@pytest.mark.parametrize("switched", [False, True])
def test_a_decoders_direct_contributions_add_up_to_the_logit(families, family, switched):
    model, task, text = families[family]
    iv = SWITCHED if switched else None
    got = lens.direct_contributions(model, task, text, iv, position=3, target="next")
    ids, _ = task.encode_batch([task.validate(text)])
    assert got.position == 3 and got.target == int(ids[0, 4]) and got.scope == lens.ALL_LAYERS
    own = np_contributions(model, task, text, iv, 3, got.target)
    relative = abs(got.total - own["logit"]) / max(1.0, abs(own["logit"]))
    note(family, "sum of contributions vs logit (relative)", relative)
    assert relative < 1e-4 and abs(got.logit - own["logit"]) < 1e-4 * max(1.0, abs(own["logit"]))
    named = got.named()
    worst = max(abs(named[name] - value) for name, value in own["parts"].items())
    note(family, "each component vs the test's own", worst)
    assert worst < 1e-5
    L, H = model.config.n_layers, model.config.n_heads
    assert got.heads.shape == (L, H) and not np.isnan(got.heads).any()
    assert got.heads[0, 1] == (0.0 if switched else named["L0H1"])
    assert [abs(v) for _, v in got.ranked] == sorted((abs(v) for _, v in got.ranked), reverse=True)


def np_bert_split(model, task, text: str, iv, target: int) -> dict:
    """The test's own split of a BERT masked-LM logit at the mask: the last layer's input,
    heads and b_o through norm1, its MLP through norm2, the head's GELU as its actual ratio,
    every LayerNorm linearised at its actual input; the biases as constants."""
    cfg, w, h = model.config, np_weights(model), np_weights(task.head)
    ids, pad = task.encode_batch([task.validate(text)])
    t = task.pieces(task.validate(text)).masked[0]
    with torch.no_grad():
        lt = model(ids, pad, iv, trace=True).trace.layers[-1]
    at, eps = f"layers.{cfg.n_layers - 1}.", cfg.norm_eps

    def back(x: np.ndarray, weight: np.ndarray, u: np.ndarray) -> np.ndarray:
        v = weight * u / np.sqrt(x.var() + eps)
        return v - v.mean()

    pre, attn_out = (s[0, t].double().numpy() for s in (lt.resid_pre, lt.attn_out))
    mid = np_norm(pre + attn_out, w, at + "norm1.", False, eps)
    hidden = np_gelu(mid @ w[at + "ff.fc1.weight"].T + w[at + "ff.fc1.bias"])
    mlp = hidden @ w[at + "ff.fc2.weight"].T + w[at + "ff.fc2.bias"]
    final = np_norm(mid + mlp, w, at + "norm2.", False, eps)
    a = final @ h["dense.weight"].T + h["dense.bias"]
    u = back(np_gelu(a), h["norm.weight"], h["decoder.weight"][target]) * np_gelu(a) / a
    u2 = back(mid + mlp, w[at + "norm2.weight"], h["dense.weight"].T @ u)
    u1 = back(pre + attn_out, w[at + "norm1.weight"], u2)
    z, W_o = lt.z[0, :, t].double().numpy(), lt.W_o.double().numpy()
    d_k = z.shape[-1]
    heads = [float(z[k] @ W_o[:, k * d_k : (k + 1) * d_k].T @ u1) for k in range(cfg.n_heads)]
    return dict(heads=np.array(heads), earlier=float(pre @ u1), mlp=float(mlp @ u2),
                logit=np_logits(model, task, final)[target])  # fmt: skip


@pytest.mark.parametrize("switched", [False, True])
def test_a_masked_lms_split_holds_for_its_last_layer(families, switched):
    model, task, text = families["bert"]
    iv = SWITCHED if switched else None
    pair = lens.compare_contributions(model, task, text, iv)
    got = pair.switched if switched else pair.learned
    assert got.target == pair.learned.target  # both split the learned model's top guess
    assert got.position == task.pieces(task.validate(text)).masked[0]
    assert got.scope == lens.LAST_LAYER
    assert np.isnan(got.heads[:-1]).all() and np.isnan(got.mlp[:-1]).all()
    own = np_bert_split(model, task, text, iv, got.target)
    relative = abs(got.total - own["logit"]) / max(1.0, abs(own["logit"]))
    note("bert", "sum of contributions vs logit (relative)", relative)
    assert relative < 1e-4
    named = got.named()
    worst = max(
        np.abs(got.heads[-1] - own["heads"]).max(),
        abs(named[lens.EARLIER] - own["earlier"]),
        abs(got.mlp[-1] - own["mlp"]),
    )
    note("bert", "each component vs the test's own", worst)
    assert worst < 1e-5


def test_learned_and_switched_lenses_differ_only_when_switched(families):
    model, task, text = families["char"]
    same = lens.compare_lens(model, task, text, None, positions=[-1])
    assert same.learned is same.switched and same.learned.positions == (len(text) - 1,)
    pair = lens.compare_lens(model, task, text, SWITCHED, positions=[0, -1])
    assert pair.switched.interventions == SWITCHED
    np.testing.assert_array_equal(pair.learned.ids[0], pair.switched.ids[0])  # the embedding
    assert not np.array_equal(pair.learned.probs[-1], pair.switched.probs[-1])


def test_a_toy_model_has_no_lens_and_is_told_so(families):
    model, meta = load_checkpoint(MODELS / "reverse.safetensors")
    for call in (lens.logit_lens, lens.direct_contributions):
        with pytest.raises(lens.LensRefused) as refused:
            call(model, get_task(meta.task), "abc")
        assert refused.value.key == "refusal.lens.no_vocabulary"
        assert refused.value.key in catalogue("en") and refused.value.key in catalogue("zh")
        assert "not defined" in str(refused.value)


def test_a_position_or_target_out_of_reach_is_refused_by_name(families):
    model, task, text = families["char"]
    cases = [
        (dict(position=len(text)), "refusal.lens.position"),
        (dict(position=-1, target="next"), "refusal.lens.no_next_token"),
        (dict(target=10**6), "refusal.lens.target"),
    ]
    for kwargs, key in cases:
        with pytest.raises(lens.LensRefused) as refused:
            lens.direct_contributions(model, task, text, **kwargs)
        assert refused.value.key == key and key in catalogue("zh")


def test_print_the_largest_differences():
    """Not a check: the largest differences each family's checks measured (pytest -s)."""
    for family, measured in LARGEST.items():
        print(family, {k: f"{v:.2e}" for k, v in measured.items()})
