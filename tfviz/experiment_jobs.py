"""The W_o on/off experiment as a background job for the app: worker thread, progress, cancel.

Streamlit aborts work done in the script thread whenever the user touches a widget, so a rerun of
tfviz.experiment runs in a worker thread started here, as training does in tfviz.jobs. The worker
never calls Streamlit (this module does not import it): it writes its progress into its
ExperimentJob under a lock, and the page polls `snapshot()`. Each rerun runs in a slot borrowed
from the training JobManager, so training and reruns together never take more than its cap.
The result stays in memory (the caller keeps it in its session); nothing is written to disk, so
the shipped results in models/experiments/ are never overwritten.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

from tfviz import experiment
from tfviz.jobs import JobManager
from tfviz.tasks import get_task

MAX_SEEDS = 5  # per condition; the shipped results use 5
MAX_STEPS = 2000  # per run; 2 * 5 runs of 2,000 steps take a few minutes on one core

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = (DONE, FAILED, CANCELLED)


class RunnerBusy(RuntimeError):
    """Every experiment slot is taken; the message says so."""


@dataclass(frozen=True)
class ExperimentSpec:
    """What to rerun: the task, how many seeds per condition and how many steps per run."""

    task: str
    seeds: int = 2
    steps: int = 200

    def check(self) -> None:
        """ValueError with a message a student can act on, for settings out of range."""
        get_task(self.task)  # names the known tasks if unknown
        if not isinstance(self.seeds, int) or not 1 <= self.seeds <= MAX_SEEDS:
            raise ValueError(
                f"seeds must be a whole number from 1 to {MAX_SEEDS}, got {self.seeds!r}"
            )
        if not isinstance(self.steps, int) or not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(
                f"steps must be a whole number from 1 to {MAX_STEPS:,}, got {self.steps!r}"
            )

    @property
    def runs(self) -> int:
        return self.seeds * len(experiment.CONDITIONS)


@dataclass(frozen=True)
class ExperimentSnapshot:
    """A consistent copy of an experiment job's state, safe to read from any thread."""

    id: int
    spec: ExperimentSpec
    status: str  # running, done, failed, cancelled
    run: int  # 1-based index of the run in progress (0 before the first step)
    condition: str  # of the run in progress
    seed: int
    step: int  # within the run in progress
    loss: float | None  # last training loss seen
    message: str
    result: experiment.ExperimentResult | None  # when done (or cancelled with finished runs)
    seconds: float

    @property
    def active(self) -> bool:
        return self.status not in FINAL

    @property
    def fraction(self) -> float:
        """Share of all training steps done, 0..1."""
        total = self.spec.runs * self.spec.steps
        done = max(0, self.run - 1) * self.spec.steps + self.step
        return min(1.0, done / total) if total else 1.0


class ExperimentJob:
    """One rerun of the experiment. Its worker thread writes progress; anyone reads snapshots."""

    def __init__(self, job_id: int, spec: ExperimentSpec, device: str, on_end=None):
        self.id = job_id
        self.spec = spec
        self.device = device
        self._on_end = on_end
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._status = RUNNING
        self._progress: experiment.Progress | None = None
        self._message = "starting"
        self._result: experiment.ExperimentResult | None = None
        self._started = time.monotonic()
        self._ended: float | None = None

    def snapshot(self) -> ExperimentSnapshot:
        with self._lock:
            p = self._progress
            return ExperimentSnapshot(
                id=self.id,
                spec=self.spec,
                status=self._status,
                run=p.run if p else 0,
                condition=p.condition if p else experiment.CONDITIONS[0],
                seed=p.seed if p else 0,
                step=p.step if p else 0,
                loss=p.loss if p else None,
                message=self._message,
                result=self._result,
                seconds=(self._ended or time.monotonic()) - self._started,
            )

    def cancel(self) -> None:
        """Stop after the current training step; runs already finished are kept."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job has ended; False if timeout passed first."""
        return self._finished.wait(timeout)

    def _set(self, **values) -> None:
        with self._lock:
            for key, value in values.items():
                setattr(self, f"_{key}", value)

    def _on_progress(self, progress: experiment.Progress) -> bool:
        with self._lock:
            self._progress = progress
            if progress.step == 1:
                label = experiment.LABELS[progress.condition]
                self._message = (
                    f"run {progress.run} of {progress.runs}: seed {progress.seed}, {label}"
                )
        return not self._cancel.is_set()

    def _run(self) -> None:
        spec = self.spec
        try:
            result = experiment.run_experiment(
                spec.task,
                seeds=spec.seeds,
                steps=spec.steps,
                device=self.device,
                on_progress=self._on_progress,
            )
            if result.cancelled:
                done = len(result.runs)
                status, message = CANCELLED, f"cancelled; {done} finished runs kept"
            else:
                status, message = DONE, f"{len(result.runs)} runs finished"
            self._set(result=result, status=status, message=message, ended=time.monotonic())
        except Exception as e:  # the worker must report every failure, never die silently
            self._set(status=FAILED, message=f"{type(e).__name__}: {e}", ended=time.monotonic())
        finally:
            if self._on_end is not None:
                self._on_end(self)  # free the slot before anyone waiting is told it ended
            self._finished.set()


class ExperimentRunner:
    """Starts experiment reruns in worker threads, each in a slot borrowed from the training
    JobManager: reruns train too, so together with training jobs they use at most its max_jobs
    cores. A rerun does not queue; when no slot is free it is refused with a message."""

    def __init__(self, slots: JobManager, device: str = "cpu"):
        self.slots = slots
        self.device = device  # "cpu" keeps reruns comparable with the shipped results
        self._ids = itertools.count(1)

    def submit(self, spec: ExperimentSpec) -> ExperimentJob:
        """Check the spec and start it.

        Raises:
            ValueError: a setting is out of range (the message says which and what is allowed).
            RunnerBusy: every slot of the training JobManager is busy.
        """
        spec.check()
        if not self.slots.borrow_slot():
            busy, queued = self.slots.counts()
            raise RunnerBusy(
                f"all {self.slots.max_jobs} training slots of this server are busy ({busy} in use, "
                f"{queued} waiting; training and experiment reruns share them); try again later"
            )
        job = ExperimentJob(next(self._ids), spec, self.device, on_end=self._release)
        threading.Thread(target=job._run, name=f"tfviz-experiment-{job.id}", daemon=True).start()
        return job

    def _release(self, job: ExperimentJob) -> None:
        self.slots.return_slot()
