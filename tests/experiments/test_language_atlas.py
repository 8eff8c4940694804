"""The language atlas (tfviz.experiments.language_atlas): its arms are what they say, a run is a
function of its spec, and the CLI sweeps it resumably. The bundled rows are read in
tests/experiments/test_language_atlas_rows.py."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
import torch

from tfviz.cli import atlas as cli
from tfviz.core.interventions import Interventions
from tfviz.core.model import Encoder
from tfviz.experiments import language_atlas as la
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LANGUAGE_FORMAT, LanguageCell
from tfviz.experiments.atlas_store import read_rows
from tfviz.training import language


@pytest.fixture(scope="module")
def small():
    """A small causal character model of the corpus's alphabet, GPT-2's initialisation."""
    config = language.language_config(language.corpus_vocabulary(), 16, 2, 4, 32, True)
    torch.manual_seed(0)
    return language.init_language_weights(Encoder(config)).eval()


def _gated(model: Encoder, bias: float) -> Encoder:
    g = copy.deepcopy(model)
    la.with_gates(g, 0)
    for layer in g.layers:
        torch.nn.init.zeros_(layer.attn.W_g.weight)
        torch.nn.init.constant_(layer.attn.W_g.bias, bias)
    return g.eval()


def test_a_gate_held_open_is_the_plain_model_and_a_shut_one_silences_every_head(small):
    ids = torch.randint(
        0, small.config.vocab_size, (3, 16), generator=torch.Generator().manual_seed(1)
    )
    plain = small(ids).logits
    # sigmoid(60) is 1 in float32: the gated model is then exactly the model it was made from.
    assert torch.equal(_gated(small, 60.0)(ids).logits, plain)
    every_head = [(lay, h) for lay in range(2) for h in range(4)]
    silent = small(ids, interventions=Interventions(ablate_heads=every_head)).logits
    assert torch.equal(_gated(small, -120.0)(ids).logits, silent)
    assert not torch.allclose(silent, plain)


def test_a_gate_is_one_number_a_head_and_token_from_the_layer_input(small, monkeypatch):
    g = _gated(small, 0.0)
    attn = g.layers[0].attn
    torch.nn.init.normal_(attn.W_g.weight, 0.0, 1.0, generator=torch.Generator().manual_seed(2))
    assert attn.W_g.weight.shape == (4, 32)  # D in, one gate per head out
    seen = []
    plain_forward = la.MultiHeadAttention.forward

    def spy(self, x, pad_mask, sw, *rest):
        seen.append((x, sw.gate))
        return plain_forward(self, x, pad_mask, sw, *rest)

    monkeypatch.setattr(la.MultiHeadAttention, "forward", spy)
    g(torch.arange(10).view(2, 5))
    x, gate = seen[0]  # layer 0: its input (after the norm) and the gate its heads were given
    assert gate.shape == (2, 4, 5, 1)
    expected = torch.sigmoid(x @ attn.W_g.weight.T + attn.W_g.bias)  # (B, T, H)
    assert torch.allclose(gate[..., 0], expected.transpose(1, 2), atol=1e-6)
    assert gate.std() > 0.05  # the gates differ by head and token
    assert torch.equal(seen[1][1], torch.full((2, 4, 5, 1), 0.5))  # layer 1: W_g 0, bias 0


def test_with_gates_keeps_the_encoder_weights_and_draws_the_gates_from_the_seed(small):
    a, b = copy.deepcopy(small), copy.deepcopy(small)
    la.with_gates(a, 3)
    la.with_gates(b, 3)
    plain = small.state_dict()
    gated = a.state_dict()
    assert set(gated) - set(plain) == {
        f"layers.{i}.attn.W_g.{p}" for i in (0, 1) for p in ("weight", "bias")
    }
    assert all(torch.equal(gated[k], v) for k, v in plain.items())
    assert torch.equal(a.layers[1].attn.W_g.weight, b.layers[1].attn.W_g.weight)
    assert a.layers[1].attn.W_g.weight.std().item() == pytest.approx(0.02, rel=0.3)


def test_each_arm_trains_what_it_says_from_the_same_start():
    _, train_ids, _, _ = language.bundled_corpus()
    config = language.language_config(language.corpus_vocabulary(), 16, 2, 4, 32, False)
    starts, ends = {}, {}
    for arm in LANGUAGE_ARMS:
        prepare = la._prepare(arm, 0)

        def keep(model, arm=arm, prepare=prepare):
            params = prepare(model)
            starts[arm] = copy.deepcopy(model.state_dict())
            return params

        model, _ = language.train_language_model(
            train_ids[:50_000],
            config,
            5,
            4,
            1e-3,
            0,
            0.1,
            "cpu",
            w_o=la.switches(arm).w_o,
            prepare=keep,
        )
        ends[arm] = model.state_dict()
    for arm in LANGUAGE_ARMS:  # the same encoder at the start (the gates come after)
        assert all(torch.equal(starts[arm][k], v) for k, v in starts["learned"].items())
    w_o = "layers.0.attn.W_o.weight"
    assert torch.equal(ends["frozen"][w_o], starts["frozen"][w_o])
    for arm in ("learned", "gated"):
        assert not torch.equal(ends[arm][w_o], starts[arm][w_o])
    # with W_o off or taken apart its weights get no gradient; everything else trains
    assert not torch.equal(
        ends["identity"]["layers.0.attn.W_q.weight"], starts["identity"]["layers.0.attn.W_q.weight"]
    )
    assert not torch.equal(
        ends["gated"]["layers.1.attn.W_g.weight"], starts["gated"]["layers.1.attn.W_g.weight"]
    )


def test_the_plan_is_every_cell_every_arm_every_seed_with_keys_that_read_back():
    specs = la.plan(5)
    assert len(specs) == 8 * 5 * 5
    assert len({s.key for s in specs}) == len(specs)
    assert {s.cell.key for s in specs} == {
        f"language/L2/{f}/H{h}/D{d}" for f in ("ffn", "noffn") for h in (4, 8) for d in (64, 128)
    }
    for s in specs[:7]:
        assert la.LanguageRunSpec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
        assert LanguageCell.from_key(s.cell.key) == s.cell
    assert specs[0].key == "language/L2/noffn/H4/D64/learned/s0"
    assert la.LanguageRunSpec(specs[0].cell, "gated", 1, 7).key.endswith("/gated/s1/b7")
    with pytest.raises(ValueError, match="arm"):
        la.LanguageRunSpec(specs[0].cell, "identity_readout", 0)
    for bad in ("language/L2/noffn/H3/D64", "sort/L2/noffn/H4/D64", "language/L2/nope/H4/D64"):
        with pytest.raises(ValueError, match="language atlas cell"):
            LanguageCell.from_key(bad)


def test_a_run_is_a_function_of_its_spec():
    spec = la.LanguageRunSpec(LanguageCell(2, False, 4, 64), "gated", 1, 12).to_dict()
    a, b = la.run_language(spec), la.run_language(spec)
    assert a.pop("seconds") >= 0 and b.pop("seconds") >= 0
    assert a == b
    assert a["format"] == LANGUAGE_FORMAT and a["key"] == "language/L2/noffn/H4/D64/gated/s1/b12"
    assert a["valid_curve"][-1][0] == 12 and len(a["curve"]) == 2
    assert 0.0 <= a["induction"]["score"] <= 1.0
    # the final loss is over VALID_WINDOWS windows of the validation split, the curve over fewer
    assert a["valid_windows"] == la.VALID_WINDOWS > a["curve_windows"]


def test_the_cli_sweeps_the_language_atlas_on_dask_and_resumes(tmp_path, capsys):
    out = tmp_path / "language.jsonl"
    argv = ["run", "--language", "--cells", "language/L2/noffn/H4/D64", "--seeds", "1"]
    argv += ["--budget", "3", "--out", str(out), "--workers", "1"]
    assert cli.main([*argv, "--plan"]) == 0
    assert "5 to run" in capsys.readouterr().out
    assert cli.main(argv) == 0
    rows = read_rows(out, LANGUAGE_FORMAT)
    assert sorted(r["arm"] for r in rows.values()) == sorted(LANGUAGE_ARMS)
    assert read_rows(out) == {}  # not the toy atlas's rows
    assert cli.main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert cli.main([*argv[:3], "language/L2/noffn/H3/D64"]) == 2


def test_the_dask_bench_runs_the_language_atlas_and_its_rows_equal_the_plain_runs():
    """bench/atlas_dask.py --language, tiny: it prints the speed-up and rows equal without Dask
    (its figures are measured by running it, bench/README.md)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "bench.atlas_dask", "--language", "--runs", "2", "--budget", "3"]
    env = {**os.environ, "PYTHONPATH": str(root)}  # the workers import bench and tfviz too
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "2 runs of 3 steps (language, L2, attention only, H4, D64)" in out.stdout
    assert re.search(r"runs per minute, 2 workers / 1 worker: \d+\.\d\d", out.stdout)
    assert (
        "rows equal to the runs without Dask (all but seconds): 1 worker True, 2 workers True"
        in out.stdout
    )
