"""Does training without W_o converge more slowly and end worse? Measure it, over several seeds.

Seed 000 claims that without the output projection W_o training converges more slowly and ends
worse. `run_experiment` trains N seeds with the learned W_o and N seeds with the W_o it is
compared against, all other settings equal:
- "identity": W_o switched off (`train(..., w_o="identity")`: the heads' concatenation goes on
  unmixed), the seeds' "without W_o";
- "block_diagonal": each head keeps its own d_k x d_k map but nothing mixes heads, which tells
  the two parts of W_o apart (a map inside each head's slice, and mixing across heads).
Seed s of every condition starts from the same initial weights (W_o aside) and sees the same
batches, so the only difference between runs of one seed is W_o. For each run it records the loss of
every step, the final loss (mean of the last 5% of steps), the loss averaged over all steps (the
area under the curve: lower means faster convergence) and the task metric on fresh examples
(tfviz.training.evaluate). `compare` turns these into a table with a Welch 95% confidence interval
for the difference of means (tfviz.experiments.stats), and each row's `outcome` says what that
interval allows one to claim; tfviz.experiments.verdict gathers what a comparison shows as values,
which the app words in its languages and tfviz.experiments.experiment_report in English (the shipped
README, the command line).

The runs train together, as one model batched over runs (tfviz.training.ensemble), each still the
run `train` makes alone; `run_experiment(batched=False)` trains them one after another, the
reference the batched path is tested and timed against.

Without W_o a layer has D*D + D fewer parameters: the comparison is between the two architectures
as the seeds describe them, not at an equal parameter count.

CLI (tfviz.cli.experiment):
`python -m tfviz.cli.experiment --task sum --seeds 5 [--steps N] [--out FILE]` prints the table;
`--all` recomputes models/experiments/<task>.json for every task and models/experiments/README.md;
`--against block_diagonal --add` trains only the block-diagonal runs and adds them to the files.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from tfviz.core import modes
from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task, get_task
from tfviz.experiments.stats import Interval, welch_interval
from tfviz.refusal import Refusal
from tfviz.training.checkpoint import write_atomic
from tfviz.training.ensemble import EnsembleStep, train_runs
from tfviz.training.evaluate import EVAL_SEED, evaluate
from tfviz.training.train import StepInfo, train
from tfviz.words import english

AGAINST = modes.AGAINST  # what the learned W_o is compared with
CONDITIONS = (modes.LEARNED, modes.IDENTITY)  # the default pair: with W_o, and switched off
KNOWN_CONDITIONS = modes.CONDITIONS  # every condition a run may have
# Legend names (reports, plots), in the catalogue's English.
LABELS = {c: english(f"experiment.condition.{c}") for c in KNOWN_CONDITIONS}
FORMAT = "tfviz-experiment/1"
FINAL_FRACTION = 0.05  # final loss = mean over this last share of the steps
EXPERIMENTS = Path(__file__).resolve().parents[2] / "models" / "experiments"

# The shipped results use these: all six tasks rerun in minutes on a 2-core machine, one run
# after another, so a class can rerun the experiment; batched, faster still (measured:
# bench/train_speed.py and bench/README.md). Five tasks are
# mostly learned in 500 steps; reverse needs several times more, which its verdict reports.
DEFAULTS: dict = {
    "seeds": 5,
    "steps": 500,
    "batch_size": 64,
    "lr": 3e-3,
    "schedule": "cosine",
    "sizes": {"d_model": 32, "n_heads": 4, "d_ff": 64, "n_layers": 2, "dropout": 0.0},
    "eval_n": 1000,
}


# ---- records ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One training run of one condition and seed."""

    condition: str  # one of KNOWN_CONDITIONS
    seed: int
    losses: tuple[float, ...]  # training loss of every step
    final_loss: float  # mean of the last FINAL_FRACTION of steps
    mean_loss: float  # mean over all steps (area under the loss curve / steps)
    metrics: dict  # tfviz.training.evaluate's output on fresh examples
    seconds: float  # training + evaluation; batched runs count their share of the joint training


@dataclass(frozen=True)
class ExperimentResult:
    """Every run of an experiment, with its settings; JSON round-trips exactly."""

    task: str
    settings: dict  # steps, batch_size, lr, schedule, sizes, model config, eval_n, eval_seed, seeds
    runs: tuple[Run, ...]
    cancelled: bool = False  # stopped by on_progress; runs holds only the finished ones
    torch_version: str = field(default_factory=lambda: torch.__version__)

    @property
    def metric(self) -> str:
        """The task's headline metric: "mae", "accuracy" or "token_accuracy"."""
        return headline_metric(get_task(self.task))

    def runs_of(self, condition: str) -> list[Run]:
        return [r for r in self.runs if r.condition == condition]

    @property
    def against(self) -> tuple[str, ...]:
        """The conditions the learned W_o is compared with in this result, in AGAINST order."""
        return tuple(c for c in AGAINST if self.runs_of(c))

    def merged(self, other: ExperimentResult) -> ExperimentResult:
        """This result with other's runs of conditions it lacks (e.g. block-diagonal runs trained
        later). Refused unless both ran the same task, seeds and settings: only then is seed s of
        each condition the run train() makes alone from the same weights and batches."""
        same = ("seeds", "steps", "batch_size", "lr", "schedule", "sizes", "eval_n", "eval_seed")
        differ = [k for k in same if self.settings.get(k) != other.settings.get(k)]
        if self.task != other.task:
            differ = ["task"]
        if differ:
            raise ValueError(f"cannot merge: the results differ in {', '.join(differ)}")
        if self.cancelled or other.cancelled:
            raise ValueError("cannot merge a cancelled result")
        new = tuple(r for r in other.runs if not self.runs_of(r.condition))
        return replace(self, runs=self.runs + new)

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "task": self.task,
            "settings": self.settings,
            "cancelled": self.cancelled,
            "torch_version": self.torch_version,
            "runs": [
                {
                    "condition": r.condition,
                    "seed": r.seed,
                    "final_loss": r.final_loss,
                    "mean_loss": r.mean_loss,
                    "metrics": r.metrics,
                    "seconds": r.seconds,
                    "losses": list(r.losses),
                }
                for r in self.runs
            ],
        }
        return json.dumps(data, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> ExperimentResult:
        """Parse to_json's output, refusing anything malformed with a ValueError saying what."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"experiment file is not valid JSON ({e})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a tfviz experiment file (expected format {FORMAT!r})")
        get_task(data.get("task"))  # raises ValueError naming the known tasks
        settings, raw_runs = data.get("settings"), data.get("runs")
        if not isinstance(settings, dict) or not isinstance(raw_runs, list):
            raise ValueError("experiment file needs a 'settings' object and a 'runs' list")
        runs = []
        for i, r in enumerate(raw_runs):
            try:
                losses = tuple(float(x) for x in r["losses"])
                run = Run(
                    condition=str(r["condition"]),
                    seed=int(r["seed"]),
                    losses=losses,
                    final_loss=float(r["final_loss"]),
                    mean_loss=float(r["mean_loss"]),
                    metrics=dict(r["metrics"]),
                    seconds=float(r["seconds"]),
                )
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"run {i} of the experiment file is malformed ({e!r})") from None
            if run.condition not in KNOWN_CONDITIONS:
                raise ValueError(
                    f"run {i} has condition {run.condition!r}; known: {KNOWN_CONDITIONS}"
                )
            if not losses or not all(math.isfinite(x) for x in losses):
                raise ValueError(f"run {i} has an empty or non-finite loss curve")
            runs.append(run)
        return cls(
            task=data["task"],
            settings=settings,
            runs=tuple(runs),
            cancelled=bool(data.get("cancelled", False)),
            torch_version=str(data.get("torch_version", "")),
        )

    def save(self, path: str | Path) -> Path:
        """Write the JSON atomically (temporary file, then rename)."""
        path = Path(path)
        write_atomic(path, self.to_json().encode())
        return path

    @classmethod
    def load(cls, path: str | Path) -> ExperimentResult:
        return cls.from_json(Path(path).read_bytes())


@dataclass(frozen=True)
class Progress:
    """What on_progress receives after every training step."""

    run: int  # 1-based index of the current run
    runs: int  # runs in the whole experiment
    condition: str
    seed: int
    step: int  # 1-based, within the run
    steps: int
    loss: float


def headline_metric(task: Task) -> str:
    return {"token": "token_accuracy", "classify": "accuracy"}.get(task.kind, "mae")


def final_loss(losses: Sequence[float], fraction: float = FINAL_FRACTION) -> float:
    """Mean of the last `fraction` of the losses (at least one step)."""
    if len(losses) == 0:
        raise ValueError("no losses to average")
    k = max(1, math.ceil(fraction * len(losses)))
    return float(np.mean(losses[-k:]))


# ---- running ------------------------------------------------------------------------------------
def run_experiment(
    task: Task | str,
    seeds: int | Sequence[int] = DEFAULTS["seeds"],
    steps: int = DEFAULTS["steps"],
    batch_size: int = DEFAULTS["batch_size"],
    lr: float = DEFAULTS["lr"],
    schedule: str = DEFAULTS["schedule"],
    d_model: int = DEFAULTS["sizes"]["d_model"],
    n_heads: int = DEFAULTS["sizes"]["n_heads"],
    d_ff: int = DEFAULTS["sizes"]["d_ff"],
    n_layers: int = DEFAULTS["sizes"]["n_layers"],
    dropout: float = DEFAULTS["sizes"]["dropout"],
    eval_n: int = DEFAULTS["eval_n"],
    device: str = "cpu",
    on_progress: Callable[[Progress], bool | None] | None = None,
    batched: bool = True,
    conditions: Sequence[str] = CONDITIONS,
) -> ExperimentResult:
    """Train every seed in every condition (by default with and without W_o); measure each run.

    By default all len(conditions) * len(seeds) runs train together as one batched model
    (tfviz.training.ensemble); each run is still the run tfviz.training.train.train makes alone
    (same initial weights, batches and Adam; with dropout 0 the same losses to float precision).
    batched=False trains them one after another with tfviz.training.train.train: the reference
    the batched path is tested and timed against.

    Args:
        task: a Task or its name.
        seeds: how many seeds (0..n-1), or the seeds themselves; each is used in every condition.
        steps, batch_size, lr, schedule: as tfviz.training.train.train, the same for every run.
        d_model, n_heads, d_ff, n_layers, dropout: model sizes (the task sets the rest).
        eval_n: fresh examples for the final metric (tfviz.training.evaluate, its fixed seed).
        device: where to train ("cpu" keeps results comparable with the shipped ones).
        on_progress: called after every step of every run with a Progress (batched: each step
            brings one call per run, in run order; sequential: run by run). Returning False
            stops: the result holds the runs finished so far (batched: none, as all finish
            together) and cancelled=True.
        batched: train the runs together (True) or one after another (False).
        conditions: the W_o of each arm, from KNOWN_CONDITIONS: ("learned", "block_diagonal")
            compares the learned W_o with a block-diagonal one; ("block_diagonal",) alone trains
            runs to add to a result that has the others (ExperimentResult.merged).
    Returns:
        ExperimentResult with len(conditions) * len(seeds) runs, conditions interleaved seed by
        seed (so a cancelled sequential experiment stays balanced). Batched, each run's `seconds`
        is its share of the joint training time plus its own evaluation.
    """
    sizes = dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_layers=n_layers, dropout=dropout)
    training = dict(steps=steps, batch_size=batch_size, lr=lr, schedule=schedule)
    task, plan, config, settings = _prepare(
        task, seeds, eval_n, device, sizes, training, conditions
    )
    trainer = _train_batched if batched else _train_sequential
    runs, stopped = trainer(task, config, plan, training, eval_n, device, on_progress)
    return ExperimentResult(task=task.name, settings=settings, runs=tuple(runs), cancelled=stopped)


def _train_batched(task, config, plan, training, eval_n, device, on_progress):
    """Every run of the plan as one batched model. Returns (runs, stopped)."""
    stopped = False

    def report(info: EnsembleStep) -> bool | None:
        nonlocal stopped
        if on_progress is None:
            return None
        for index, ((condition, seed), loss) in enumerate(zip(plan, info.losses, strict=True), 1):
            progress = Progress(index, len(plan), condition, seed, info.step, info.steps, loss)
            if on_progress(progress) is False:
                stopped = True
                return False
        return None

    start = time.perf_counter()
    runs_spec = [(seed, condition) for condition, seed in plan]
    models, history = train_runs(task, config, runs_spec, device=device, on_step=report, **training)
    if stopped:  # every run is incomplete
        return [], True
    share = (time.perf_counter() - start) / len(plan)  # training time per run
    runs = [
        _measure(task, condition, seed, model, losses, eval_n, share)
        for (condition, seed), model, losses in zip(plan, models, history["loss"], strict=True)
    ]
    return runs, False


def _train_sequential(task, config, plan, training, eval_n, device, on_progress):
    """The runs of the plan one after another with tfviz.training.train.train. Returns (runs,
    stopped)."""
    runs: list[Run] = []
    stopped = False
    for index, (condition, seed) in enumerate(plan, start=1):

        def report(info: StepInfo, condition=condition, seed=seed, index=index) -> bool | None:
            nonlocal stopped
            if on_progress is None:
                return None
            progress = Progress(index, len(plan), condition, seed, info.step, info.steps, info.loss)
            if on_progress(progress) is False:
                stopped = True
                return False
            return None

        start = time.perf_counter()
        model, history = train(
            task, config, seed=seed, device=device, w_o=condition, on_step=report, **training
        )
        if stopped:
            break  # the interrupted run is incomplete: keep only finished ones
        seconds = time.perf_counter() - start
        runs.append(_measure(task, condition, seed, model, history["loss"], eval_n, seconds))
    return runs, stopped


def _prepare(
    task: Task | str, seeds, eval_n, device: str, sizes: dict, training: dict, conditions
) -> tuple[Task, list[tuple[str, int]], ModelConfig, dict]:
    """Check the arguments. Returns the task, the plan ((condition, seed) of every run:
    conditions interleaved seed by seed), the model config and the settings record."""
    task = get_task(task) if isinstance(task, str) else task
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list or len(set(seed_list)) != len(seed_list):
        raise ValueError(f"seeds must be a positive count or distinct integers, got {seeds!r}")
    conditions = tuple(conditions)
    if not conditions or len(set(conditions)) != len(conditions):
        raise ValueError(f"conditions must be distinct and not empty, got {conditions!r}")
    for condition in conditions:
        if condition not in KNOWN_CONDITIONS:
            raise ValueError(f"an experiment's conditions are {KNOWN_CONDITIONS}; {condition!r}?")
    if not isinstance(eval_n, int) or eval_n < 1:
        raise ValueError(f"eval_n must be a positive integer, got {eval_n!r}")
    config = task.model_config(**sizes)
    settings = {
        "seeds": seed_list,
        **training,  # steps, batch_size, lr, schedule
        "sizes": sizes,
        "config": config.to_dict(),
        "eval_n": eval_n,
        "eval_seed": EVAL_SEED,
        "final_fraction": FINAL_FRACTION,
        "device": device,
    }
    plan = [(cond, seed) for seed in seed_list for cond in conditions]
    return task, plan, config, settings


def _measure(
    task: Task,
    condition: str,
    seed: int,
    model: Transformer,
    losses: Sequence[float],
    eval_n: int,
    train_seconds: float,
) -> Run:
    """A finished run's record: its loss curve, summaries and metric on fresh examples."""
    start = time.perf_counter()
    metrics = evaluate(model, task, n=eval_n)
    # 6 significant digits keep the JSON small; the summaries are computed from the rounded
    # curve, so a loaded file reproduces them exactly.
    rounded = tuple(float(f"{x:.6g}") for x in losses)
    return Run(
        condition=condition,
        seed=seed,
        losses=rounded,
        final_loss=final_loss(rounded),
        mean_loss=float(np.mean(rounded)),
        metrics=metrics,
        seconds=round(train_seconds + time.perf_counter() - start, 3),
    )


# ---- comparing ----------------------------------------------------------------------------------
# What a row's interval allows one to claim about the learned W_o (Row.outcome): the one
# definition the app's findings, the English verdict and the README's summary are worded from.
OUTCOMES = ("better", "worse", "unclear", "no_interval")


@dataclass(frozen=True)
class Row:
    """One quantity compared between the conditions (a line of the table)."""

    quantity: str  # "final_loss", "mean_loss" or the metric name
    label: str
    lower_is_better: bool
    against: str  # the condition the learned W_o is compared with (AGAINST)
    n_learned: int
    n_against: int
    mean_learned: float
    std_learned: float  # sample std (ddof=1); 0 for a single run
    mean_against: float
    std_against: float
    interval: Interval | None  # of learned - against; None with fewer than 2 runs per side

    @property
    def difference(self) -> float:
        return self.mean_learned - self.mean_against

    @property
    def outcome(self) -> str:
        """What the interval allows one to claim about the learned W_o, one of OUTCOMES:
        "better" or "worse" when it excludes 0, "unclear" when it includes 0, "no_interval"
        with too few runs for one."""
        iv = self.interval
        if iv is None:
            return "no_interval"
        if iv.low <= 0 <= iv.high:
            return "unclear"
        return "better" if (self.difference < 0) == self.lower_is_better else "worse"


def check_against(against: str) -> str:
    """against itself if the learned W_o can be compared with it; ValueError naming them if not."""
    if against not in AGAINST:
        raise ValueError(f"the learned W_o is compared with one of {AGAINST}, got {against!r}")
    return against


QUANTITY_LABELS = {
    "final_loss": "final training loss (mean of last 5% of steps)",
    "mean_loss": "loss averaged over all steps (lower = faster convergence)",
    "mae": "MAE on fresh data",
    "accuracy": "accuracy on fresh data",
    "token_accuracy": "token accuracy on fresh data",
}


def compare(
    result: ExperimentResult, confidence: float = 0.95, against: str = "identity"
) -> list[Row]:
    """The comparison table: final loss, mean loss and the task metric, learned vs against."""
    check_against(against)
    metric = result.metric
    rows = []
    for quantity in ("final_loss", "mean_loss", metric):

        def values(cond: str, quantity=quantity) -> np.ndarray:
            runs = result.runs_of(cond)
            if quantity in ("final_loss", "mean_loss"):
                return np.array([getattr(r, quantity) for r in runs], np.float64)
            return np.array([r.metrics[quantity] for r in runs], np.float64)

        a, b = values("learned"), values(against)

        def stats(x: np.ndarray) -> tuple[float, float]:
            if len(x) == 0:
                return math.nan, math.nan
            return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else 0.0

        (ma, sa), (mb, sb) = stats(a), stats(b)
        interval = welch_interval(a, b, confidence) if len(a) > 1 and len(b) > 1 else None
        rows.append(
            Row(
                quantity=quantity,
                label=QUANTITY_LABELS[quantity],
                lower_is_better=quantity != metric or metric == "mae",
                against=against,
                n_learned=len(a),
                n_against=len(b),
                mean_learned=ma,
                std_learned=sa,
                mean_against=mb,
                std_against=sb,
                interval=interval,
            )
        )
    return rows


@dataclass(frozen=True)
class LossCurves:
    """Mean training loss per step of each condition with a mean ± std band, for plotting."""

    step: np.ndarray  # (S,) 1-based step numbers
    conditions: tuple[str, ...]  # ("learned", against)
    mean: np.ndarray  # (C, S)
    std: np.ndarray  # (C, S) sample std across seeds (0 with a single seed)
    lower: np.ndarray  # (C, S) mean - std
    upper: np.ndarray  # (C, S) mean + std
    n: np.ndarray  # (C,) runs per condition


class ExperimentRefusal(Refusal, ValueError):
    """What the view cannot draw from a result (a code and values, worded by the catalogue:
    "refusal.experiment.<code>") in each session's language; str() is the English."""

    PREFIX = "refusal.experiment."


def summarise(result: ExperimentResult, window: int = 1, against: str = "identity") -> LossCurves:
    """Mean loss curve and its ±1 std band per condition (learned, and against).

    Args:
        result: an ExperimentResult with at least one run of the learned condition and against.
        window: moving-average width applied to each run before averaging (1 = raw steps); the
            first window-1 steps average over what is there.
        against: the condition drawn beside the learned W_o (AGAINST).
    Returns:
        LossCurves with (C, S) float32 arrays, C = 2 conditions, S = steps.
    """
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    conditions = ("learned", check_against(against))
    curves = {c: [np.asarray(r.losses, np.float64) for r in result.runs_of(c)] for c in conditions}
    if not all(curves.values()):
        raise ExperimentRefusal("no_finished_run")
    S = min(len(x) for runs in curves.values() for x in runs)
    means, stds, ns = [], [], []
    for cond in conditions:
        stacked = np.stack([_moving_average(x[:S], window) for x in curves[cond]])  # (n, S)
        means.append(stacked.mean(0))
        stds.append(stacked.std(0, ddof=1) if len(stacked) > 1 else np.zeros(S))
        ns.append(len(stacked))
    mean, std = np.stack(means), np.stack(stds)
    return LossCurves(
        step=np.arange(1, S + 1),
        conditions=conditions,
        mean=mean.astype(np.float32),
        std=std.astype(np.float32),
        lower=(mean - std).astype(np.float32),
        upper=(mean + std).astype(np.float32),
        n=np.array(ns),
    )


def _moving_average(x: np.ndarray, window: int) -> np.ndarray:
    if window == 1:
        return x
    c = np.cumsum(np.concatenate([[0.0], x]))
    idx = np.arange(1, len(x) + 1)
    start = np.maximum(0, idx - window)
    return (c[idx] - c[start]) / (idx - start)


# ---- shipped results ----------------------------------------------------------------------------
def default_path(task: str, folder: Path = EXPERIMENTS) -> Path:
    return Path(folder) / f"{get_task(task).name}.json"


def load_precomputed(task: str, folder: Path = EXPERIMENTS) -> ExperimentResult | None:
    """The shipped result for a task, or None if there is none (the app then offers to run it)."""
    path = default_path(task, folder)
    return ExperimentResult.load(path) if path.is_file() else None
