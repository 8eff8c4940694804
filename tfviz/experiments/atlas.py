"""The W_o atlas: where does the output projection W_o earn its place, and why?

A sweep of independent training runs over architectures (cells) x arms x seeds. Each run trains
a fresh model with its task's first-run recipe (tfviz.training.recipes, the Train tab's defaults)
until it reaches its task's target on a fixed held-out check set (tested every CHECK_EVERY steps) or
its step budget runs out, and returns plain numbers: steps to the target (None: censored at the
budget), final loss, the metric on fresh examples, and its curves. The arms differ in W_o alone:

- "learned": W_o trained as usual;
- "identity": no W_o, the heads' concatenation goes on unmixed (W_o off);
- "block_diagonal": each head keeps its own d_k x d_k map, nothing mixes heads;
- "frozen": W_o stays at its random initialisation (a random mix of heads, never trained);
- "identity_readout": the mechanism run. No W_o, but the output head also reads the last
  layer's attention output through a map of its own. If W_o matters because the residual stream
  carries the input in the same dimensions as the heads, so that no later linear map can tell a
  head's output from the input it was added to, this arm recovers the learned arm's loss.

Seed s of every arm starts from the same initial weights (the arm's own W_o aside) and sees the
same batches. A run is a module-level function of a dict (`run_one`), so Dask can send it to any
worker (tfviz.cli.atlas); rows are JSON lines keyed by `RunSpec.key`
(tfviz.experiments.atlas_store), and the comparison with intervals and Holm's correction is
tfviz.experiments.atlas_stats.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from tfviz.core import modes
from tfviz.core.model import Transformer
from tfviz.core.tasks import ATLAS_TASKS, Task, atlas_task  # noqa: F401 - atlas.ATLAS_TASKS

# The atlas's names and cells need no model: they live in tfviz.experiments.atlas_cells, so stored
# rows are read without torch (tfviz.experiments.atlas_store, tfviz.experiments.atlas_stats);
# atlas.Cell, atlas.ARMS, ... as before.
from tfviz.experiments.atlas_cells import AGAINST, ARMS, FORMAT, MAIN_ARMS, MECHANISM_ARM, Cell  # noqa: F401
from tfviz.experiments.experiment import final_loss, headline_metric
from tfviz.training.evaluate import EVAL_SEED, evaluate
from tfviz.training.recipes import CLASS_RECIPES, LEARNED, ClassRecipe
from tfviz.training.train import StepInfo, fit_params, store_w_o

RECIPES: dict[str, ClassRecipe] = {
    **CLASS_RECIPES,
    "difference": ClassRecipe(steps=1000, lr=3e-3, expected=0.95, seconds=10),
}
TARGET: dict[str, float] = {**LEARNED, "difference": 0.95}

CHECK_EVERY = 50  # steps between looks at the check set
CHECK_N = 500  # examples in the check set (its own seed, apart from training and evaluation)
CHECK_SEED = 1_000_003
EVAL_N = 1000  # fresh examples for the final metric (tfviz.training.evaluate's seed)
CURVE_EVERY = 10  # the stored loss curve is the mean of every 10 steps


get_task = atlas_task  # the atlas's tasks are tfviz.core.tasks.ATLAS_TASKS


def reached(task: str, value: float) -> bool:
    """Does a metric value meet the task's target? (MAE is an error: lower is better.)"""
    metric = headline_metric(get_task(task))
    return value <= TARGET[task] if metric == "mae" else value >= TARGET[task]


@dataclass(frozen=True)
class RunSpec:
    """One run: a cell, an arm and a seed, with the recipe it trains by."""

    cell: Cell
    arm: str
    seed: int
    budget: int | None = None  # steps; None: the task's recipe (tests and benches set less)

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {self.arm!r}")
        if self.budget is not None and (not isinstance(self.budget, int) or self.budget < 1):
            raise ValueError(f"budget must be a positive number of steps, got {self.budget!r}")

    @property
    def steps(self) -> int:
        return RECIPES[self.cell.task].steps if self.budget is None else self.budget

    @property
    def key(self) -> str:
        budget = "" if self.budget is None else f"/b{self.budget}"
        return f"{self.cell.key}/{self.arm}/s{self.seed}{budget}"

    def to_dict(self) -> dict:
        data = {"cell": asdict(self.cell), "arm": self.arm, "seed": self.seed}
        return data if self.budget is None else {**data, "budget": self.budget}

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        budget = data.get("budget")
        return cls(Cell(**data["cell"]), str(data["arm"]), int(data["seed"]), budget)


# ---- the plan -----------------------------------------------------------------------------------
# The bundled atlas ("core"): every task at D=64, post-norm, layers 1/2 x FFN on/off x heads 1/4,
# the three main arms and the frozen one, and the mechanism arm where the hypothesis says W_o
# cannot be absorbed (one layer, no FFN). "full" adds heads 2/8, pre-norm and D=32: for a cluster.
GRIDS = {
    "core": dict(layers=(1, 2), ffn=(False, True), heads=(4, 1), d_model=(64,), norm=("post",)),
    "full": dict(
        layers=(1, 2),
        ffn=(False, True),
        heads=(4, 1, 2, 8),
        d_model=(64, 32),
        norm=("post", "pre"),
    ),
}


def cells(grid: str = "core", tasks: tuple[str, ...] | None = None) -> list[Cell]:
    """The grid's cells, the most telling first (heads 4, then 1; one layer before two), so that
    a sweep stopped early has whole rows of the atlas rather than scattered cells."""
    if grid not in GRIDS:
        raise ValueError(f"grid must be one of {tuple(GRIDS)}, got {grid!r}")
    g = GRIDS[grid]
    tasks = tuple(ATLAS_TASKS) if tasks is None else tasks
    return [
        Cell(task, layers, ffn, heads, d_model, norm)
        for norm in g["norm"]
        for d_model in g["d_model"]
        for heads in g["heads"]
        for layers in g["layers"]
        for ffn in g["ffn"]
        for task in tasks
    ]


def arms_of(cell: Cell) -> tuple[str, ...]:
    """The arms a cell runs: the main three and the frozen one, and the mechanism arm in
    one-layer cells without an FFN (and several heads: with one head W_o is a full map either
    way)."""
    arms = MAIN_ARMS + ("frozen",)
    if cell.n_layers == 1 and not cell.ffn and cell.n_heads > 1:
        arms += (MECHANISM_ARM,)
    return arms


def plan(grid: str = "core", seeds: int = 5, tasks: tuple[str, ...] | None = None) -> list[RunSpec]:
    """Every run of the sweep, a cell's runs together (seed by seed, every arm of a seed)."""
    return plan_cells(cells(grid, tasks), seeds)


def plan_cells(chosen: list[Cell], seeds: int = 5) -> list[RunSpec]:
    """The runs of the chosen cells with their arms (arms_of), seed by seed."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    return [
        RunSpec(cell, arm, seed)
        for cell in chosen
        for seed in range(seeds)
        for arm in arms_of(cell)
    ]


# ---- one run ----------------------------------------------------------------------------------
class ReadoutEncoder(nn.Module):
    """The mechanism arm's model: a Transformer run with W_o off, whose output head also reads the
    last layer's attention output (the heads' concatenation) through a map of its own."""

    def __init__(self, encoder: Transformer):
        super().__init__()
        self.encoder = encoder
        self.readout = nn.Linear(encoder.config.d_model, encoder.config.n_out)
        self._concat: list[torch.Tensor] = []
        # A private training model: the hook only hands the attention output to forward below.
        encoder.layers[-1].attn.register_forward_hook(lambda m, i, out: self._concat.append(out[0]))

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    @property
    def config(self):
        return self.encoder.config

    def forward(self, ids, pad_mask=None, *, trace=False, **switches):
        self._concat.clear()
        out = self.encoder(ids, pad_mask, trace=False, **switches)
        concat = self._concat.pop()  # (B, T, D)
        pool = self.encoder.config.pool
        if pool == "first":
            concat = concat[:, 0]
        elif pool == "mean":
            keep = torch.ones_like(concat[..., :1]) if pad_mask is None else (~pad_mask)[..., None]
            keep = keep.to(concat.dtype)
            concat = (concat * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return type(out)(logits=out.logits + self.readout(concat), trace=None)


def build(spec: RunSpec) -> tuple[nn.Module, list, dict]:
    """The run's fresh model, the parameters it trains and the switches of its forward. Seeded:
    the encoder's weights are those of every arm of the same seed."""
    torch.manual_seed(spec.seed)
    model: nn.Module = Transformer(spec.cell.model_config())
    switches = {"w_o": "learned"}
    params = list(model.parameters())
    if spec.arm in modes.AGAINST:
        store_w_o(model, spec.arm, start=True)
        switches = {"w_o": spec.arm}
    elif spec.arm == "frozen":
        frozen = {id(p) for layer in model.layers for p in layer.attn.W_o.parameters()}
        params = [p for p in params if id(p) not in frozen]
    elif spec.arm == MECHANISM_ARM:
        model = ReadoutEncoder(model)  # its readout is drawn after the encoder: same encoder init
        switches = {"w_o": "identity"}
        params = list(model.parameters())
    return model, params, switches


def run_one(spec: dict) -> dict:
    """Train one run of the atlas and measure it; a plain dict in, a plain dict (a row) out.

    Module-level and free of global state, so Dask can run it anywhere: the row depends only on
    the spec (and torch's version), never on the worker, the order or the other runs.
    """
    torch.set_num_threads(1)  # one thread a run: two runs on two cores, not four threads fighting
    run = RunSpec.from_dict(spec)
    task, recipe = get_task(run.cell.task), RECIPES[run.cell.task]
    metric = headline_metric(task)
    checks: list[list] = []  # [step, metric]: as JSON gives it back
    hit: list[int] = []
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        model, params, switches = build(run)

        def on_step(info: StepInfo) -> bool | None:
            if info.step % CHECK_EVERY and info.step != info.steps:
                return None
            value = evaluate(model, task, n=CHECK_N, seed=CHECK_SEED, **switches)[metric]
            checks.append([info.step, round(float(value), 6)])
            if reached(run.cell.task, value):
                hit.append(info.step)
                return False  # the run stops at its target
            return None

        losses = fit_params(
            model,
            params,
            task,
            np.random.default_rng(run.seed),
            run.steps,
            recipe.batch_size,
            recipe.lr,
            "cosine",
            1.0,
            on_step,
            None,
            None,
            **switches,
        )
    train_seconds = time.perf_counter() - start
    final = evaluate(model, task, n=EVAL_N, seed=EVAL_SEED, **switches)[metric]
    rounded = [float(f"{x:.6g}") for x in losses]
    k = CURVE_EVERY
    curve = [round(float(np.mean(rounded[i : i + k])), 6) for i in range(0, len(rounded), k)]
    return {
        "format": FORMAT,
        "key": run.key,
        "cell": run.cell.key,
        "arm": run.arm,
        "seed": run.seed,
        "task": run.cell.task,
        "metric": metric,
        "target": TARGET[run.cell.task],
        "budget": run.steps,
        "steps": len(losses),
        "steps_to_target": hit[0] if hit else None,
        "final_loss": final_loss(rounded),
        "metric_value": round(float(final), 6),
        "checks": checks,
        "curve": curve,
        "curve_every": k,
        "recipe": {"lr": recipe.lr, "batch_size": recipe.batch_size, "schedule": "cosine"},
        "seconds": round(train_seconds, 3),
        "torch_version": torch.__version__,
    }


def estimate_seconds(specs: list[RunSpec]) -> float:
    """Seconds of one core the runs take, from the recipes' measured per-run times scaled by
    layers and FFN (a rough plan: runs that reach their target early take less)."""
    total = 0.0
    for s in specs:
        recipe = RECIPES[s.cell.task]
        base = recipe.seconds * s.steps / recipe.steps  # a budget of its own scales the time
        scale = s.cell.n_layers / 2 * (1.0 if s.cell.ffn else 0.7)
        total += base * scale
    return total
