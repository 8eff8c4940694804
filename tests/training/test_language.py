"""tfviz's own language models (issue 42): the character vocabulary, the training windows, the
validation loss, a short training run on a few kilobytes, and the model folder the app opens
(family "tfviz-lm"), attention-only layers included; text outside a model's alphabet refused by
name in both languages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tfviz import hf
from tfviz.core.model import Encoder
from tfviz.core.tasks import InputError
from tfviz.training import language
from tfviz.training.language import CharVocabulary, LanguageTask, language_config
from tfviz.words import translate

TEXT = (
    "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\nOr to take arms against a sea of troubles\n"
) * 8


@pytest.fixture(scope="module")
def vocab() -> CharVocabulary:
    return CharVocabulary("".join(sorted(set(TEXT))))


def tiny_model(vocab, ffn=True, seed=0, context=32) -> Encoder:
    torch.manual_seed(seed)
    config = language_config(vocab, context, n_layers=2, n_heads=2, d_model=16, ffn=ffn)
    return Encoder(config).eval()


def test_the_vocabulary_reads_text_back_and_names_what_it_lacks(vocab):
    ids = vocab.encode(TEXT[:200])
    assert ids.dtype == np.int64 and ids.max() < vocab.end_id
    assert vocab.decode(ids) == TEXT[:200]
    assert vocab.alphabet[ids[0]] == "T"
    with pytest.raises(ValueError, match="'Z'"):
        vocab.encode("To be, Zed")
    with pytest.raises(ValueError, match="sorted"):
        CharVocabulary("ba")


def test_training_windows_are_consecutive_text_and_targets_are_the_next_characters(vocab):
    ids = vocab.encode(TEXT)
    task = LanguageTask(ids, context=24)
    batch = task.sample(5, np.random.default_rng(3))
    assert batch.ids.shape == batch.target.shape == (5, 24)
    assert not batch.pad_mask.any()
    for x, y in zip(batch.ids.tolist(), batch.target.tolist(), strict=True):
        assert x[1:] == y[:-1]  # the target of position t is token t + 1
        window = vocab.decode(x + y[-1:])
        assert window in TEXT  # a real stretch of the text, not stitched together
    again = task.sample(5, np.random.default_rng(3))
    assert torch.equal(again.ids, batch.ids)


def test_the_validation_loss_is_the_mean_cross_entropy_of_consecutive_windows(vocab):
    model = tiny_model(vocab)
    ids = vocab.encode(TEXT)
    got = language.validation_loss(model, ids, context=16, max_windows=7, batch_size=3)
    total, count = 0.0, 0
    with torch.no_grad():
        for w in range(7):  # windows of 17 characters, one after another from the start
            window = torch.as_tensor(ids[w * 17 : (w + 1) * 17])
            logits = model(window[None, :-1], trace=False).logits[0]
            total += F.cross_entropy(logits, window[1:], reduction="sum").item()
            count += 16
    assert got == pytest.approx(total / count, rel=1e-5)


def test_a_short_run_learns_from_a_few_kilobytes_and_leaves_the_corpus_ids_alone(vocab):
    ids = vocab.encode(TEXT)
    before = ids.copy()
    config = language_config(vocab, 32, n_layers=1, n_heads=2, d_model=32, ffn=False)
    untrained = language.validation_loss(Encoder(config).eval(), ids, max_windows=20)
    model, history = language.train_language_model(ids, config, steps=150, batch_size=16,
                                                   lr=3e-3, device="cpu")  # fmt: skip
    assert history["steps_done"] == 150 and history["context"] == 32
    assert np.mean(history["loss"][-10:]) < np.mean(history["loss"][:10]) - 0.5
    assert language.validation_loss(model, ids, max_windows=20) < untrained - 0.5
    assert np.array_equal(ids, before)


def test_weight_decay_shrinks_the_matrices_and_leaves_the_gains_alone(vocab):
    """AdamW decays matrices and tables only: the same run with decay ends with smaller ones,
    while a norm's gain (1-d, never decayed) is where the run without decay left it, to within
    what the changed gradients move it."""
    ids = vocab.encode(TEXT)
    config = language_config(vocab, 16, n_layers=1, n_heads=2, d_model=16)
    runs = {
        wd: language.train_language_model(ids, config, steps=30, batch_size=4, lr=0.01,
                                          weight_decay=wd, device="cpu")[0]
        for wd in (0.0, 3.0)
    }  # fmt: skip
    for name in ("embed.weight", "layers.0.attn.W_q.weight", "pos"):
        plain, decayed = (runs[wd].get_parameter(name).norm() for wd in (0.0, 3.0))
        assert decayed < 0.8 * plain, name
    plain, decayed = (runs[wd].get_parameter("norm_f.weight") for wd in (0.0, 3.0))
    assert (decayed - plain).abs().max() < 0.2


def test_a_language_model_starts_from_gpt2s_initialisation(vocab):
    model = language.init_language_weights(Encoder(language_config(vocab, 32, n_layers=2)))
    L = model.config.n_layers
    assert model.embed.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.layers[1].attn.W_q.weight.std().item() == pytest.approx(0.02, rel=0.1)
    w_o = model.layers[0].attn.W_o.weight.std().item()
    assert w_o == pytest.approx(0.02 / (2 * L) ** 0.5, rel=0.1)
    assert torch.equal(model.layers[0].norm1.weight, torch.ones(model.config.d_model))
    assert not model.head.bias.any()


@pytest.mark.parametrize("ffn", [True, False])
def test_a_saved_language_folder_opens_as_the_same_model(tmp_path, vocab, ffn):
    model = tiny_model(vocab, ffn=ffn)
    folder = language.save_language_folder(
        tmp_path / "lm", model, vocab, {"steps": 0}, "A test model.", licence="cc0-1.0"
    )
    loaded = hf.open_folder(folder)
    assert loaded.family == "tfviz" and loaded.licence == "cc0-1.0"
    assert loaded.model.config == model.config
    task = hf.NextTokenTask(loaded.tokenizer)
    text = "To be, or not"
    ids, pad = task.encode_batch([text])
    assert ids[0].tolist() == vocab.encode(text).tolist()  # no BOS: the characters themselves
    with torch.no_grad():
        want = model(ids, trace=False).logits
        got = loaded.model(ids, pad, trace=False).logits
    assert torch.equal(got, want)
    labels = task.labels(text)  # one per character, unique ("o (1)": a repeated one)
    assert len(labels) == len(text) and labels[0] == "T" and labels[1].startswith("o")
    info = hf.describe_folder(folder)
    assert info.causal_lm and info.config.ffn is ffn


def test_text_outside_a_models_alphabet_is_refused_naming_each_character(tmp_path, vocab):
    folder = language.save_language_folder(tmp_path / "lm", tiny_model(vocab), vocab, {}, "x")
    task = hf.NextTokenTask(hf.open_folder(folder).tokenizer)
    for text, named in (("To be 我", ["'我' U+6211"]), ("be 🙂 or", ["'🙂' U+1F642"]),
                        ("to\x07be", ["U+0007"]), ("Zed Zed", ["'Z' U+005A"])):  # fmt: skip
        with pytest.raises(InputError) as caught:
            task.validate(text)
        error = caught.value
        assert error.code == "outside_alphabet"
        for name in named:
            assert name in error.values["chars"]
        assert error.values["n"] == len(named)
        zh = translate("zh", f"input.{error.code}", **error.values)
        assert named[0] in zh and "字符" in zh
        assert named[0] in str(error)  # the English
    task.validate("To be, or not to be")  # inside the alphabet: accepted
