"""Background jobs for the app: one queue and one cap for every kind of work.

Streamlit aborts work done in the script thread whenever the user touches a widget, so anything
that trains runs in a worker thread started here. The worker never calls Streamlit (this module
does not import it): it writes its progress into its Job under a lock, and the page polls
`Job.state()`. One JobManager serves the whole process, so its cap on concurrent jobs (one per
core) holds across every browser session and every kind of work; a job over the cap waits in one
first-come-first-served queue and can see its place in it. When the queue is full too, a new job
is refused (QueueFull, with its numbers), whatever its kind.

The manager knows nothing of what a job does. A job carries a `work` object (see `Work`); the
kinds are in tfviz.serve.work (training a model, retraining W_o alone, rerunning the experiment,
training a language model, sweeping an atlas cell in a process of its own) and tfviz.lessons.recipe
(a lesson's recipe): there is no other queue and no other cap. Every kind reports into the same
state shape (status, message, steps done of total, the loss curve, the result), so one progress
view fits all (the app's job panel, tfviz.ui.jobs.job_panel). A message is a
tfviz.messages.Message (a key and values), never a sentence: the app words it in the page's
language.

A job may carry `is_alive`, a check of whether whoever started it is still there (the app passes
"is this browser session still open?"). The manager asks it of queued jobs: once it says no, the
job never starts and its place goes to the next one. A running job whose result lives only in
its session (an experiment rerun, a W_o retraining, an atlas sweep) asks it between steps and
stops, freeing its slot: nobody would see the result. A running training is the exception: it
finishes and saves its model, which every session's picker lists, so a student who closed the tab
(or whose phone dropped the connection) finds the model on coming back; its slot frees when it
ends, as always.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from tfviz.messages import Message, Said, say
from tfviz.refusal import Refusal
from tfviz.settings import (
    max_jobs as settings_max_jobs,
)
from tfviz.settings import (
    max_queue as settings_max_queue,
)

LOSS_POINTS = 400  # points of the live loss curve a state carries
CUT_OFF_WAIT_S = 10  # a cancelled job stops at its next step: milliseconds, seconds at worst
# The time left is measured, never assumed: a step's cost depends on the model, the batch and how
# busy the server is (on a busy class server a run takes several times what it takes alone). The
# clock starts at the job's first reported step (so model building and the first, slow step are
# not counted) and the time left is said once this many steps and seconds have been timed, then
# updated as the run goes on.
ESTIMATE_AFTER_STEPS = 10
ESTIMATE_AFTER_S = 1.0

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = (DONE, FAILED, CANCELLED)


class QueueFull(Refusal, RuntimeError):
    """Every slot is busy and the waiting queue is full: a refusal the catalogue words
    ("jobs.queue_full") from `slots` and `waiting`, in the page's language; str() is the message
    given, for logs."""

    PREFIX = "jobs."
    CODE = "queue_full"

    def __init__(self, message: str, slots: int = 0, waiting: int = 0):
        super().__init__(self.CODE, slots=slots, waiting=waiting)
        self.args = (message,)
        self.slots, self.waiting = slots, waiting

    def __reduce__(self):  # pickled as it was made
        return type(self), (str(self), self.slots, self.waiting)


class Draining(QueueFull):
    """The server is shutting down (SIGTERM, as in a rolling update) and takes no new job; the
    running ones may finish (JobManager.drain). Worded by "jobs.draining"."""

    CODE = "draining"


class JobEnded(Said):
    """A job's work ended early; `message` says how, as a Message (str(): the English)."""


class Stopped(JobEnded):
    """Raised by Work.run when should_stop() said yes; the message says how far it got."""


class JobFailed(JobEnded):
    """Raised by Work.run for a failure the user can understand (a full disk, a name taken)."""


def limit_torch_threads(n: int = 1) -> None:
    """Let torch use n threads for its kernels, in this thread and every thread started later.

    torch keeps the count process-wide (threads that already ran torch code keep theirs), so it is
    set once, early, not inside each training thread. The models here are tiny, so one thread runs
    them fastest: more only contend with each other and with other requests. With one thread,
    each training job and each page request takes about one core, which the jobs cap assumes.
    """
    torch.set_num_threads(n)


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


def estimate_left(
    timed_from: tuple[float, int] | None,
    done: int,
    total: int,
    now: float,
    after_steps: int = ESTIMATE_AFTER_STEPS,
) -> float | None:
    """Seconds the job's remaining steps should take at the speed measured so far, or None
    before after_steps steps and ESTIMATE_AFTER_S seconds have been timed (a work whose steps are
    long, an atlas sweep's runs, says its own: Work.estimate_after).

    timed_from: (clock, steps done) at the first reported step; the speed is the steps done since
    then over the time since then, up to now, so a run that slows down (or stalls) is seen to.
    """
    if timed_from is None:
        return None
    start, done_then = timed_from
    timed, spent = done - done_then, now - start
    if timed < after_steps or spent < ESTIMATE_AFTER_S:
        return None
    return max(0, total - done) * spent / timed


def step_reporter(report: Report, should_stop: Callable[[], bool]) -> Callable[[Any], bool]:
    """An on_step callback for tfviz.training.train's loops (info.step, info.loss): each step of one
    training is the job's progress and a point of its loss curve; False once it should stop."""

    def on_step(info) -> bool:
        report(done=info.step, step=info.step, loss=info.loss)
        return not should_stop()

    return on_step


# ---- what a job does ---------------------------------------------------------------------------


class Report(Protocol):
    """How a worker tells its Job how far it is; every keyword is optional.

    done: training steps done over the whole job (the fraction is done / Work.total);
    step, loss: the step within the current loss curve and its loss, appended to that curve;
    message: what the job is doing now (a Message);
    new_curve: start a fresh loss curve (an experiment's next run).
    """

    def __call__(
        self,
        *,
        done: int | None = None,
        step: int | None = None,
        loss: float | None = None,
        message: Message | None = None,
        new_curve: bool = False,
    ) -> None: ...


class Work(Protocol):
    """One kind of job. The manager calls validate() on submit, then run() in a worker thread.

    validate(claimed) checks the settings and raises ValueError (tfviz.messages.Refused, whose
    message a student can act on); it runs under the manager's lock with the claims of every
    queued and running job, so two jobs can never hold the same claim (a training's model file).
    run(report, should_stop) does the work: it calls report(...) as it goes and should_stop()
    between steps, raises Stopped when that said yes, JobFailed with a message for the user, and
    returns a Message when done.
    It leaves what it produced in `result` (also when stopped, if part of it is worth keeping).

    Optional attributes: `finishes_without_owner` (True: a running job goes on when its session
    has gone; see the module's docstring) and `estimate_after` (steps timed before the time left
    is said; ESTIMATE_AFTER_STEPS if absent).
    """

    kind: str  # "train", "experiment", "atlas_sweep"...: names the worker thread
    spec: Any  # what was asked for, shown in states
    result: Any

    @property
    def total(self) -> int: ...  # training steps the whole job takes (valid after validate)

    @property
    def claim(self) -> Hashable | None: ...  # held by at most one active job (after validate)

    def validate(self, claimed: Collection[Hashable]) -> None: ...

    def run(self, report: Report, should_stop: Callable[[], bool]) -> Message: ...


# ---- jobs and the manager ----------------------------------------------------------------------


@dataclass(frozen=True)
class JobState:
    """A consistent copy of a job's progress, safe to read from any thread. One shape for every
    kind of work: `kind` and `spec` say what it is, `result` what it produced."""

    id: int
    kind: str  # the work's kind: "train", "experiment", "atlas_sweep"...
    spec: Any  # the work's spec (JobSpec, ExperimentSpec, SweepSpec, ...), one per kind of job
    status: str  # queued, running, done, failed, cancelled
    message: Message  # what is happening now, or how it ended
    done: int  # training steps done over the whole job
    total: int  # training steps the whole job takes
    step: int  # step within the current loss curve (a training; one run of an experiment)
    losses: list[float] = field(default_factory=list)  # current curve, averaged to <= LOSS_POINTS
    loss_every: int = 1  # steps per point of losses
    loss: float | None = None  # the last loss reported
    position: int | None = None  # 1-based place in the queue while queued
    result: Any = None  # TrainResult / ExperimentResult, once there is one
    seconds: float = 0.0  # since it started running
    seconds_left: float | None = None  # the remaining steps at the measured speed (estimate_left)

    @property
    def active(self) -> bool:
        return self.status not in FINAL

    @property
    def fraction(self) -> float:
        """Share of the job's training steps done, 0..1."""
        return min(1.0, self.done / self.total) if self.total else 0.0


class Job:
    """One piece of work in the manager's care. Its worker thread writes progress here; anyone
    may read its state, cancel it or wait for it."""

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
        self._message = say("waiting")
        self._done = 0
        self._step = 0
        self._losses: list[float] = []
        self._result: Any = None
        self._started: float | None = None
        self._ended: float | None = None
        self._timed_from: tuple[float, int] | None = None  # (clock, done) at the first step

    @property
    def kind(self) -> str:
        return self.work.kind

    @property
    def spec(self):
        return self.work.spec

    # ---- read from any thread -------------------------------------------------------------------
    def state(self) -> JobState:
        position = self._manager.position(self)
        with self._lock:
            every = max(1, math.ceil(len(self._losses) / LOSS_POINTS))
            losses = [
                sum(self._losses[i : i + every]) / len(self._losses[i : i + every])
                for i in range(0, len(self._losses), every)
            ]
            now = time.monotonic()
            end = self._ended or now
            after = getattr(self.work, "estimate_after", ESTIMATE_AFTER_STEPS)
            left = (
                estimate_left(self._timed_from, self._done, self.work.total, now, after)
                if self._status == RUNNING
                else None
            )
            return JobState(
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
                seconds_left=left,
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

    @property
    def watches_owner(self) -> bool:
        """Whether the job was handed an is_alive check of whoever started it."""
        return self._is_alive is not None

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

    def _end(self, status: str, message: Message) -> None:
        """Record how the job ended (not yet announced to wait())."""
        self._set(status=status, message=message, ended=time.monotonic())

    def _finish_unstarted(self, message: Message) -> None:
        self._end(CANCELLED, message)
        self._finished.set()

    def _report(
        self,
        *,
        done: int | None = None,
        step: int | None = None,
        loss: float | None = None,
        message: Message | None = None,
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
                if self._timed_from is None:
                    self._timed_from = (time.monotonic(), done)
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
            # Literal keys, so that a test can read every message said from the source.
            if self._abandoned.is_set():
                status, message = CANCELLED, say("abandoned", how_far=e.message)
            else:
                status, message = CANCELLED, say("cancelled", how_far=e.message)
        except JobFailed as e:
            status, message = FAILED, e.message
        except Exception as e:  # the worker must report every failure, never die silently
            status, message = FAILED, say("error", error=f"{type(e).__name__}: {e}")
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
                        f"jobs are waiting already (every kind of job shares them: trainings, "
                        f"reruns, sweeps); try again when one has finished",
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
            job._finish_unstarted(say("shutdown_waiting"))
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

    def jobs(self) -> list[Job]:
        """The running then the queued jobs right now, a copy (read-only view of the manager)."""
        with self._lock:
            return self._running + self._queue

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
            job._set(status=RUNNING, message=say("starting"))
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
            job._finish_unstarted(say("owner_gone_waiting"))

    def _dequeue(self, job: Job) -> None:
        with self._lock:
            if job not in self._queue:
                return
            self._queue.remove(job)
        job._finish_unstarted(say("cancelled_waiting"))

    def _release(self, job: Job) -> None:
        """A job's thread ended: free its slot and start the next waiting job still wanted."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            gone = self._drop_abandoned()
            self._start_waiting()
        self._finish_abandoned(gone)
