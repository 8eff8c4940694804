"""The bundled language models (issue 42), re-measured on their own weights: each folder opens as
the decoder its config says, its validation loss on a short slice of the held-out plays and its
induction probe are what its record says, nanoGPT's validation loss at its CPU setting (1.88
nats per character) is beaten, and the docs state the figures the records hold. Nothing is
trained here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfviz import hf
from tfviz.analysis.induction import measure_induction
from tfviz.core.interventions import Interventions
from tfviz.training import corpus, language
from tfviz.ui.folders import LANGUAGE_DIR

ROOT = LANGUAGE_DIR.parents[1]
NAMES = list(language.LANGUAGE_RECIPES)
NANOGPT_LOSS = 1.88  # nanoGPT's README: shakespeare_char at its CPU setting, validation loss
MAX_BYTES = 10 * 2**20


@pytest.fixture(scope="module")
def valid_ids():
    return language.bundled_corpus()[2]


def open_language_folder(name: str):
    return hf.open_folder(LANGUAGE_DIR / name)


def record(name: str) -> dict:
    return json.loads((LANGUAGE_DIR / name / "config.json").read_text())["record"]


@pytest.mark.parametrize("name", NAMES)
def test_each_bundled_language_model_opens_as_its_recipe_says(name):
    loaded = open_language_folder(name)
    recipe, c = language.LANGUAGE_RECIPES[name], loaded.model.config
    assert loaded.family == "tfviz" and c.causal
    assert (c.n_layers, c.n_heads, c.d_model, c.ffn, c.max_len) == (
        recipe["n_layers"], recipe["n_heads"], recipe["d_model"], recipe["ffn"],
        recipe["context"],
    )  # fmt: skip
    manifest = corpus.load_manifest(corpus.CORPUS_DIR)
    assert set(loaded.tokenizer.alphabet) == set(manifest["alphabet"])
    assert record(name)["corpus_sha256"] == manifest["valid"]["sha256"]
    assert record(name)["steps_done"] >= recipe["steps"]
    size = sum(p.stat().st_size for p in (LANGUAGE_DIR / name).iterdir())
    assert size <= MAX_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_the_validation_loss_on_a_slice_is_the_records(name, valid_ids):
    rec = record(name)
    got = language.validation_loss(
        open_language_folder(name).model, valid_ids, max_windows=rec["valid_slice_windows"]
    )
    # Float kernels differ between processors: equal to well under the figures' last digit.
    assert got == pytest.approx(rec["valid_loss_slice"], abs=2e-4)


def test_the_nanogpt_sized_model_beats_nanogpts_own_validation_loss():
    rec = record("shakespeare-char")
    assert rec["valid_loss"] <= NANOGPT_LOSS
    assert rec["valid_chars"] > 400_000  # the whole validation split, not a slice


@pytest.mark.parametrize("name", NAMES)
def test_the_induction_probe_gives_the_records_scores(name):
    loaded = open_language_folder(name)
    vocab = language.CharVocabulary("".join(sorted(loaded.tokenizer.alphabet)))
    ids = language.induction_probe(vocab, loaded.model.config.max_len)
    scores = measure_induction(loaded.model, ids)
    rec = record(name)
    # The best score and the drop (which head is best may swap between near-equal heads on
    # another processor; the scores may not move).
    assert scores.best()[2] == pytest.approx(rec["induction_best"]["score"], abs=2e-3)
    assert float(scores.previous_token.max()) == pytest.approx(rec["previous_token_best"], abs=2e-3)
    assert scores.in_context_drop == pytest.approx(rec["in_context_drop"], abs=5e-3)


def test_switching_layer_0s_w_o_off_moves_layer_1s_attention_not_layer_0s():
    """What the lesson's last step switches: layer 0's W_o feeds every later layer, so with it
    off layer 1's heads score differently while layer 0's own attention is untouched."""
    loaded = open_language_folder("shakespeare-2l-attn")
    vocab = language.CharVocabulary("".join(sorted(loaded.tokenizer.alphabet)))
    ids = language.induction_probe(vocab, loaded.model.config.max_len)[:8]
    learned = measure_induction(loaded.model, ids)
    off = measure_induction(loaded.model, ids, Interventions(w_o={0: "identity"}))
    np.testing.assert_allclose(off.previous_token[0], learned.previous_token[0], atol=1e-6)
    assert np.abs(off.previous_token[1] - learned.previous_token[1]).max() > 0.01


@pytest.mark.parametrize("name", NAMES)
def test_the_docs_state_each_models_figures(name):
    """docs/language.md (and its Chinese) give each model's validation loss and best induction
    score as its record has them."""
    rec = record(name)
    for doc in ("language.md", "language.zh.md"):
        text = (ROOT / "docs" / doc).read_text()
        assert f"{rec['valid_loss']:.3f}" in text, (doc, name)
        assert f"{rec['induction_best']['score']:.3f}" in text, (doc, name)


def test_the_readme_states_the_nanogpt_sized_models_loss():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{record('shakespeare-char')['valid_loss']:.3f} nats per character" in readme
