"""Smoke test of bench/lm_train.py (tfviz's language-model training against a plain nanoGPT-style
loop), and the checks that make its comparison fair: the plain model computes tfviz's logits from
the same weights, its schedule is tfviz's, its validation loss is validation_loss, and from the
same initial weights both loops train alike (same windows, same optimiser). A few seconds."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from bench import lm_train as B
from tfviz.training import corpus
from tfviz.training.language import (
    LANGUAGE_RECIPES,
    CharVocabulary,
    validation_loss,
)
from tfviz.training.train import learning_rate

NUMBER = r"(\d+\.\d+)"


@pytest.fixture(scope="module")
def data():
    manifest = corpus.load_manifest(corpus.CORPUS_DIR)
    vocab = CharVocabulary(manifest["alphabet"])
    valid = vocab.encode(corpus.load_split(corpus.CORPUS_DIR, "valid"))
    return vocab, valid


def small(name: str, **changes) -> dict:
    return dict(LANGUAGE_RECIPES[name]) | {"context": 16} | changes


def test_main_prints_a_ratio_and_two_validation_losses(capsys):
    result = B.main(["--steps", "20", "--rounds", "1", "--context", "16", "--max-windows", "200"])
    out = capsys.readouterr().out
    assert re.search(r"^recipe shakespeare-char \(", out, re.M), out
    assert re.search(r"^torch \S+, 1 thread\(s\), CPU .+", out, re.M), out
    ratio = re.search(rf"^ratio ours/plain {NUMBER} \(median; rounds {NUMBER}\)", out, re.M)
    assert ratio, out
    assert float(ratio.group(1)) > 0 and math.isclose(float(ratio.group(1)), result["ratio"],
                                                      abs_tol=1e-3)  # fmt: skip
    seconds = re.search(rf"^seconds per run \(median of 1\): plain {NUMBER}  ours {NUMBER}", out,
                        re.M)  # fmt: skip
    assert seconds, out
    val = re.search(
        rf"^validation loss \(200 windows of 16 \+ 1, nats/char\): plain {NUMBER}  ours {NUMBER}"
        r"  difference ours - plain ([+-]\d+\.\d+)",
        out,
        re.M,
    )
    assert val, out
    plain, ours, diff = (float(g) for g in val.groups())
    # 20 steps from N(0, 0.02): both well below a uniform guess over the vocabulary
    vocab_size = len(corpus.load_manifest(corpus.CORPUS_DIR)["alphabet"]) + 1
    assert 0 < plain < math.log(vocab_size) and 0 < ours < math.log(vocab_size), out
    assert math.isclose(diff, ours - plain, abs_tol=2e-4), out
    assert torch.get_num_threads() == 1  # main restored the thread count it found


@pytest.mark.parametrize("name", sorted(LANGUAGE_RECIPES))
def test_plain_model_computes_tfviz_logits_from_the_same_weights(name, data):
    vocab, valid = data
    recipe = small(name)
    encoder = B.tfviz_initial(vocab, recipe)
    with torch.no_grad():  # trained-looking weights: gains, biases and positions not at init
        for p in encoder.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    plain = B.copy_tfviz_weights(encoder, B.plain_model(vocab.size, recipe)).eval()
    assert sum(p.numel() for p in plain.parameters()) == sum(
        p.numel() for p in encoder.parameters()
    )
    ids = torch.as_tensor(valid[: 4 * 16].reshape(4, 16))
    with torch.no_grad():
        ours = encoder(ids, trace=False).logits
        theirs, _ = plain(ids)
    assert ours.shape == theirs.shape == (4, 16, vocab.size)
    assert (ours - theirs).abs().max().item() < 1e-5


def test_schedule_and_validation_loss_are_tfviz_own(data):
    vocab, valid = data
    for steps in (1, 20, 300, 2000):
        for it in range(steps):
            assert math.isclose(
                B.get_lr(it, steps, 1e-3), learning_rate(it, steps, 1e-3, "cosine"), rel_tol=1e-12
            )
    encoder = B.tfviz_initial(vocab, small("shakespeare-char"))
    ours = validation_loss(encoder, valid, 16, max_windows=100)
    bench = B.windowed_loss(lambda x: encoder(x, trace=False).logits, valid, 16, max_windows=100)
    assert abs(ours - bench) < 1e-6


def test_both_loops_train_alike_from_the_same_weights(data):
    """Same initial weights, same windows, same optimiser: the two loops' losses agree step by
    step up to float rounding (the fused qkv map rounds differently)."""
    vocab, _ = data
    recipe = small("shakespeare-char")
    train = vocab.encode(corpus.load_split(corpus.CORPUS_DIR, "train")[:200_000])
    _, plain_losses = B.run_plain(train, vocab.size, recipe, 20, B.tfviz_initial(vocab, recipe))
    _, history = B.run_ours(train, vocab, recipe, 20)
    assert len(plain_losses) == len(history["loss"]) == 20
    np.testing.assert_allclose(plain_losses, history["loss"], rtol=0, atol=1e-4)
