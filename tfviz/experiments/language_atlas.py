"""The language atlas: does W_o matter on real text?

The toy atlas (tfviz.experiments.atlas) asks it of toy tasks, by steps to a target. Article 000's
claim is about language, so this sweep asks it where the claim was made: causal character models
of the bundled Shakespeare corpus (tfviz.training.language), a fixed budget of steps (no target),
read by the validation loss in nats per character at the end and half way, and by the best
induction score. Five arms differ at W_o alone (LANGUAGE_ARMS):

- "learned": W_o trained as usual;
- "identity": no W_o, the heads' concatenation goes on unmixed;
- "block_diagonal": each head keeps its own d_k x d_k map, nothing mixes heads;
- "frozen": W_o stays at its random start (GPT-2's initialisation), never trained;
- "gated": W_o learned, and before it each head's output is multiplied by a sigmoid gate, one a
  head and token, computed from the layer's input (GatedAttention; Qiu et al. 2025, "Gated
  Attention for Large Language Models", their head-wise gate after the attention's output).

Seed s of every arm starts from the same weights (the gate's aside) and sees the same windows.
A run is a module-level function of a dict (run_language), so Dask sends it to any worker
(tfviz.cli.atlas run --language); rows are JSON lines keyed by LanguageRunSpec.key in
models/atlas/language.jsonl, compared by tfviz.experiments.atlas_stats.analyse_language.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
from torch import nn

from tfviz.analysis.induction import measure_induction
from tfviz.core import modes
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions, LayerSwitches
from tfviz.core.model import MultiHeadAttention, Transformer, linear
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LANGUAGE_FORMAT, LanguageCell
from tfviz.training import language

# The recipe of every run: small enough for 200 runs on two cores in well under an hour
# (estimate_seconds), long enough that every arm learns the language.
STEPS = 1000
CONTEXT = 64
BATCH = 16
LR = 3e-3
WEIGHT_DECAY = 0.1
POSITIONS = "learned"
CURVE_EVERY = 100  # steps between points of the validation curve
CURVE_WINDOWS = 64  # windows of the validation split's start behind each curve point
VALID_WINDOWS = 1000  # windows behind the final validation loss (64,000 characters)
LOSS_EVERY = 10  # the stored training-loss curve is the mean of every 10 steps

# Cells: two layers, attention alone or with the FFN, 4 and 8 heads, D 64 and 128.
GRID = dict(ffn=(False, True), heads=(4, 8), d_model=(64, 128))


def cells() -> list[LanguageCell]:
    """The grid's cells, attention-only first (the induction-head model), smaller first."""
    g = GRID
    return [
        LanguageCell(2, ffn, heads, d_model)
        for ffn in g["ffn"]
        for d_model in g["d_model"]
        for heads in g["heads"]
    ]


@dataclass(frozen=True)
class LanguageRunSpec:
    """One run: a cell, an arm and a seed, trained for `steps` steps."""

    cell: LanguageCell
    arm: str
    seed: int
    steps: int = STEPS

    def __post_init__(self) -> None:
        if self.arm not in LANGUAGE_ARMS:
            raise ValueError(f"arm must be one of {LANGUAGE_ARMS}, got {self.arm!r}")
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive number, got {self.steps!r}")

    @property
    def key(self) -> str:
        budget = "" if self.steps == STEPS else f"/b{self.steps}"
        return f"{self.cell.key}/{self.arm}/s{self.seed}{budget}"

    def to_dict(self) -> dict:
        return {"cell": asdict(self.cell), "arm": self.arm, "seed": self.seed, "steps": self.steps}

    @classmethod
    def from_dict(cls, data: dict) -> LanguageRunSpec:
        return cls(
            LanguageCell(**data["cell"]), str(data["arm"]), int(data["seed"]), int(data["steps"])
        )


def plan(
    seeds: int = 5, chosen: list[LanguageCell] | None = None, steps: int = STEPS
) -> list[LanguageRunSpec]:
    """Every run, a cell's together, seed by seed (every arm of a seed), so that a sweep stopped
    early has whole seeds of whole cells."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    return [
        LanguageRunSpec(cell, arm, seed, steps)
        for cell in (cells() if chosen is None else chosen)
        for seed in range(seeds)
        for arm in LANGUAGE_ARMS
    ]


class GatedAttention(MultiHeadAttention):
    """Attention whose heads' outputs are each multiplied, before W_o, by a sigmoid gate of the
    layer's input: g = sigmoid(x W_g + b_g), one gate a head and token (Qiu et al. 2025's
    head-wise gate). A gate near 0 lets a head say nothing at a token, which a softmax alone
    cannot (its weights sum to 1), and puts a non-linearity between W_v and W_o."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.W_g = nn.Linear(config.d_model, config.n_heads)

    def forward(self, x, pad_mask, sw: LayerSwitches, trace, rotary=None, into=None):
        if pad_mask is not None and not isinstance(pad_mask, torch.Tensor):
            raise ValueError("a gated model runs unpacked batches only")
        gate = torch.sigmoid(linear(x, self.W_g)).transpose(1, 2)[..., None]  # (B, H, T, 1)
        if sw.gate is not None:  # heads ablated or scaled as well
            gate = gate * sw.gate.view(1, -1, 1, 1)
        return super().forward(x, pad_mask, replace(sw, gate=gate), trace, rotary, into)


def with_gates(model: Transformer, seed: int) -> None:
    """Put a GatedAttention in each layer of model in place, its W_q..W_o those of the layer's
    attention, W_g drawn from N(0, 0.02) with its own seed (the encoder's weights unchanged), the
    bias 0: every gate starts near 1/2."""
    gen = torch.Generator().manual_seed(seed)
    for layer in model.layers:
        gated = GatedAttention(model.config)
        gated.load_state_dict(layer.attn.state_dict(), strict=False)
        with torch.no_grad():
            gated.W_g.weight.copy_(torch.randn(gated.W_g.weight.shape, generator=gen) * 0.02)
            gated.W_g.bias.zero_()
        layer.attn = gated


def _prepare(arm: str, seed: int):
    """train_language_model's prepare for an arm: the parameters trained (and the gates put in)."""

    def prepare(model: Transformer) -> list[nn.Parameter]:
        if arm == "gated":
            with_gates(model, seed)
        if arm == "frozen":
            frozen = {id(p) for layer in model.layers for p in layer.attn.W_o.parameters()}
            return [p for p in model.parameters() if id(p) not in frozen]
        return list(model.parameters())

    return prepare


def switches(arm: str) -> Interventions:
    """The forward switches of an arm's model: W_o off or taken apart for those arms."""
    return Interventions(w_o=arm if arm in modes.AGAINST else modes.LEARNED)


def run_language(spec: dict) -> dict:
    """Train one run of the language atlas and measure it; a plain dict in, a row out.

    Module-level and free of global state (the corpus is read once per process), so Dask can run
    it anywhere: the row depends only on the spec, the corpus and torch's build.
    """
    torch.set_num_threads(1)  # one thread a run: two runs on two cores
    run = LanguageRunSpec.from_dict(spec)
    vocab, train_ids, valid_ids, _ = language.bundled_corpus()
    c = run.cell
    config = language.language_config(
        vocab, CONTEXT, c.n_layers, c.n_heads, c.d_model, c.ffn, POSITIONS
    )
    sw = switches(run.arm)
    curve: list[list] = []
    held: dict = {}
    prepare = _prepare(run.arm, run.seed)

    def keep(model: Transformer) -> list[nn.Parameter]:
        held["model"] = model
        return prepare(model)

    def on_step(info) -> None:
        if info.step % CURVE_EVERY and info.step != info.steps:
            return
        model = held["model"].eval()
        loss = language.validation_loss(model, valid_ids, CONTEXT, CURVE_WINDOWS, sw)
        curve.append([info.step, round(loss, 5)])
        model.train()

    model, history = language.train_language_model(
        train_ids, config, run.steps, BATCH, LR, run.seed, WEIGHT_DECAY, "cpu", on_step,
        w_o=sw.w_o, prepare=keep,
    )  # fmt: skip
    valid = language.validation_loss(model, valid_ids, CONTEXT, VALID_WINDOWS, sw)
    scores = measure_induction(model, language.induction_probe(vocab, CONTEXT), sw)
    layer, head, best = scores.best()
    losses = [float(f"{x:.6g}") for x in history["loss"]]
    tail = max(1, len(losses) // 20)
    k = LOSS_EVERY
    return {
        "format": LANGUAGE_FORMAT,
        "key": run.key,
        "cell": c.key,
        "arm": run.arm,
        "seed": run.seed,
        "steps": run.steps,
        "recipe": {
            "context": CONTEXT,
            "batch_size": BATCH,
            "lr": LR,
            "weight_decay": WEIGHT_DECAY,
            "positions": POSITIONS,
            "schedule": "cosine",
        },  # fmt: skip
        "valid_loss": round(valid, 5),
        "valid_windows": VALID_WINDOWS,
        "valid_curve": curve,
        "curve_windows": CURVE_WINDOWS,
        "final_loss": round(float(np.mean(losses[-tail:])), 5),
        "curve": [round(float(np.mean(losses[i : i + k])), 5) for i in range(0, len(losses), k)],
        "curve_every": k,
        "induction": {"layer": layer, "head": head, "score": round(best, 5)},
        "previous_token": round(float(scores.previous_token.max()), 5),
        "in_context_drop": round(float(scores.in_context_drop), 5),
        "seconds": history["seconds"],
        "torch_version": torch.__version__,
    }


def estimate_seconds(specs: list[LanguageRunSpec]) -> float:
    """Seconds of one core the runs take: ms a step measured on this project's machine (one
    thread, the other core busy), by width and FFN."""
    per_step = {(False, 64): 0.017, (False, 128): 0.020, (True, 64): 0.019, (True, 128): 0.041}
    return sum(per_step[(s.cell.ffn, s.cell.d_model)] * s.steps * 1.1 for s in specs)
