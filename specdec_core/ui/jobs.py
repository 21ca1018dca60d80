"""The speed page's measurements: one server-wide queue, run in one worker process.

The job itself (caps, tasks, results) is ``job_tasks``; the process is ``job_worker``.

A measurement is a :class:`Job` (a list of tasks; each task is a checkpoint for progress
and cancellation). Jobs from every session wait in one FIFO queue (``SPECDEC_MAX_JOBS``
queued or running at most, default 4; one per session) and run one at a time, so a class
that presses "Measure" together slows nobody's stepping by more than one job. A job is
cancelled by Stop, and also when its session ends (the tab closed): the queue's thread
checks the owner before every task (a task already running finishes, and its result is
dropped). The work per job is capped (repeats × tokens ≤ ``MAX_WORK``); CPU threads are
never changed here (set once at start, see ``loader``).

Where the tasks run: the queue's thread in the server only hands them to
:class:`~specdec_core.ui.job_worker.Worker`, a separate process at ``nice`` +10 that loads
the pair by its preset name, so the measurement's forwards never hold the server's GIL and
lose a contested core to the students' script threads. In this thread instead: a pair that is
not a named preset (a custom pair: the worker cannot load it by name), or every job when
``SPECDEC_JOB_WORKER=thread`` (e.g. a platform without processes).

No Streamlit widgets here: the page renders, this module decides.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque

from specdec_core.errors import BusyError, SpecDecError
from specdec_core.models import PRESETS

from .job_tasks import (  # noqa: F401 - the job's definition, re-exported for pages/tests
    BATCHES,
    CURVE_REPEATS,
    GAMMAS,
    MAX_REPEATS,
    MAX_TOKENS,
    MAX_WORK,
    Job,
    Measurement,
    check_work,
    finish,
    make_job,
    run_task,
)
from .job_worker import Worker, WorkerError  # noqa: F401 - WorkerError re-exported

log = logging.getLogger("specdec.jobs")
JOBS_ENV = "SPECDEC_MAX_JOBS"
WORKER_ENV = "SPECDEC_JOB_WORKER"  # "process" (default) or "thread"


def max_jobs() -> int:
    try:
        return max(1, int(os.environ.get(JOBS_ENV, 4)))
    except ValueError:
        return 4


def _in_process(pair_name: str) -> bool:
    return (
        os.environ.get(WORKER_ENV, "process").strip().lower() != "thread" and pair_name in PRESETS
    )


def in_process(job: Job) -> bool:
    """Whether ``job`` runs in the worker process (see the module docstring)."""
    return _in_process(job.pair.name)


def _fields(job: Job) -> dict:
    """What the worker needs of ``job`` besides its pair and task (all picklable)."""
    return {
        "kind": job.kind, "owner": job.owner, "prompt": job.prompt, "n": job.n,
        "repeats": job.repeats, "ignore_eos": job.ignore_eos, "with_hf": job.with_hf,
        "config": job.config, "drafter": job.drafter,
    }  # fmt: skip


def _session_alive(session_id: str) -> bool:
    """Whether the browser session that queued a job is still connected (always true
    outside a real server, e.g. in AppTest)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return True
        return Runtime.instance().is_active_session(session_id)
    except Exception:  # noqa: BLE001 - no runtime: nothing to check
        return True


class JobQueue:
    """FIFO of jobs from every session, taken one at a time by a daemon thread that runs
    their tasks in ``worker`` (a process) or, where it cannot, in itself."""

    def __init__(self, worker: Worker | None = None) -> None:
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._running: Job | None = None
        self._cancelled: set[int] = set()
        self._worker: threading.Thread | None = None
        self.alive = _session_alive
        self.process = worker if worker is not None else Worker()

    def start(self, pair_name: str = "embedded") -> None:
        """Start the worker process now and let it load ``pair_name`` (the speed page calls
        this when it opens, so the first "Measure" does not wait for the child's imports
        and load). Nothing happens where jobs of that pair would run in the thread."""
        if _in_process(pair_name):
            self.process.start(pair_name)

    def submit(self, job: Job) -> Job:
        """Queue ``job``. Raises :class:`BusyError` when the queue is full or the owner
        already has a job."""
        with self._lock:
            jobs = list(self._queue) + ([self._running] if self._running else [])
            if any(j.owner == job.owner for j in jobs):
                raise BusyError("this session already has a measurement", "job_running")
            if len(jobs) >= max_jobs():
                raise BusyError("the measurement queue is full", "busy", limit=max_jobs())
            self._queue.append(job)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="specdec-jobs",
                                                daemon=True)  # fmt: skip
                self._worker.start()
            self._lock.notify_all()
        return job

    def position(self, job: Job) -> int:
        """0 while running, k ≥ 1 while k-th in the queue, -1 when finished."""
        with self._lock:
            if job is self._running:
                return 0
            for k, queued in enumerate(self._queue, 1):
                if queued is job:
                    return k
        return -1

    def cancel(self, job: Job) -> None:
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)
                job.state = "cancelled"
            elif job is self._running:
                self._cancelled.add(id(job))

    def pending(self) -> int:
        with self._lock:
            return len(self._queue) + (1 if self._running else 0)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    if not self._lock.wait(timeout=60):
                        self._worker = None
                        return
                job = self._running = self._queue.popleft()
                job.state = "running"
            try:
                self._run(job)
            finally:
                with self._lock:
                    self._running = None
                    self._cancelled.discard(id(job))

    def _stopped(self, job: Job) -> bool:
        return id(job) in self._cancelled or not self.alive(job.owner)

    def _run(self, job: Job) -> None:
        remote = in_process(job)
        try:
            for task in list(job.tasks):
                if self._stopped(job):
                    job.state = "cancelled"
                    return
                if remote:
                    out, points = self.process.run(job.pair.name, _fields(job), task)
                    if self._stopped(job):  # cancelled while it ran: its result is dropped
                        job.state = "cancelled"
                        return
                    job.out.update(out)
                    job.points.extend(points)  # in place: the page holds this list
                else:
                    run_task(job, task)
                job.done += 1
            finish(job)
            job.state = "done"
        except SpecDecError as exc:
            job.error, job.state = exc, "failed"
        except Exception as exc:  # noqa: BLE001 - a bug: logged, shown as a generic message
            log.exception("measurement failed")
            job.error, job.state = exc, "failed"


QUEUE = JobQueue()
