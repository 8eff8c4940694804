"""bench/hf_decoders.py: its folders open in tfviz and in transformers, every length is timed on
exactly that many tokens, both sides run the same model, and its default sizes are the real
models' (GPT-2 small, DistilGPT2, SmolLM-135M, Qwen2-0.5B) and within what tfviz opens.

The folders are built tiny here (2 layers, D = 32): what is checked does not depend on the sizes
the bench uses. transformers builds them and is the reference: without it these tests skip,
except under CI=true.
"""

from __future__ import annotations

import os

import pytest
import torch

from tfviz import hf
from tfviz.core import buffers

IN_CI = os.environ.get("CI", "").lower() == "true"
try:
    import transformers  # noqa: F401 - the builder's dependency
except ImportError:  # pragma: no cover - a test-only dependency
    if IN_CI:
        raise
    pytest.skip("transformers is not installed", allow_module_level=True)

from bench import hf_decoders  # noqa: E402
from bench.decoder_folders import hf_config  # noqa: E402
from tfviz.hf.decoder_weights import MAX_DECODER_PARAMS, decoder_config  # noqa: E402
from tfviz.hf.decoders import decoder_family_of  # noqa: E402

SMALL = dict(layers=2, heads=4, hidden=32, ff=64, vocab=512, positions=512)
ROTARY = dict(SMALL, kv_heads=2, rope_theta=10_000.0, eps=1e-5)
TINY = {"gpt2": SMALL, "llama": ROTARY, "qwen2": ROTARY}
# The real models' parameter counts (their own model cards and config.json).
REAL = {"gpt2": 124_439_808, "llama": 134_515_008, "qwen2": 494_032_768}
DISTILGPT2 = 81_912_576


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    for kind in hf_decoders.FAMILIES:
        hf_decoders.build(kind, root / kind, TINY[kind])
    return root


@pytest.fixture(scope="module")
def measured(built):
    return {kind: hf_decoders.measure(str(built / kind), 2, 1) for kind in hf_decoders.FAMILIES}


@pytest.mark.parametrize("kind", list(hf_decoders.FAMILIES))
def test_each_length_is_timed_on_exactly_that_many_tokens_and_both_sides(measured, kind):
    r = measured[kind]
    s = TINY[kind]
    L, H, D = s["layers"], s["heads"], s["hidden"]
    for n in hf_decoders.LENGTHS:
        row = r[str(n)]
        assert row["tokens"] == n
        # the same model on the same ids: the attention weights agree
        assert row["attn_max_diff"] < 1e-5
        # one trace: attn (L, H, T, T), z (L, H, T, d_k), four (L, T, D) sites, b_o (L, D),
        # and the next tokens: the 5 likeliest ids (int64) and their probabilities (T, 5)
        floats = L * H * n * n + L * H * n * (D // H) + 4 * L * n * D + L * D + n * 5
        assert row["trace_mib"] == pytest.approx((4 * floats + 8 * n * 5) / 2**20)
        for side in ("tfviz", "transformers"):
            median, p95 = row[side]
            assert 0 < median <= p95
            assert row[f"{side}_cpu"] > 0
        assert row["ratio_median"] == pytest.approx(row["tfviz"][0] / row["transformers"][0])
        # the last trace dropped, its memory is kept for the next: at least that trace's stack
        assert row["kept_mib"] >= 4 * (L * H * n * n + 4 * L * n * D) / 2**20 or (
            4 * (L * H * n * n + 4 * L * n * D) < buffers.MIN_BYTES
        )
    assert r["params"] >= r["hf_params"] > 0  # tfviz adds zero biases where a family has none
    assert set(r["rss"]) == {"all", "private", "file"}
    lines = hf_decoders.table(kind, r, 1.0)
    assert [line.split(" |")[0] for line in lines if line.startswith("| 32 |")] == ["| 32"]
    assert any(line.startswith("| 256 |") for line in lines)


@pytest.mark.parametrize("kind", list(hf_decoders.FAMILIES))
def test_timing_ids_are_plain_pieces_framed_as_the_family_frames_a_text(built, kind):
    tokenizer = hf.open_folder(built / kind).tokenizer
    ids = hf_decoders.timing_ids(tokenizer, 256, seed=3)
    assert len(ids) == 256 and ids == hf_decoders.timing_ids(tokenizer, 256, seed=3)
    framed = list(tokenizer.before)  # Llama: the beginning-of-sequence token; others: none
    assert ids[: len(framed)] == framed and (kind == "llama") == bool(framed)
    specials = {tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.unk_id}
    assert not specials & set(ids[len(framed) :])
    assert max(ids) < tokenizer.vocab_size


@pytest.mark.parametrize("kind", list(hf_decoders.FAMILIES))
def test_the_default_sizes_are_the_real_models_and_tfviz_opens_them(kind):
    sizes = hf_decoders.SIZES[kind]
    cfg, cls = hf_config(kind, sizes)
    with torch.device("meta"):  # no memory: the parameter count from the shapes
        assert sum(p.numel() for p in cls(cfg).parameters()) == REAL[kind]
        if kind == "gpt2":
            small, cls = hf_config(kind, hf_decoders.SMALL_GPT2)
            assert sum(p.numel() for p in cls(small).parameters()) == DISTILGPT2
    raw = cfg.to_dict()
    arch = decoder_family_of(raw).read(raw)
    config = decoder_config(arch, MAX_DECODER_PARAMS)  # not refused as too large
    assert (config.n_layers, config.d_model, config.vocab_size) == (
        sizes["layers"], sizes["hidden"], sizes["vocab"]
    )  # fmt: skip
    assert config.kv_heads == sizes.get("kv_heads", sizes["heads"])
    assert config.max_len >= max(hf_decoders.LENGTHS)
