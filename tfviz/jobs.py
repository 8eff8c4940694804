"""Training jobs for the app: worker threads, a cap on how many run at once, a queue, cancel.

Streamlit aborts work done in the script thread whenever the user touches a widget, so training
runs in a worker thread started here. The worker never calls Streamlit (this module does not import
it): it writes its progress into its Job under a lock, and the page polls `Job.snapshot()`. One
JobManager serves the whole process, so its cap on concurrent jobs holds across every browser
session; a job over the cap waits in a queue and can see its place in it.

A job may carry `is_alive`, a check of whether whoever started it is still there (the app passes
"is this browser session still open?"). The worker asks it between steps, and a queued job before it
starts; once it says no, the job stops unsaved and its slot goes to the next job. Nobody would see
the result, and a closed tab must not hold one of the few training slots.

Uploaded checkpoints are held to the same size budget as trained ones (`MAX_PARAMS`), which
load_checkpoint checks against the config before any model is built (`load_upload`).
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from tfviz.checkpoint import (
    MAX_PARAMS,
    CheckpointMeta,
    load_checkpoint,
    safe_model_path,
    save_checkpoint,
)
from tfviz.config import ModelConfig
from tfviz.evaluate import evaluate
from tfviz.model import Encoder
from tfviz.tasks import get_task
from tfviz.trainer import StepInfo, resolve_device, train

MAX_STEPS = 20_000  # about ten minutes for a bundled-size model on one CPU core
MAX_SEED = 2**31 - 1
MIN_LR, MAX_LR = 1e-5, 1.0
# MAX_PARAMS (tfviz.checkpoint) also caps training: the largest model the Train form offers has
# about 2.1 M parameters; every bundled model is under 0.1 M.
DEFAULT_MAX_QUEUE = 8
EVAL_N = 1000  # fresh examples measured after training; stored in the checkpoint's metrics
LOSS_POINTS = 400  # points of the live loss curve a snapshot carries
USER_MODELS_ENV = "TFVIZ_USER_MODELS"
MAX_JOBS_ENV = "TFVIZ_MAX_JOBS"
MAX_QUEUE_ENV = "TFVIZ_MAX_QUEUE"

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = (DONE, FAILED, CANCELLED)
OWNER_GONE = "the browser session that started it has closed"


class QueueFull(RuntimeError):
    """The job cap is reached and the waiting queue is full; the message says so."""


def limit_torch_threads(n: int = 1) -> None:
    """Let torch use n threads for its kernels, in this thread and every thread started later.

    torch keeps the count process-wide (threads that already ran torch code keep theirs), so it is
    set once, early, not inside each training thread. The models here are tiny, so one thread runs
    them fastest: more only contend with each other and with other requests. With one thread,
    each training job and each page request takes about one core, which the jobs cap assumes.
    """
    torch.set_num_threads(n)


def user_models_dir(root: Path) -> Path:
    """Where models trained in the app are saved: $TFVIZ_USER_MODELS, else root/user_models."""
    return Path(os.environ.get(USER_MODELS_ENV) or root / "user_models")


def default_max_jobs() -> int:
    """Jobs allowed to run at once: $TFVIZ_MAX_JOBS, else one per CPU core this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return _env_int(MAX_JOBS_ENV, cores or 1, minimum=1)


def default_max_queue() -> int:
    """Jobs allowed to wait for a free slot: $TFVIZ_MAX_QUEUE, else 8."""
    return _env_int(MAX_QUEUE_ENV, DEFAULT_MAX_QUEUE, minimum=0)


def _env_int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {raw!r}")
    return value


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


@dataclass(frozen=True)
class JobSpec:
    """What to train: task, sizes and training settings, and the name to save it under."""

    task: str
    name: str
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    steps: int = 1000
    lr: float = 3e-3
    seed: int = 0
    w_o: str = "learned"  # "learned", or "identity": train with no W_o at all
    batch_size: int = 128

    def model_config(self) -> ModelConfig:
        """The model config, or ValueError with a message a student can act on."""
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
        config = get_task(self.task).model_config(
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=0.0,  # as the bundled models: tiny models on endless fresh data need none
        )
        check_size(config)
        return config


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job's progress, safe to read from any thread."""

    id: int
    spec: JobSpec
    status: str  # queued, running, done, failed, cancelled
    step: int
    losses: list[float] = field(default_factory=list)  # averaged down to <= LOSS_POINTS
    loss_every: int = 1  # steps per point of losses
    position: int | None = None  # 1-based place in the queue while queued
    message: str = ""  # what is happening now, or why it failed
    path: str | None = None  # where the model is (or will be) saved
    metrics: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def active(self) -> bool:
        return self.status not in FINAL


class Job:
    """One training run. Its worker thread writes progress here; anyone may read a snapshot."""

    def __init__(
        self,
        job_id: int,
        spec: JobSpec,
        config: ModelConfig,
        path: Path,
        manager,
        is_alive: Callable[[], bool] | None = None,
    ):
        self.id = job_id
        self.spec = spec
        self.config = config
        self.path = path
        self._manager = manager
        self._is_alive = is_alive
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._cancel = threading.Event()
        self._abandoned = threading.Event()  # stopped because its owner went away
        self._status = QUEUED
        self._step = 0
        self._losses: list[float] = []
        self._message = "waiting for a free slot"
        self._metrics: dict = {}
        self._started: float | None = None
        self._ended: float | None = None

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
                spec=self.spec,
                status=self._status,
                step=self._step,
                losses=losses,
                loss_every=every,
                position=position,
                message=self._message,
                path=str(self.path),
                metrics=dict(self._metrics),
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

    # ---- called by the manager and the worker thread ------------------------------------------
    def _set(self, **values) -> None:
        with self._lock:
            for key, value in values.items():
                setattr(self, f"_{key}", value)

    def _finish(self, status: str, message: str) -> None:
        self._set(status=status, message=message, ended=time.monotonic())
        self._finished.set()

    def owner_alive(self) -> bool:
        """False once the is_alive check says whoever started the job is gone."""
        if self._is_alive is None:
            return True
        try:
            return bool(self._is_alive())
        except Exception:  # a failing check must not kill a training nobody asked to stop
            return True

    def _on_step(self, info: StepInfo) -> bool:
        with self._lock:
            self._step = info.step
            self._losses.append(info.loss)
        if self._cancel.is_set():
            return False
        if not self.owner_alive():
            self._abandoned.set()
            return False
        return True

    def _run(self, device: str) -> None:
        spec = self.spec
        try:
            self._set(status=RUNNING, message="training", started=time.monotonic())
            model, history = train(
                spec.task,
                self.config,
                steps=spec.steps,
                batch_size=spec.batch_size,
                lr=spec.lr,
                seed=spec.seed,
                device=device,
                w_o=spec.w_o,
                on_step=self._on_step,
            )
            if history["cancelled"]:
                done = history["steps_done"]
                if self._abandoned.is_set():
                    self._finish(CANCELLED, f"stopped after {done} steps: {OWNER_GONE}; not saved")
                else:
                    self._finish(CANCELLED, f"cancelled after {done} steps; not saved")
                return
            self._set(message=f"measuring accuracy on {EVAL_N} fresh examples")
            metrics = evaluate(model, spec.task, n=EVAL_N)
            if self.path.exists():
                self._finish(
                    FAILED,
                    f"a model named {self.path.stem!r} appeared while this one trained; it was "
                    f"kept as it is and this one was not saved",
                )
                return
            history["name"] = spec.name
            try:
                save_checkpoint(self.path, model, spec.task, history, metrics)
            except OSError as e:  # disk full, folder made read-only... (written atomically)
                self._finish(
                    FAILED,
                    f"trained, but saving {self.path.name} failed ({e.strerror or e}); "
                    f"nothing was written and every saved model is as it was",
                )
                return
            self._set(metrics=metrics)
            self._finish(DONE, f"saved as {self.path.name}")
        except Exception as e:  # the worker must report every failure, never die silently
            self._finish(FAILED, f"{type(e).__name__}: {e}")
        finally:
            self._manager._release(self)


class JobManager:
    """Starts jobs in worker threads, at most max_jobs at once; later ones wait in a queue."""

    def __init__(
        self, max_jobs: int | None = None, max_queue: int | None = None, device: str = "auto"
    ):
        self.max_jobs = default_max_jobs() if max_jobs is None else max_jobs
        self.max_queue = default_max_queue() if max_queue is None else max_queue
        if self.max_jobs < 1 or self.max_queue < 0:
            raise ValueError("max_jobs must be >= 1 and max_queue >= 0")
        self.device = str(resolve_device(device))
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: list[Job] = []
        self._borrowed = 0  # slots lent to other CPU-bound work (experiment reruns)
        self._ids = itertools.count(1)

    def submit(
        self,
        spec: JobSpec,
        folder: Path,
        reserved: frozenset[str] = frozenset(),
        is_alive: Callable[[], bool] | None = None,
    ) -> Job:
        """Check a spec, claim its file name and start it (or queue it).

        is_alive, if given, is asked between training steps (and before a queued job starts)
        whether whoever submitted the job is still there; once it returns False the job stops
        without saving. It is called from the worker thread, so it must be thread-safe and fast.

        Raises:
            ValueError: a setting or the model name is refused (the message says why), or a model
                of that name exists or is being trained.
            QueueFull: every slot is busy and the queue is full.
        """
        config = spec.model_config()
        path = safe_model_path(folder, spec.name, reserved=reserved)
        spec = replace(spec, name=path.stem)
        with self._lock:
            gone = self._drop_abandoned()  # a closed tab's queued job frees its place now
            if path.exists() or any(j.path == path for j in self._running + self._queue):
                self._finish_abandoned(gone)
                raise ValueError(
                    f"a model named {path.stem!r} already exists or is being trained; "
                    f"choose another name"
                )
            if self._busy() >= self.max_jobs and len(self._queue) >= self.max_queue:
                self._finish_abandoned(gone)
                raise QueueFull(
                    f"all {self.max_jobs} training slots are busy and {len(self._queue)} jobs "
                    f"are waiting already; try again when one has finished"
                )
            job = Job(next(self._ids), spec, config, path, self, is_alive=is_alive)
            if self._busy() < self.max_jobs:
                self._start(job)
            else:
                self._queue.append(job)
        self._finish_abandoned(gone)
        return job

    def position(self, job: Job) -> int | None:
        """1-based place of a queued job in the queue, else None."""
        with self._lock:
            gone = self._drop_abandoned()
            place = self._queue.index(job) + 1 if job in self._queue else None
        self._finish_abandoned(gone)
        return place

    def counts(self) -> tuple[int, int]:
        """(busy slots, queued jobs) right now; lent slots count as busy."""
        with self._lock:
            gone = self._drop_abandoned()
            counts = self._busy(), len(self._queue)
        self._finish_abandoned(gone)
        return counts

    def borrow_slot(self) -> bool:
        """Take one slot for other CPU-bound work if one is free now (no queueing); True if taken.

        Experiment reruns train too: sharing the cap keeps all training on the server to
        max_jobs cores, however it was started. Give the slot back with return_slot().
        """
        with self._lock:
            if self._busy() >= self.max_jobs or self._queue:
                return False
            self._borrowed += 1
            return True

    def return_slot(self) -> None:
        """Give back a borrowed slot; the next waiting training job may start in it."""
        with self._lock:
            self._borrowed = max(0, self._borrowed - 1)
            gone = self._drop_abandoned()
            self._start_waiting()
        self._finish_abandoned(gone)

    def _busy(self) -> int:
        """Slots in use; caller holds self._lock."""
        return len(self._running) + self._borrowed

    def _start_waiting(self) -> None:
        """Start queued jobs while slots are free; caller holds self._lock."""
        while self._queue and self._busy() < self.max_jobs:
            self._start(self._queue.pop(0))

    def _drop_abandoned(self) -> list[Job]:
        """Take queued jobs whose owner is gone out of the queue; caller holds self._lock."""
        gone = [j for j in self._queue if not j.owner_alive()]
        for job in gone:
            self._queue.remove(job)
        return gone

    @staticmethod
    def _finish_abandoned(gone: list[Job]) -> None:
        for job in gone:
            job._finish(CANCELLED, f"never started: {OWNER_GONE}")

    def _start(self, job: Job) -> None:
        """Run job in a new thread; caller holds self._lock."""
        self._running.append(job)
        job._set(status=RUNNING, message="starting")
        thread = threading.Thread(
            target=job._run, args=(self.device,), name=f"tfviz-train-{job.id}", daemon=True
        )
        thread.start()

    def _dequeue(self, job: Job) -> None:
        with self._lock:
            if job not in self._queue:
                return
            self._queue.remove(job)
        job._finish(CANCELLED, "cancelled while waiting; never started")

    def _release(self, job: Job) -> None:
        """A job's thread ended: free its slot and start the next waiting job still wanted."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            gone = self._drop_abandoned()
            self._start_waiting()
        self._finish_abandoned(gone)
