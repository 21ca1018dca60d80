"""The speed page's measurements: one server-wide queue, run in one worker process.

(About 360 lines: the job, its caps and the queue are one mechanism; the process itself is
``job_worker``.)

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
from dataclasses import dataclass, field, replace

from specdec_core.bench import (
    BENCH_PROMPTS,
    BenchSummary,
    ForwardCurve,
    HFComparison,
    batch_sweep_point,
    compare_hf,
    gamma_sweep_point,
    hf_generate,
    ignoring_eos,
    measure_forward_curve,
    measure_pair,
    summarize,
)
from specdec_core.drafters import DRAFTER_NAMES
from specdec_core.errors import BusyError, InputError, SpecDecError
from specdec_core.models import PRESETS, ModelPair
from specdec_core.session import SessionConfig
from specdec_core.timeline import Timeline

from .job_worker import Worker, WorkerError  # noqa: F401 - WorkerError re-exported

log = logging.getLogger("specdec.jobs")
JOBS_ENV = "SPECDEC_MAX_JOBS"
WORKER_ENV = "SPECDEC_JOB_WORKER"  # "process" (default) or "thread"
MAX_TOKENS = 256
MAX_REPEATS = 7
MAX_WORK = 768  # repeats × tokens of one measurement (e.g. 3 × 256 or 7 × 109)
GAMMAS = range(1, 9)
BATCHES = (1, 2, 4, 8)
CURVE_REPEATS = 11  # the verify-cost curve: k = 1 … 2γ + 1 ≤ 17 forwards, 1 + 11 times each


def max_jobs() -> int:
    try:
        return max(1, int(os.environ.get(JOBS_ENV, 4)))
    except ValueError:
        return 4


@dataclass(frozen=True)
class Measurement:
    """What a finished "measure" job shows: the settings it ran with (``Job.params``),
    the bench summary, HF's runs next to ours (or HF's error), both texts, the verify-cost
    curve and the two runs' timelines (target-only, speculative)."""

    params: dict
    summary: BenchSummary
    hf: HFComparison
    hf_error: str | None
    texts: tuple[str, str]  # target-only, speculative
    curve: ForwardCurve | None = None
    timelines: tuple[Timeline, Timeline] | None = None


@dataclass
class Job:
    """One measurement: ``kind`` is ``measure``, ``gamma`` or ``batch``."""

    kind: str
    owner: str  # session id
    pair: ModelPair
    prompt: str
    n: int
    repeats: int
    ignore_eos: bool
    with_hf: bool
    config: SessionConfig
    drafter: str = "model"
    tasks: list[tuple] = field(default_factory=list)
    total: int = 0
    done: int = 0
    state: str = "queued"  # queued, running, done, cancelled, failed
    error: BaseException | None = None
    out: dict = field(default_factory=dict)
    points: list = field(default_factory=list)  # GammaPoint / BatchPoint, as they finish
    result: Measurement | None = None  # the "measure" summary

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled", "failed")

    def params(self) -> dict:
        return {
            "prompt": self.prompt, "n": self.n, "repeats": self.repeats,
            "ignore_eos": self.ignore_eos, "hf": self.with_hf, "config": self.config,
            "pair": self.pair.name, "device": self.pair.device_label(), "threads": None,
            "drafter": self.drafter,
        }  # fmt: skip


def check_work(n: object, repeats: object) -> tuple[int, int]:
    """Tokens and repeats as ints within the server's caps.

    Raises:
        InputError: ``bad_value`` or ``too_much_work``.
    """
    from .guards import whole_number

    n_ = whole_number(n, 1, MAX_TOKENS, "tokens")
    r_ = whole_number(repeats, 1, MAX_REPEATS, "repeats")
    if n_ * r_ > MAX_WORK:
        raise InputError(
            f"repeats × tokens = {n_ * r_} exceeds {MAX_WORK}",
            "too_much_work",
            work=n_ * r_,
            limit=MAX_WORK,
        )
    return n_, r_


def make_job(
    kind: str,
    owner: str,
    pair: ModelPair,
    prompt: str,
    n: object,
    repeats: object,
    ignore_eos: bool,
    with_hf: bool,
    config: SessionConfig,
    drafter: str = "model",
) -> Job:
    """A job of ``kind`` (``measure``: one pair of runs + the verify-cost curve + HF's runs
    when asked, greedy and the draft model only; ``gamma``: the γ sweep; ``batch``).

    Raises:
        InputError: bad tokens/repeats/drafter/kind, too much work.
    """
    n_, r_ = check_work(n, repeats)
    if drafter not in DRAFTER_NAMES:
        raise InputError(f"unknown drafter {drafter!r}", "bad_value", what="drafter", low=0,
                         high=0, value=str(drafter)[:20])  # fmt: skip
    cfg = replace(config, max_new_tokens=n_)
    hf = bool(with_hf) and cfg.temperature == 0.0 and drafter == "model"
    job = Job(kind, owner, pair, prompt, n_, r_, bool(ignore_eos), hf, cfg, drafter)
    if kind == "measure":
        hf_tasks = [("hf", False), ("hf", True)] if hf else []
        job.tasks = [("pair", cfg.gamma), ("curve", cfg.gamma)] + hf_tasks
    elif kind == "gamma":
        job.tasks = [("pair", g) for g in GAMMAS]
    elif kind == "batch":
        job.tasks = [("batch", b) for b in BATCHES]
    else:
        raise InputError(f"unknown measurement {kind!r}", "bad_value", what="kind", low=0,
                         high=0, value=str(kind)[:20])  # fmt: skip
    job.total = len(job.tasks)
    return job


def run_task(job: Job, task: tuple) -> None:
    """Run one task of ``job`` and store what it measured (engine calls only)."""
    timed = ignoring_eos(job.pair) if job.ignore_eos else job.pair
    name, arg = task
    if name == "pair":  # target-only and speculative, interleaved
        ar, sp = measure_pair(timed, job.prompt, replace(job.config, gamma=arg), job.repeats,
                              job.drafter)  # fmt: skip
        job.out["ar"], job.out[("sp", arg)] = ar, sp
        if job.kind == "gamma":
            job.points.append(gamma_sweep_point(ar, sp, arg))
    elif name == "curve":  # bounded: k ≤ 2γ + 1 ≤ 17, CURVE_REPEATS each
        job.out["curve"] = measure_forward_curve(
            job.pair, job.prompt, 2 * arg + 1, CURVE_REPEATS, job.drafter
        )
    elif name == "hf":
        try:
            job.out[("hf", arg)] = hf_generate(
                job.pair, job.prompt, job.config.gamma, job.n, job.repeats, arg,
                stop_at_eos=not job.ignore_eos,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - HF's own failure: report, keep ours
            job.out["hf_error"] = type(exc).__name__
    else:  # one point of the batch sweep: the engine's own function
        job.points.append(
            batch_sweep_point(job.pair, list(BENCH_PROMPTS[:arg]), job.config, job.repeats)
        )


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


def finish(job: Job) -> None:
    if job.kind == "measure":
        ar, sp = job.out["ar"], job.out[("sp", job.config.gamma)]
        curve = job.out.get("curve")
        lanes = (ar.timeline, sp.timeline)
        job.result = Measurement(
            params=job.params(),
            summary=summarize(ar, sp, job.config.gamma, curve),
            hf=compare_hf(ar, job.out.get(("hf", False)), job.out.get(("hf", True))),
            hf_error=job.out.get("hf_error"),
            texts=(ar.text, sp.text),
            curve=curve,
            timelines=lanes if lanes[0] is not None and lanes[1] is not None else None,
        )


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
