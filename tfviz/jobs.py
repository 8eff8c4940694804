"""Background jobs for the app: one queue and one cap for training and experiment reruns.

Streamlit aborts work done in the script thread whenever the user touches a widget, so anything
that trains runs in a worker thread started here. The worker never calls Streamlit (this module
does not import it): it writes its progress into its Job under a lock, and the page polls
`Job.snapshot()`. One JobManager serves the whole process, so its cap on concurrent jobs (one per
core) holds across every browser session and every kind of work; a job over the cap waits in one
first-come-first-served queue and can see its place in it. When the queue is full too, a new job
is refused (QueueFull) with a message, whatever its kind.

The manager knows nothing of what a job does. A job carries a `work` object (see `Work`):
- TrainWork trains a model from a JobSpec and saves it under a name (atomically, never over an
  existing model);
- ExperimentWork reruns the W_o experiment (tfviz.experiment: learned against identity or
  block-diagonal) from an ExperimentSpec; its result stays in memory, so the shipped results are
  never overwritten;
- RetrainWoWork retrains W_o alone on a copy of a shared model (RetrainSpec), measuring the task
  metric along the way (MetricCurve); nothing is saved.
Both report into the same snapshot shape (status, message, steps done of total, the loss curve,
the result), so one progress view fits both.

A job may carry `is_alive`, a check of whether whoever started it is still there (the app passes
"is this browser session still open?"). The manager asks it of queued jobs: once it says no, the
job never starts and its place goes to the next one. A running job whose result lives only in
its session (an experiment rerun, a W_o retraining) asks it between steps and stops, freeing its
slot: nobody would see the result. A running training is the exception: it finishes and saves its
model, which every session's picker lists, so a student who closed the tab (or whose phone
dropped the connection) finds the model on coming back; its slot frees when it ends, as always.

Uploaded checkpoints are held to the same size budget as trained ones (`MAX_PARAMS`), which
load_checkpoint checks against the config before any model is built (`load_upload`).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch

from tfviz import experiment
from tfviz.checkpoint import (
    CheckpointMeta,
    load_checkpoint,
    safe_model_path,
    save_checkpoint,
)
from tfviz.config import ModelConfig
from tfviz.evaluate import evaluate
from tfviz.model import Encoder
from tfviz.recipes import CLASS_RECIPES, CLASS_SIZES
from tfviz.settings import (
    EXPERIMENT_MAX_SEEDS,
    EXPERIMENT_MAX_STEPS,
    MAX_PARAMS,
    MAX_STEPS,
    RETRAIN_MAX_STEPS,
)
from tfviz.settings import (
    max_jobs as settings_max_jobs,
)
from tfviz.settings import (
    max_queue as settings_max_queue,
)
from tfviz.tasks import get_task
from tfviz.timeline import MAX_SNAPSHOTS, Timeline, save_timeline, timeline_path
from tfviz.trainer import (
    W_O_STARTS,
    StepInfo,
    resolve_device,
    retrain_w_o,
    train,
)

EVAL_N = 1000  # fresh examples measured after training; stored in the checkpoint's metrics
LOSS_POINTS = 400  # points of the live loss curve a snapshot carries
CUT_OFF_WAIT_S = 10  # a cancelled job stops at its next step: milliseconds, seconds at worst
RETRAIN_EVAL_N = 512  # fresh examples behind each point of a W_o retraining's metric curve
RETRAIN_CURVE_POINTS = 20  # points of that curve after step 0 (about: one every steps // 20)
# The limits and environment variables of the server are in tfviz.settings; MAX_PARAMS there
# also caps training: the largest model the Train form offers has about 2.1 M parameters.

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = (DONE, FAILED, CANCELLED)
OWNER_GONE = "the browser session that started it has closed"
SHUTTING_DOWN = "the server is shutting down"


class QueueFull(RuntimeError):
    """Every slot is busy and the waiting queue is full; the message says so, and `slots` and
    `waiting` hold the numbers for a UI that words it in its own language."""

    def __init__(self, message: str, slots: int = 0, waiting: int = 0):
        super().__init__(message)
        self.slots, self.waiting = slots, waiting


class Draining(QueueFull):
    """The server is shutting down (SIGTERM, as in a rolling update) and takes no new job; the
    running ones may finish (JobManager.drain)."""


class Stopped(Exception):
    """Raised by Work.run when should_stop() said yes; the message says how far it got."""


class JobFailed(Exception):
    """Raised by Work.run for a failure whose message is meant for the user as it is."""


def limit_torch_threads(n: int = 1) -> None:
    """Let torch use n threads for its kernels, in this thread and every thread started later.

    torch keeps the count process-wide (threads that already ran torch code keep theirs), so it is
    set once, early, not inside each training thread. The models here are tiny, so one thread runs
    them fastest: more only contend with each other and with other requests. With one thread,
    each training job and each page request takes about one core, which the jobs cap assumes.
    """
    torch.set_num_threads(n)


def _shown(value) -> str:
    """A typed value as a short text for a message: 1e+30, nan, 2.5, 'abc'."""
    if isinstance(value, float):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def whole_number(value, what: str, low: int, high: int) -> int:
    """value as an int if it is a whole number in [low, high], else ValueError saying so.

    Form fields arrive as floats (or anything a crafted request sends): 2.0 is fine, 2.5, NaN,
    inf, -1 and 1e30 are refused with a message naming the field and the allowed range.
    """
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value == int(value)
        and low <= value <= high
    )
    if not ok:
        raise ValueError(
            f"{what} must be a whole number from {low:,} to {high:,}; got {_shown(value)}"
        )
    return int(value)


def number_in_range(value, what: str, low: float, high: float) -> float:
    """value as a float if it is a finite number in [low, high], else ValueError saying so."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )
    if not ok:
        raise ValueError(f"{what} must be a number from {low:g} to {high:g}; got {_shown(value)}")
    return float(value)


def check_size(config: ModelConfig, max_params: int = MAX_PARAMS) -> int:
    """The parameter count of config, or ValueError if it is over max_params."""
    n = config.n_params
    if n > max_params:
        raise ValueError(
            f"the model has {n:,} parameters; this server takes models of at most "
            f"{max_params:,} (make d_model, d_ff or the number of layers smaller)"
        )
    return n


def load_upload(
    data: bytes, max_bytes: int, max_params: int = MAX_PARAMS, device: str = "cpu"
) -> tuple[Encoder, CheckpointMeta]:
    """An uploaded checkpoint's (model, meta), under the upload's byte limit and the size budget.

    Raises:
        CheckpointError: anything wrong with the file, with a message that says what.
    """
    return load_checkpoint(data, max_bytes=max_bytes, device=device, max_params=max_params)


def alive_with_grace(
    is_alive: Callable[[], bool], grace_s: float, clock: Callable[[], float] = time.monotonic
) -> Callable[[], bool]:
    """is_alive, except that it turns False only after saying False for grace_s seconds in a row.

    A browser's connection drops for a moment when a laptop sleeps or the Wi-Fi hiccups, and
    Streamlit lets the session reconnect within a grace time; a training job should outlive that.
    """
    lock = threading.Lock()
    dead_since: float | None = None

    def check() -> bool:
        nonlocal dead_since
        alive = is_alive()
        now = clock()
        with lock:
            if alive:
                dead_since = None
                return True
            if dead_since is None:
                dead_since = now
            return now - dead_since < grace_s

    return check


# ---- what a job does ---------------------------------------------------------------------------


class Report(Protocol):
    """How a worker tells its Job how far it is; every keyword is optional.

    done: training steps done over the whole job (the fraction is done / Work.total);
    step, loss: the step within the current loss curve and its loss, appended to that curve;
    message: the new status line; new_curve: start a fresh loss curve (an experiment's next run).
    """

    def __call__(
        self,
        *,
        done: int | None = None,
        step: int | None = None,
        loss: float | None = None,
        message: str | None = None,
        new_curve: bool = False,
    ) -> None: ...


class Work(Protocol):
    """One kind of job. The manager calls validate() on submit, then run() in a worker thread.

    validate(claimed) checks the settings and raises ValueError with a message a student can act
    on; it runs under the manager's lock with the claims of every queued and running job, so two
    jobs can never hold the same claim (a training's model file). run(report, should_stop) does
    the work: it calls report(...) as it goes and should_stop() between steps, raises Stopped
    when that said yes, JobFailed with a message for the user, and returns a message when done.
    It leaves what it produced in `result` (also when stopped, if part of it is worth keeping).
    """

    kind: str  # "train", "experiment", "retrain_w_o": names the worker thread, tells them apart
    spec: Any  # what was asked for, shown in snapshots
    result: Any

    @property
    def total(self) -> int: ...  # training steps the whole job takes (valid after validate)

    @property
    def claim(self) -> Hashable | None: ...  # held by at most one active job (after validate)

    def validate(self, claimed: Collection[Hashable]) -> None: ...

    def run(self, report: Report, should_stop: Callable[[], bool]) -> str: ...


@dataclass(frozen=True)
class JobSpec:
    """What to train: task, sizes and training settings, and the name to save it under.

    Steps, learning rate and batch size left out are the task's first-run recipe
    (tfviz.recipes.CLASS_RECIPES), the settings measured to learn it in seconds.
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
    w_o: str = "learned"  # "learned", or "identity": train with no W_o at all
    batch_size: int | None = None

    def __post_init__(self) -> None:
        recipe = CLASS_RECIPES.get(self.task)  # an unknown task is refused by model_config
        for field_name in ("steps", "lr", "batch_size"):
            if getattr(self, field_name) is None and recipe is not None:
                object.__setattr__(self, field_name, getattr(recipe, field_name))

    def model_config(self) -> ModelConfig:
        """The model config, or ValueError with a message a student can act on."""
        task = get_task(self.task)  # first: an unknown task has no default steps to check
        if not isinstance(self.steps, int) or not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(
                f"steps must be a whole number from 1 to {MAX_STEPS:,}, got {self.steps!r}"
            )
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and 0 < self.lr <= 1):
            raise ValueError(f"the learning rate must be a number in (0, 1], got {self.lr!r}")
        if self.w_o not in ("learned", "identity"):
            raise ValueError(f"w_o must be 'learned' or 'identity', got {self.w_o!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"the seed must be a whole number >= 0, got {self.seed!r}")
        config = task.model_config(
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=0.0,  # as the bundled models: tiny models on endless fresh data need none
        )
        check_size(config)
        return config


@dataclass(frozen=True)
class TrainResult:
    """A finished training: where the model was saved and how it scored on fresh examples."""

    path: str
    metrics: dict
    timeline: str | None = None  # where the run's snapshots were saved (tfviz.timeline)


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
        if self.path.exists() or self.path in claimed:
            raise ValueError(
                f"a model named {self.path.stem!r} already exists or is being trained; "
                f"choose another name"
            )

    def run(self, report: Report, should_stop: Callable[[], bool]) -> str:
        spec, path = self.spec, self.path
        report(message="training")

        def on_step(info: StepInfo) -> bool:
            report(done=info.step, step=info.step, loss=info.loss)
            return not should_stop()

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
            raise Stopped(f"after {history['steps_done']} steps; not saved")
        report(message=f"measuring accuracy on {EVAL_N} fresh examples")
        metrics = evaluate(model, spec.task, n=EVAL_N)
        history["name"] = spec.name
        try:
            # Not over an existing file: another server sharing the folder (or someone by hand)
            # may have saved this name while this one trained.
            save_checkpoint(path, model, spec.task, history, metrics, overwrite=False)
        except FileExistsError:
            raise JobFailed(
                f"a model named {path.stem!r} appeared while this one trained; it was kept as it "
                f"is and this one was not saved"
            ) from None
        except OSError as e:  # disk full, folder made read-only... (written atomically)
            raise JobFailed(
                f"trained, but saving {path.name} failed ({e.strerror or e}); nothing was "
                f"written and every saved model is as it was"
            ) from e
        try:  # the model is saved; its timeline is a bonus that must not cost it
            saved = save_timeline(timeline_path(path), timeline)
        except OSError:
            saved = None
        self.result = TrainResult(path=str(path), metrics=metrics, timeline=saved and str(saved))
        return f"saved as {path.name}"


@dataclass(frozen=True)
class RetrainSpec:
    """Retrain W_o alone (tfviz.trainer.retrain_w_o) on a copy of a loaded model."""

    task: str
    start: str = "identity"  # "identity", "zero", "random" or "learned"
    steps: int = 300
    lr: float = 3e-3
    seed: int = 0

    def check(self) -> None:
        get_task(self.task)
        if self.start not in W_O_STARTS:
            raise ValueError(f"W_o starts from one of {W_O_STARTS}, got {self.start!r}")
        if not isinstance(self.steps, int) or not 1 <= self.steps <= RETRAIN_MAX_STEPS:
            raise ValueError(
                f"steps must be a whole number from 1 to {RETRAIN_MAX_STEPS:,}, got {self.steps!r}"
            )
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and 0 < self.lr <= 1):
            raise ValueError(f"the learning rate must be a number in (0, 1], got {self.lr!r}")


@dataclass(frozen=True)
class RetrainResult:
    """W_o retrained alone: the metric with the learned W_o, and over the retraining's steps."""

    metrics_learned: dict
    curve_steps: list[int]  # steps at which the metric was measured: 0, ..., the last step
    curve: list[dict]  # tfviz.evaluate's output at each of them, on the same examples
    losses: list[float]

    @property
    def metrics_start(self) -> dict:
        return self.curve[0]

    @property
    def metrics_after(self) -> dict:
        return self.curve[-1]


class MetricCurve:
    """A trainer.Recorder: the task metric of the model being trained at step 0, every `every`
    steps and at the last step, each time on the same RETRAIN_EVAL_N fresh examples."""

    def __init__(self, task: str, steps: int, every: int, n: int = RETRAIN_EVAL_N):
        self.task, self.steps, self.every, self.n = task, steps, max(1, every), n
        self.done: list[int] = []
        self.metrics: list[dict] = []

    def record(self, step: int, model: Encoder) -> None:
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

    def __init__(self, spec: RetrainSpec, model: Encoder):
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

    def run(self, report: Report, should_stop: Callable[[], bool]) -> str:
        spec = self.spec
        report(message="measuring the learned W_o")
        learned = evaluate(self.model, spec.task, n=RETRAIN_EVAL_N)
        report(message=f"training W_o alone from {spec.start}", new_curve=True)
        curve = MetricCurve(spec.task, spec.steps, spec.steps // RETRAIN_CURVE_POINTS)

        def on_step(info: StepInfo) -> bool:
            report(done=info.step, step=info.step, loss=info.loss)
            return not should_stop()

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
            raise Stopped(f"after {history['steps_done']} steps")
        self.result = RetrainResult(learned, curve.done, curve.metrics, history["loss"])
        return f"W_o retrained alone for {spec.steps} steps"


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
        """ValueError with a message a student can act on, for settings out of range."""
        get_task(self.task)  # names the known tasks if unknown
        experiment.check_against(self.against)
        if not isinstance(self.seeds, int) or not 1 <= self.seeds <= EXPERIMENT_MAX_SEEDS:
            raise ValueError(
                f"seeds must be a whole number from 1 to {EXPERIMENT_MAX_SEEDS}, got {self.seeds!r}"
            )
        if not isinstance(self.steps, int) or not 1 <= self.steps <= EXPERIMENT_MAX_STEPS:
            raise ValueError(
                f"steps must be a whole number from 1 to {EXPERIMENT_MAX_STEPS:,}, "
                f"got {self.steps!r}"
            )

    @property
    def runs(self) -> int:
        return self.seeds * len(self.conditions)


class ExperimentWork:
    """Rerun tfviz.experiment for one task: every seed trained with the learned W_o and with the
    one it is compared against (spec.against).

    The result (an ExperimentResult, also when stopped: its finished runs) stays in memory for
    the caller to keep in its session; nothing is written to disk. The loss curve in snapshots
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

    def run(self, report: Report, should_stop: Callable[[], bool]) -> str:
        done = 0
        shown = {"run": 0, "step": 0}  # the run whose loss curve the snapshots carry

        def on_progress(p: experiment.Progress) -> bool:
            nonlocal done
            # One call per step of one run: counting calls stays right however the runs are
            # scheduled. The curve follows one run; it moves on only to a run that starts after
            # the shown one has finished (runs trained together keep the first run's curve).
            done += 1
            starts_after = p.step == 1 and shown["step"] >= p.steps
            if p.run != shown["run"] and (shown["run"] == 0 or starts_after):
                shown["run"] = p.run
                label = experiment.LABELS[p.condition]
                together = "" if p.runs == 1 else f" (all {p.runs} runs train together)"
                report(
                    message=f"curve of run {p.run} of {p.runs}: seed {p.seed}, {label}{together}",
                    new_curve=True,
                )
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
                raise Stopped(f"after {done} of {self.total} steps; no run had finished")
            raise Stopped(f"after {finished} of {spec.runs} runs; the finished ones are kept")
        return f"{finished} runs finished"


# ---- jobs and the manager ----------------------------------------------------------------------


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job's progress, safe to read from any thread. One shape for every
    kind of work: `kind` and `spec` say what it is, `result` what it produced."""

    id: int
    kind: str  # the work's kind: "train" or "experiment"
    spec: Any  # JobSpec or ExperimentSpec
    status: str  # queued, running, done, failed, cancelled
    message: str  # what is happening now, or how it ended
    done: int  # training steps done over the whole job
    total: int  # training steps the whole job takes
    step: int  # step within the current loss curve (a training; one run of an experiment)
    losses: list[float] = field(default_factory=list)  # current curve, averaged to <= LOSS_POINTS
    loss_every: int = 1  # steps per point of losses
    loss: float | None = None  # the last loss reported
    position: int | None = None  # 1-based place in the queue while queued
    result: Any = None  # TrainResult / ExperimentResult, once there is one
    seconds: float = 0.0  # since it started running

    @property
    def active(self) -> bool:
        return self.status not in FINAL

    @property
    def fraction(self) -> float:
        """Share of the job's training steps done, 0..1."""
        return min(1.0, self.done / self.total) if self.total else 0.0


class Job:
    """One piece of work in the manager's care. Its worker thread writes progress here; anyone
    may read a snapshot, cancel it or wait for it."""

    def __init__(
        self, job_id: int, work: Work, manager: JobManager, is_alive: Callable[[], bool] | None
    ):
        self.id = job_id
        self.work = work
        self._manager = manager
        self._is_alive = is_alive
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._cancel = threading.Event()
        self._abandoned = threading.Event()  # stopped because its owner went away
        self._status = QUEUED
        self._message = "waiting for a free slot"
        self._done = 0
        self._step = 0
        self._losses: list[float] = []
        self._result: Any = None
        self._started: float | None = None
        self._ended: float | None = None

    @property
    def kind(self) -> str:
        return self.work.kind

    @property
    def spec(self):
        return self.work.spec

    # ---- read from any thread -------------------------------------------------------------------
    def snapshot(self) -> JobSnapshot:
        position = self._manager.position(self)
        with self._lock:
            every = max(1, math.ceil(len(self._losses) / LOSS_POINTS))
            losses = [
                sum(self._losses[i : i + every]) / len(self._losses[i : i + every])
                for i in range(0, len(self._losses), every)
            ]
            end = self._ended or time.monotonic()
            return JobSnapshot(
                id=self.id,
                kind=self.work.kind,
                spec=self.work.spec,
                status=self._status,
                message=self._message,
                done=self._done,
                total=self.work.total,
                step=self._step,
                losses=losses,
                loss_every=every,
                loss=self._losses[-1] if self._losses else None,
                position=position,
                result=self._result,
                seconds=0.0 if self._started is None else end - self._started,
            )

    @property
    def status(self) -> str:
        with self._lock:
            return self._status

    def cancel(self) -> None:
        """Stop the job: a queued one never starts, a running one stops after its current step."""
        self._cancel.set()
        self._manager._dequeue(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is done, failed or cancelled; False if timeout passed first."""
        return self._finished.wait(timeout)

    def owner_alive(self) -> bool:
        """False once the is_alive check says whoever started the job is gone."""
        if self._is_alive is None:
            return True
        try:
            return bool(self._is_alive())
        except Exception:  # a failing check must not stop work nobody asked to stop
            return True

    # ---- called by the manager and the worker thread ------------------------------------------
    def _set(self, **values) -> None:
        with self._lock:
            for key, value in values.items():
                setattr(self, f"_{key}", value)

    def _end(self, status: str, message: str) -> None:
        """Record how the job ended (not yet announced to wait())."""
        self._set(status=status, message=message, ended=time.monotonic())

    def _finish_unstarted(self, message: str) -> None:
        self._end(CANCELLED, message)
        self._finished.set()

    def _report(
        self,
        *,
        done: int | None = None,
        step: int | None = None,
        loss: float | None = None,
        message: str | None = None,
        new_curve: bool = False,
    ) -> None:
        with self._lock:
            if new_curve:
                self._losses = []
                self._step = 0
            if message is not None:
                self._message = message
            if done is not None:
                self._done = done
            if step is not None:
                self._step = step
            if loss is not None:
                self._losses.append(loss)

    def _should_stop(self) -> bool:
        if self._cancel.is_set():
            return True
        if getattr(self.work, "finishes_without_owner", False):
            return False  # its result is saved for everyone: see the module's docstring
        if not self.owner_alive():
            self._abandoned.set()
            return True
        return False

    def _run(self) -> None:
        self._set(started=time.monotonic())
        try:
            message = self.work.run(self._report, self._should_stop)
            status = DONE
        except Stopped as e:
            why = f"stopped ({OWNER_GONE})" if self._abandoned.is_set() else "cancelled"
            status, message = CANCELLED, f"{why} {e}"
        except JobFailed as e:
            status, message = FAILED, str(e)
        except Exception as e:  # the worker must report every failure, never die silently
            status, message = FAILED, f"{type(e).__name__}: {e}"
        self._set(result=self.work.result)
        self._end(status, message)
        # The slot is free before anyone waiting is told the job ended.
        self._manager._release(self)
        self._finished.set()


class JobManager:
    """Runs jobs of any kind in worker threads, at most max_jobs at once; later ones wait in one
    queue, up to max_queue of them. One manager per process, so the cap holds for everyone."""

    def __init__(self, max_jobs: int | None = None, max_queue: int | None = None):
        self.max_jobs = settings_max_jobs() if max_jobs is None else max_jobs
        self.max_queue = settings_max_queue() if max_queue is None else max_queue
        if self.max_jobs < 1 or self.max_queue < 0:
            raise ValueError("max_jobs must be >= 1 and max_queue >= 0")
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: list[Job] = []
        self._ids = itertools.count(1)
        self._draining = False

    def submit(self, work: Work, is_alive: Callable[[], bool] | None = None) -> Job:
        """Check the work and start it, or queue it if every slot is busy.

        is_alive, if given, is asked between steps (and while the job waits in the queue) whether
        whoever submitted it is still there; once it returns False the job stops (a training
        without saving). It is called from other threads, so it must be thread-safe and fast.

        Raises:
            ValueError: a setting is refused (the message says why), or the work claims what an
                active job holds (a model name being trained) or what exists (a saved model).
            QueueFull: every slot is busy and the queue is full.
        """
        gone: list[Job] = []
        try:
            with self._lock:
                gone = self._drop_abandoned()  # a closed tab's queued job frees its place now
                active = self._running + self._queue
                work.validate({j.work.claim for j in active if j.work.claim is not None})
                if self._draining:
                    raise Draining(
                        "this server is shutting down (an update or a restart) and takes no new "
                        "job; reload the page in a minute and start it again"
                    )
                if len(self._running) >= self.max_jobs and len(self._queue) >= self.max_queue:
                    raise QueueFull(
                        f"all {self.max_jobs} training slots are busy and {len(self._queue)} "
                        f"jobs are waiting already (training and experiment reruns share them); "
                        f"try again when one has finished",
                        slots=self.max_jobs,
                        waiting=len(self._queue),
                    )
                job = Job(next(self._ids), work, self, is_alive)
                self._queue.append(job)
                self._start_waiting()
                return job
        finally:
            self._finish_abandoned(gone)

    def drain(self, seconds: float) -> bool:
        """Shut down gently (a rolling update's SIGTERM): refuse new jobs from now on (Draining),
        end the queued ones unstarted, and wait up to `seconds` for the running ones to end, so
        a training that is nearly done still saves its model. True if every running job ended in
        time. A job still running then is cancelled and given a moment to stop at its next step
        (a model is only ever saved whole, so nothing half-written is left): the process must not
        exit under a thread inside torch, which aborts it instead of exiting 0."""
        with self._lock:
            self._draining = True
            queued, self._queue = self._queue, []
            running = list(self._running)
        for job in queued:
            job._finish_unstarted(f"never started: {SHUTTING_DOWN}")
        deadline = time.monotonic() + seconds
        finished = all(job.wait(max(0.0, deadline - time.monotonic())) for job in running)
        if not finished:
            for job in running:
                job.cancel()
            for job in running:
                job.wait(CUT_OFF_WAIT_S)
        return finished

    @property
    def draining(self) -> bool:
        return self._draining

    def position(self, job: Job) -> int | None:
        """1-based place of a queued job in the queue, else None."""
        with self._lock:
            gone = self._drop_abandoned()
            place = self._queue.index(job) + 1 if job in self._queue else None
        self._finish_abandoned(gone)
        return place

    def training(self, name: str) -> Job | None:
        """The queued or running training of model `name` in this process, if there is one (a
        reloaded page finds its job again by the name its address holds)."""
        with self._lock:
            for job in self._running + self._queue:
                if job.kind == "train" and job.work.spec.name == name:
                    return job
        return None

    def counts(self) -> tuple[int, int]:
        """(busy slots, queued jobs) right now, jobs of every kind."""
        with self._lock:
            gone = self._drop_abandoned()
            counts = len(self._running), len(self._queue)
        self._finish_abandoned(gone)
        return counts

    def _start_waiting(self) -> None:
        """Start queued jobs, first come first served, while slots are free; caller holds
        self._lock."""
        while self._queue and len(self._running) < self.max_jobs:
            job = self._queue.pop(0)
            self._running.append(job)
            job._set(status=RUNNING, message="starting")
            threading.Thread(
                target=job._run, name=f"tfviz-{job.kind}-{job.id}", daemon=True
            ).start()

    def _drop_abandoned(self) -> list[Job]:
        """Take queued jobs whose owner is gone out of the queue; caller holds self._lock."""
        gone = [j for j in self._queue if not j.owner_alive()]
        for job in gone:
            self._queue.remove(job)
        return gone

    @staticmethod
    def _finish_abandoned(gone: list[Job]) -> None:
        for job in gone:
            job._finish_unstarted(f"never started: {OWNER_GONE}")

    def _dequeue(self, job: Job) -> None:
        with self._lock:
            if job not in self._queue:
                return
            self._queue.remove(job)
        job._finish_unstarted("cancelled while waiting; never started")

    def _release(self, job: Job) -> None:
        """A job's thread ended: free its slot and start the next waiting job still wanted."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            gone = self._drop_abandoned()
            self._start_waiting()
        self._finish_abandoned(gone)
