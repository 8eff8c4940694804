"""The kinds of work the job manager (tfviz.serve.jobs) runs, each from a spec checked on submit:

- TrainWork trains a model from a JobSpec and saves it under a name (atomically, never over an
  existing model), with its training timeline beside it;
- RetrainWoWork retrains W_o alone on a copy of a shared model (RetrainSpec), measuring the task
  metric along the way (MetricCurve); nothing is saved;
- ExperimentWork reruns the W_o experiment (tfviz.experiments.experiment: learned against identity
or
  block-diagonal) from an ExperimentSpec; its result stays in memory, so the shipped results are
  never overwritten;
- LanguageWork trains a small character language model on the bundled Shakespeare corpus from a
  LanguageSpec and saves it as a model folder (tfviz.training.language, the "tfviz-lm" family)
  under a name, atomically and never over an existing model, with its validation loss and
  induction score in the folder's record;
- AtlasSweep sweeps one cell of the W_o atlas again (every arm, the seeds asked for) through the
  atlas's command line in a process of its own (tfviz.experiments.atlas_runner), following the
  rows it writes; they are the session's only, and the bundled atlas is never changed.

Each reports its progress and how it ended as tfviz.messages.Message values, and refuses bad
settings with tfviz.messages.Refused (tfviz.serve.checks), for the app to word in the page's
language.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, replace
from pathlib import Path

from tfviz.core import modes
from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.core.tasks import get_task
from tfviz.experiments import atlas_runner, experiment
from tfviz.experiments.atlas_store import read_rows
from tfviz.messages import Message, Refused, say
from tfviz.refusal import cause
from tfviz.serve.checks import _shown, check_size, one_of, positive_at_most, whole_number
from tfviz.serve.jobs import JobFailed, Report, Stopped, step_reporter
from tfviz.settings import (
    EXPERIMENT_MAX_SEEDS,
    EXPERIMENT_MAX_STEPS,
    MAX_SEED,
    MAX_STEPS,
    RETRAIN_MAX_STEPS,
)
from tfviz.training import language
from tfviz.training.checkpoint import SUFFIX, safe_model_path, save_checkpoint
from tfviz.training.evaluate import evaluate
from tfviz.training.recipes import CLASS_RECIPES, CLASS_SIZES
from tfviz.training.timeline import MAX_SNAPSHOTS, Timeline, save_timeline, timeline_path
from tfviz.training.train import (
    W_O_STARTS,
    resolve_device,
    retrain_w_o,
    train,
)

TRAIN_W_O = modes.TRAINING  # the W_o a model can be trained with in the app: every training mode
EVAL_N = 1000  # fresh examples measured after training; stored in the checkpoint's metrics
RETRAIN_EVAL_N = 512  # fresh examples behind each point of a W_o retraining's metric curve
RETRAIN_CURVE_POINTS = 20  # points of that curve after step 0 (about: one every steps // 20)
# The limits and environment variables of the server are in tfviz.settings; MAX_PARAMS there
# also caps training: the largest model the Train form offers has about 2.1 M parameters.


@dataclass(frozen=True)
class JobSpec:
    """What to train: task, sizes and training settings, and the name to save it under.

    Steps, learning rate and batch size left out are the task's first-run recipe
    (tfviz.training.recipes.CLASS_RECIPES), the settings measured to learn it in seconds.
    """

    task: str
    name: str
    d_model: int = CLASS_SIZES["d_model"]
    n_heads: int = CLASS_SIZES["n_heads"]
    n_layers: int = CLASS_SIZES["n_layers"]
    d_ff: int = CLASS_SIZES["d_ff"]
    steps: int | None = None
    lr: float | None = None
    seed: int = 0
    # a training mode (tfviz.core.modes.TRAINING): "identity" trains with no W_o
    w_o: str = "learned"
    batch_size: int | None = None
    # A causal toy model (a decoder's attention: each token reads only itself and earlier ones),
    # to compare with an encoder trained on the same task; only tasks it can learn
    # (Task.learns_causally: one answer per sequence, read at the last token).
    causal: bool = False

    def __post_init__(self) -> None:
        recipe = CLASS_RECIPES.get(self.task)  # an unknown task is refused by model_config
        for field_name in ("steps", "lr", "batch_size"):
            if getattr(self, field_name) is None and recipe is not None:
                object.__setattr__(self, field_name, getattr(recipe, field_name))

    def model_config(self) -> ModelConfig:
        """The model config, or Refused (a ValueError) with a message a student can act on."""
        task = get_task(self.task)  # first: an unknown task has no default steps to check
        whole_number(self.steps, "steps", 1, MAX_STEPS, int_only=True)
        positive_at_most(self.lr, "lr", 1)
        one_of(self.w_o, "w_o", TRAIN_W_O)
        whole_number(self.seed, "seed", 0, MAX_SEED, int_only=True)
        if self.causal and not task.learns_causally:
            raise Refused(say("causal_per_token"))
        config = task.model_config(
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=0.0,  # as the bundled models: tiny models on endless fresh data need none
            causal=self.causal,
        )
        check_size(config)
        return config


@dataclass(frozen=True)
class TrainResult:
    """A finished training: where the model was saved and how it scored on fresh examples."""

    path: str
    metrics: dict
    timeline: str | None = None  # where the run's kept steps were saved (tfviz.training.timeline)


class TrainWork:
    """Train a model from a JobSpec and save it as folder/<name>.safetensors.

    The name is checked (and claimed) when the job is submitted; the file is written atomically
    after training, and never over a model that appeared under that name in the meantime.
    """

    kind = "train"
    # A running training whose tab closes goes on, saves its model and frees its slot: the model
    # is in the picker when the student comes back (a reload is a new session), so a closed tab
    # or a phone's dropped connection loses nothing. A queued one still gives its place up.
    finishes_without_owner = True

    def __init__(
        self,
        spec: JobSpec,
        folder: Path,
        reserved: frozenset[str] = frozenset(),
        device: str = "auto",
    ):
        self.spec = spec
        self.folder = Path(folder)
        self.reserved = reserved  # names the picker already uses (the bundled models)
        self.device = device
        self.config: ModelConfig | None = None
        self.path: Path | None = None
        self.result: TrainResult | None = None

    @property
    def total(self) -> int:
        return self.spec.steps

    @property
    def claim(self) -> Path | None:
        return self.path

    def validate(self, claimed: Collection[Hashable]) -> None:
        self.config = self.spec.model_config()
        self.path = safe_model_path(self.folder, self.spec.name, reserved=self.reserved)
        self.spec = replace(self.spec, name=self.path.stem)
        # A language model's folder of that name (LanguageWork) takes the name too.
        taken = self.path.exists() or folder_path(self.path).exists()
        if taken or self.path in claimed:
            raise Refused(say("name_taken", name=self.path.stem))

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message:
        spec, path = self.spec, self.path
        report(message=say("training"))

        on_step = step_reporter(report, should_stop)
        # Snapshots for the timeline slider: about MAX_SNAPSHOTS evenly spread, whatever steps.
        timeline = Timeline(every=max(1, spec.steps // MAX_SNAPSHOTS))
        model, history = train(
            spec.task,
            self.config,
            steps=spec.steps,
            batch_size=spec.batch_size,
            lr=spec.lr,
            seed=spec.seed,
            device=str(resolve_device(self.device)),
            w_o=spec.w_o,
            on_step=on_step,
            timeline=timeline,
        )
        if history["cancelled"]:
            raise Stopped(say("after_steps_not_saved", steps=history["steps_done"]))
        report(message=say("evaluating", n=EVAL_N))
        metrics = evaluate(model, spec.task, n=EVAL_N)
        history["name"] = spec.name
        try:
            # Not over an existing file: another server sharing the folder (or someone by hand)
            # may have saved this name while this one trained.
            save_checkpoint(path, model, spec.task, history, metrics, overwrite=False)
        except FileExistsError:
            raise JobFailed(say("name_appeared", name=path.stem)) from None
        except OSError as e:  # disk full, folder made read-only... (written atomically)
            # Worded by the catalogue in each session's language (tfviz.refusal.cause)
            raise JobFailed(say("save_failed", file=path.name, why=cause(e))) from e
        try:  # the model is saved; its timeline is a bonus that must not cost it
            saved = save_timeline(timeline_path(path), timeline)
        except OSError:
            saved = None
        self.result = TrainResult(path=str(path), metrics=metrics, timeline=saved and str(saved))
        return say("saved", file=path.name)


@dataclass(frozen=True)
class RetrainSpec:
    """Retrain W_o alone (tfviz.training.train.retrain_w_o) on a copy of a loaded model."""

    task: str
    start: str = "identity"  # "identity", "zero", "random" or "learned"
    steps: int = 300
    lr: float = 3e-3
    seed: int = 0

    def check(self) -> None:
        """Refused (a ValueError) with a message a student can act on, for settings out of range."""
        get_task(self.task)
        one_of(self.start, "start", W_O_STARTS)
        whole_number(self.steps, "steps", 1, RETRAIN_MAX_STEPS, int_only=True)
        positive_at_most(self.lr, "lr", 1)


@dataclass(frozen=True)
class RetrainResult:
    """W_o retrained alone: the metric with the learned W_o, and over the retraining's steps."""

    metrics_learned: dict
    curve_steps: list[int]  # steps at which the metric was measured: 0, ..., the last step
    curve: list[dict]  # tfviz.training.evaluate's output at each of them, on the same examples
    losses: list[float]

    @property
    def metrics_start(self) -> dict:
        return self.curve[0]

    @property
    def metrics_after(self) -> dict:
        return self.curve[-1]


class MetricCurve:
    """A tfviz.training.train.Recorder: the task metric of the model being trained at step 0, every
    `every` steps and at the last step, each time on the same RETRAIN_EVAL_N fresh examples."""

    def __init__(self, task: str, steps: int, every: int, n: int = RETRAIN_EVAL_N):
        self.task, self.steps, self.every, self.n = task, steps, max(1, every), n
        self.done: list[int] = []
        self.metrics: list[dict] = []

    def record(self, step: int, model: Transformer) -> None:
        if step % self.every and step != self.steps:
            return
        model.eval()  # no dropout while measuring; the trainer gets its mode back
        try:
            self.metrics.append(evaluate(model, self.task, n=self.n))
        finally:
            model.train()
        self.done.append(step)


class RetrainWoWork:
    """Retrain only W_o of a copy of a shared model, in the one job system; nothing is saved."""

    kind = "retrain_w_o"

    def __init__(self, spec: RetrainSpec, model: Transformer):
        self.spec = spec
        self.model = model  # shared: read, never changed (retrain_w_o trains a copy)
        self.result: RetrainResult | None = None

    @property
    def total(self) -> int:
        return self.spec.steps

    @property
    def claim(self) -> None:
        return None

    def validate(self, claimed: Collection[Hashable]) -> None:
        self.spec.check()
        get_task(self.spec.task).check_config(self.model.config)

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message:
        spec = self.spec
        report(message=say("measuring_learned"))
        learned = evaluate(self.model, spec.task, n=RETRAIN_EVAL_N)
        report(message=say("retraining", start=spec.start), new_curve=True)
        curve = MetricCurve(spec.task, spec.steps, spec.steps // RETRAIN_CURVE_POINTS)

        on_step = step_reporter(report, should_stop)
        copy, history = retrain_w_o(
            self.model,
            spec.task,
            start=spec.start,
            steps=spec.steps,
            lr=spec.lr,
            seed=spec.seed,
            on_step=on_step,
            recorder=curve,
        )
        if history["cancelled"]:
            raise Stopped(say("after_steps", steps=history["steps_done"]))
        self.result = RetrainResult(learned, curve.done, curve.metrics, history["loss"])
        return say("retrained", steps=spec.steps)


@dataclass(frozen=True)
class ExperimentSpec:
    """What to rerun: the task, how many seeds per condition and how many steps per run, and what
    the learned W_o is compared with (experiment.AGAINST)."""

    task: str
    seeds: int = 2
    steps: int = 200
    against: str = "identity"

    @property
    def conditions(self) -> tuple[str, str]:
        return ("learned", self.against)

    def check(self) -> None:
        """Refused (a ValueError) with a message a student can act on, for settings out of range."""
        get_task(self.task)  # names the known tasks if unknown
        experiment.check_against(self.against)
        whole_number(self.seeds, "seeds", 1, EXPERIMENT_MAX_SEEDS, int_only=True)
        whole_number(self.steps, "steps", 1, EXPERIMENT_MAX_STEPS, int_only=True)

    @property
    def runs(self) -> int:
        return self.seeds * len(self.conditions)


class ExperimentWork:
    """Rerun tfviz.experiments.experiment for one task: every seed trained with the learned W_o and
    with the one it is compared against (spec.against).

    The result (an ExperimentResult, also when stopped: its finished runs) stays in memory for
    the caller to keep in its session; nothing is written to disk. The loss curve in job states
    is that of the first run (all runs train together).
    """

    kind = "experiment"

    def __init__(self, spec: ExperimentSpec, device: str = "cpu"):
        self.spec = spec
        self.device = device  # "cpu" keeps reruns comparable with the shipped results
        self.result: experiment.ExperimentResult | None = None

    @property
    def total(self) -> int:
        return self.spec.runs * self.spec.steps

    @property
    def claim(self) -> None:
        return None  # reruns write nothing, so any number may run side by side

    def validate(self, claimed: Collection[Hashable]) -> None:
        self.spec.check()

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message:
        done = 0
        shown = {"run": 0, "step": 0}  # the run whose loss curve the job states carry

        def on_progress(p: experiment.Progress) -> bool:
            nonlocal done
            # One call per step of one run: counting calls stays right however the runs are
            # scheduled. The curve follows one run; it moves on only to a run that starts after
            # the shown one has finished (runs trained together keep the first run's curve).
            done += 1
            starts_after = p.step == 1 and shown["step"] >= p.steps
            if p.run != shown["run"] and (shown["run"] == 0 or starts_after):
                shown["run"] = p.run
                which = dict(run=p.run, runs=p.runs, seed=p.seed, condition=p.condition)
                if p.runs == 1:
                    curve = say("run_curve", **which)
                else:
                    curve = say("run_curve_together", **which)
                report(message=curve, new_curve=True)
            if p.run == shown["run"]:
                shown["step"] = p.step
                report(done=done, step=p.step, loss=p.loss)
            else:
                report(done=done)
            return not should_stop()

        spec = self.spec
        result = experiment.run_experiment(
            spec.task,
            seeds=spec.seeds,
            steps=spec.steps,
            device=self.device,
            on_progress=on_progress,
            conditions=spec.conditions,
        )
        self.result = result
        finished = len(result.runs)
        if result.cancelled:
            if not finished:  # the runs train together: a stop usually comes before any ends
                raise Stopped(say("no_run_finished", done=done, total=self.total))
            raise Stopped(say("runs_kept", finished=finished, runs=spec.runs))
        return say("runs_finished", finished=finished)


# ---- a language model --------------------------------------------------------------------------

# The Train form's sizes for a language model: small enough that a class server runs many at once
# (the largest, 4 layers of D 128 with the feed-forward net, has about 0.8 M parameters).
LM_LAYERS = (1, 4)  # the fewest and most layers
LM_D_MODELS = (32, 64, 128)
LM_MAX_HEADS = 8
LM_CONTEXTS = (64, 128, 256)  # characters a window holds
LM_POSITIONS = ("rotary", "learned")
LM_BATCH = (1, 64)
LM_MAX_LR = 0.1
# Chosen so that the default model (2 layers of D 64 attention only, context 128, batch 16) trains
# in under a minute on one thread of a small server (bench/lm_estimate.py measures it; a busy
# class server takes two or three times as long). Its validation loss is then about 1.88 nats per
# character (a character's frequency alone gives 3.36) and its samples read as English: words,
# lines, speakers' names ("There be, if he be oft this the grown; her mather do thee").
LM_STEPS = 2000


@dataclass(frozen=True)
class LanguageSpec:
    """A character language model to train on the bundled Shakespeare corpus, and its name.

    The sizes and settings are tfviz.training.language's (language_config, train_language_model):
    a causal model, pre-norm, one token a character; the feed-forward net on or off, positions
    rotary or learned; AdamW with a warm-up and cosine decay. w_o: a training mode
    (tfviz.core.modes.TRAINING), as for a toy model.
    """

    name: str
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    ffn: bool = False
    context: int = 128
    positions: str = "rotary"
    steps: int = LM_STEPS
    batch_size: int = 16
    lr: float = 3e-3
    seed: int = 0
    w_o: str = "learned"

    def check(self) -> None:
        """Refused (a ValueError) with a message a student can act on, for settings out of range."""
        low, high = LM_LAYERS
        if not _whole(self.n_layers, low, high):
            raise Refused(say("lm_layers", low=low, high=high, got=_shown(self.n_layers)))
        if self.d_model not in LM_D_MODELS or isinstance(self.d_model, bool):
            options = ", ".join(map(str, LM_D_MODELS))
            raise Refused(say("lm_d_model", options=options, got=_shown(self.d_model)))
        if not _whole(self.n_heads, 1, LM_MAX_HEADS) or self.d_model % self.n_heads:
            raise Refused(
                say("lm_heads", high=LM_MAX_HEADS, d_model=self.d_model, got=_shown(self.n_heads))
            )
        if not isinstance(self.ffn, bool):
            raise Refused(say("lm_ffn", got=_shown(self.ffn)))
        if self.context not in LM_CONTEXTS or isinstance(self.context, bool):
            options = ", ".join(map(str, LM_CONTEXTS))
            raise Refused(say("lm_context", options=options, got=_shown(self.context)))
        if self.positions not in LM_POSITIONS:
            options = ", ".join(LM_POSITIONS)
            raise Refused(say("lm_positions", options=options, got=_shown(self.positions)))
        low, high = LM_BATCH
        if not _whole(self.batch_size, low, high):
            raise Refused(say("lm_batch", low=low, high=high, got=_shown(self.batch_size)))
        whole_number(self.steps, "steps", 1, MAX_STEPS, int_only=True)
        positive_at_most(self.lr, "lr", LM_MAX_LR)
        whole_number(self.seed, "seed", 0, MAX_SEED, int_only=True)
        one_of(self.w_o, "w_o", TRAIN_W_O)


def _whole(value, low: int, high: int) -> bool:
    """value is an int (not a bool) in [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def folder_path(checkpoint: Path) -> Path:
    """The model folder of the same name as a checkpoint path (folder/NAME.safetensors ->
    folder/NAME): a toy model and a language model never share a name."""
    return checkpoint.with_name(checkpoint.name.removesuffix(SUFFIX))


@dataclass(frozen=True)
class LanguageResult:
    """A finished language model: its folder and what its record measured."""

    path: str  # the model folder
    record: dict  # tfviz.training.language.measure_record's, as the folder's config.json holds

    @property
    def valid_loss(self) -> float:
        """Nats per character over the corpus's whole validation split."""
        return self.record["valid_loss"]

    @property
    def induction(self) -> float:
        """The best head's induction score on the repeated random letters."""
        return self.record["induction_best"]["score"]

    @property
    def induction_layer(self) -> int:
        return self.record["induction_best"]["layer"]

    @property
    def induction_head(self) -> int:
        return self.record["induction_best"]["head"]

    @property
    def in_context_drop(self) -> float:
        """The loss on the first copy minus the loss on the repeat, nats."""
        return self.record["in_context_drop"]


class LanguageWork:
    """Train a character language model from a LanguageSpec and save it as folder/<name>/, a
    model folder tfviz.hf opens (the picker lists it for everyone: tfviz.ui.folders).

    The name is checked (and claimed) on submit: not a bundled model's, not an existing model
    folder's nor a toy checkpoint's (<name>.safetensors). The folder is written into a hidden
    temporary folder beside it and renamed into place once whole; a model that appeared under the
    name meanwhile is kept, and this one is not saved. A stopped run saves nothing.
    """

    kind = "language"
    # As TrainWork: a closed tab's training goes on and saves its model for the picker.
    finishes_without_owner = True

    def __init__(
        self,
        spec: LanguageSpec,
        folder: Path,
        reserved: frozenset[str] = frozenset(),
        device: str = "auto",
    ):
        self.spec = spec
        self.folder = Path(folder)
        self.reserved = reserved  # names the picker already uses (the bundled models)
        self.device = device
        self.path: Path | None = None  # the model folder
        self._checkpoint: Path | None = None  # folder/<name>.safetensors: the claim
        self.result: LanguageResult | None = None

    @property
    def total(self) -> int:
        return self.spec.steps

    @property
    def claim(self) -> Path | None:
        # The toy checkpoint's path: a toy training (TrainWork) of the same name claims it too.
        return self._checkpoint

    def validate(self, claimed: Collection[Hashable]) -> None:
        self.spec.check()
        checkpoint = safe_model_path(self.folder, self.spec.name, reserved=self.reserved)
        path = folder_path(checkpoint)
        self.spec = replace(self.spec, name=path.name)
        config = self.config()
        check_size(config)
        if path.exists() or checkpoint.exists() or checkpoint in claimed:
            raise Refused(say("name_taken", name=path.name))
        self.path, self._checkpoint = path, checkpoint

    def config(self) -> ModelConfig:
        s = self.spec
        return language.language_config(
            language.corpus_vocabulary(),
            s.context,
            s.n_layers,
            s.n_heads,
            s.d_model,
            s.ffn,
            s.positions,
        )

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message:
        spec, path = self.spec, self.path
        vocab, train_ids, valid_ids, manifest = language.bundled_corpus()
        report(message=say("training"))
        model, history = language.train_language_model(
            train_ids,
            self.config(),
            steps=spec.steps,
            batch_size=spec.batch_size,
            lr=spec.lr,
            seed=spec.seed,
            device=str(resolve_device(self.device)),
            on_step=step_reporter(report, should_stop),
            w_o=spec.w_o,
        )
        if history["cancelled"]:
            raise Stopped(say("after_steps_not_saved", steps=history["steps_done"]))
        report(message=say("lm_measuring", n=len(valid_ids)))
        record = language.measure_record(model, vocab, valid_ids, history, manifest)
        sizes = ("n_layers", "n_heads", "d_model", "ffn", "positions")
        record |= {"name": spec.name} | {k: getattr(spec, k) for k in sizes}
        self.save(model, vocab, record)
        self.result = LanguageResult(path=str(path), record=record)
        return say("saved", file=f"{path.name}/")

    def save(self, model, vocab: language.CharVocabulary, record: dict) -> None:
        """Write the folder beside its place, then rename it into place: readers (the picker)
        see no folder or a whole one, and nothing that appeared under the name is replaced."""
        path = self.path
        shown = f"{path.name}/"
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            language.save_language_folder(tmp, model, vocab, record, card(path.name, record))
            # Not over a model saved under this name meanwhile (another server sharing the
            # folder, or someone by hand): a folder, or a toy checkpoint of the same name.
            if path.exists() or self._checkpoint.exists():
                raise JobFailed(say("name_appeared", name=path.name))
            os.rename(tmp, path)  # fails on a folder with files in it: never over a model
        except JobFailed:
            raise
        except OSError as e:
            if path.exists():
                raise JobFailed(say("name_appeared", name=path.name)) from None
            raise JobFailed(say("save_failed", file=shown, why=cause(e))) from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def card(name: str, record: dict) -> str:
    """The folder's README.md: tfviz.training.language.model_card, made in the app's Train tab
    (not rebuilt by the command line, as a bundled model is)."""
    made = (
        f"Trained in tfviz's Train tab: {record['n_layers']} layers, D {record['d_model']}, "
        f"{record['n_heads']} heads, feed-forward net {'on' if record['ffn'] else 'off'}, "
        f"{record['positions']} positions, W_o {record['w_o']}, seed {record['seed']}."
    )
    return language.model_card(name, record, made)


# ---- a sweep of one atlas cell -----------------------------------------------------------------

SWEEP_MAX_SEEDS = 5  # seeds of every arm a sweep started from the app may ask for
SWEEP_POLL_S = 0.5  # how often a running sweep's rows are read and a stop is looked for
# A stopped sweep's command has this long to close its cluster before the group is killed: a stop
# ends well within the manager's cut-off at a shutdown (jobs.CUT_OFF_WAIT_S).
SWEEP_STOP_WAIT_S = 4.0


@dataclass(frozen=True)
class SweepSpec:
    """A sweep of one atlas cell (its key, tfviz.experiments.atlas_cells.Cell.key): every arm
    with `seeds` seeds, its rows written to `out` (a file of the browser session's own), `budget`
    steps a run (None: each task's recipe, as the bundled atlas)."""

    cell: str
    seeds: int
    out: Path
    budget: int | None = None


class AtlasSweep:
    """Sweep one atlas cell again through the atlas's command line, in a process of its own.

    The process (tfviz.experiments.atlas_runner.sweep_command: its own LocalCluster of one worker,
    torch on one thread) runs in a new process group, never inside the server's process; the job
    takes one of the server's slots like any other, so a class cannot fill the cores with sweeps.
    Its progress is the runs done (the whole rows in `out`) of those planned. A stop (the Stop
    button, a closed tab, a server shutting down) ends the group: SIGTERM, on which the command
    closes its cluster, then SIGKILL to whatever is left. The rows written are the result, also
    when stopped; a command that exits with an error before writing every row fails the job.
    """

    kind = "atlas_sweep"
    # A run takes seconds to minutes: the time left is said once one run has been timed.
    estimate_after = 1

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self.runs = 0  # planned, once validated
        self.process: subprocess.Popen | None = None
        self.result: dict[str, dict] | None = None

    @property
    def total(self) -> int:
        return self.runs

    @property
    def claim(self) -> Path:
        return Path(self.spec.out)  # one sweep at a time writes a session's file

    def validate(self, claimed: Collection[Hashable]) -> None:
        whole_number(self.spec.seeds, "seeds", 1, SWEEP_MAX_SEEDS, int_only=True)
        if self.spec.budget is not None:
            whole_number(self.spec.budget, "steps", 1, MAX_STEPS, int_only=True)
        self.runs = atlas_runner.planned_runs(self.spec.cell, self.spec.seeds)
        if self.claim in claimed:
            raise Refused(say("sweep_running"))

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message:
        out = Path(self.spec.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)  # a new sweep of the session starts from nothing
        report(done=0)  # the clock of the time left starts with the process
        self.process = self._start(out)
        try:
            stopped = self._follow(out, report, should_stop)
        finally:
            self._stop()  # whatever happened here, the group does not outlive the job
        self.result = read_rows(out)
        finished = len(self.result)
        report(done=finished)
        if stopped:
            raise Stopped(say("runs_kept", finished=finished, runs=self.runs))
        code = self.process.returncode
        if code != 0 and finished < self.runs:
            raise JobFailed(say("sweep_failed", exit_code=code, finished=finished, runs=self.runs))
        return say("runs_finished", finished=finished)

    def _start(self, out: Path) -> subprocess.Popen:
        spec = self.spec
        cmd = atlas_runner.sweep_command(spec.cell, spec.seeds, out, spec.budget)
        with open(out.with_suffix(".log"), "wb") as log:
            return subprocess.Popen(
                cmd,
                cwd=atlas_runner.ROOT,
                env=os.environ | atlas_runner.CHILD_ENV,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own group: a stop reaches its workers too
            )

    def _follow(self, out: Path, report: Report, should_stop: Callable[[], bool]) -> bool:
        """Report the runs done as their rows come, until the process ends (False) or
        should_stop() says yes (True)."""
        done = 0
        while self.process.poll() is None:
            if should_stop():
                return True
            try:
                self.process.wait(SWEEP_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            now = len(read_rows(out))
            if now != done:
                done = now
                report(done=done)
        return False

    def _stop(self) -> None:
        """End the process group if its command still runs: SIGTERM (the command closes its
        cluster), then SIGKILL to whatever is left of the group."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(SWEEP_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)  # its workers, if they are still there
        except ProcessLookupError:
            pass
        process.wait(SWEEP_STOP_WAIT_S)
