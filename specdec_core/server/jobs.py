"""The speed page's measurements: one server-wide queue, run in one worker process.

The job itself (caps, tasks, results) is ``server/tasks.py``; the process is ``server/worker.py``.

A measurement is a :class:`Job` (a list of tasks; each task is a checkpoint for progress
and cancellation). Jobs from every session wait in one FIFO queue (``SPECDEC_MAX_JOBS``
queued or running at most, default 4) and run one at a time, so a class that presses
"Measure" together slows nobody's stepping by more than one job.

Places: one job per session and one per **client** -- the browser's address
(``ui/speed/queue.client_of``: the websocket's peer, or the ``X-Real-IP`` nginx sets when
the peer is a trusted proxy, ``SPECDEC_TRUSTED_PROXIES``, default loopback; a session with no known
address, e.g. a test, is its own client) -- so six tabs of one student hold one place.
The last place is the **teacher's**: clients whose address is in ``SPECDEC_TEACHER_ADDRS``
(default ``127.0.0.1,::1``: the machine that runs the server) may take any place, every
other client's jobs together hold at most ``places() - 1`` (``places()``:
``SPECDEC_MAX_JOBS``, at least 2). So however many students queue, a teacher with no job
of their own always finds a free place. A class behind one NAT address is one client: one
student's job at a time (plus the teacher's). A job is
cancelled by Stop, and also when its session ends (the tab closed): the queue's thread
checks the owner before every task (a task already running finishes, and its result is
dropped). The work per job is capped (repeats × tokens ≤ ``MAX_WORK``); CPU threads are
never changed here (set once at start, see ``loader``).

Where the tasks run: the queue's thread in the server only hands them to
:class:`~specdec_core.server.worker.Worker`, a separate process at ``nice`` +10 that loads
the pair by its preset name, so the measurement's forwards never hold the server's GIL and
lose a contested core to the students' script threads. In this thread instead: a pair that is
not a named preset (a custom pair: the worker cannot load it by name), or every job when
``SPECDEC_JOB_WORKER=thread`` (e.g. a platform without processes).

No Streamlit widgets here: the page renders, this module decides.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from specdec_core.bench.bounded import Budget, Clock
from specdec_core.core.errors import BusyError, SpecDecError
from specdec_core.core.models import PRESETS
from specdec_core.server.tasks import (
    Job,
    finish,
    run_task,
)
from specdec_core.server.worker import Worker

log = logging.getLogger("specdec.jobs")
JOBS_ENV = "SPECDEC_MAX_JOBS"
WORKER_ENV = "SPECDEC_JOB_WORKER"  # "process" (default) or "thread"
TEACHER_ENV = "SPECDEC_TEACHER_ADDRS"  # comma-separated addresses, default loopback
PROXIES_ENV = "SPECDEC_TRUSTED_PROXIES"  # peers whose X-Real-IP is believed, default loopback
LOOPBACK = "127.0.0.1,::1"


def max_jobs() -> int:
    try:
        return max(1, int(os.environ.get(JOBS_ENV, 4)))
    except ValueError:
        return 4


def _addresses(env: str) -> frozenset[str]:
    """The valid IP addresses listed in ``env`` (default loopback), normalised."""
    return frozenset(filter(None, map(_ip, os.environ.get(env, LOOPBACK).split(","))))


def _ip(text: object) -> str | None:
    """``text`` as a normalised IP address (an IPv4-mapped IPv6 address as IPv4), or None
    when it is not one (bounded: a header is untrusted input)."""
    try:
        ip = ipaddress.ip_address(str(text).strip()[:64])
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def client_key(peer: str | None, headers: Mapping[str, str], session_id: str) -> str:
    """Who a session is, for the queue's places: ``addr:<ip>`` -- the peer's address, or
    the ``X-Real-IP`` header when the peer is a trusted proxy (``SPECDEC_TRUSTED_PROXIES``,
    default loopback: nginx on this machine sets it, a client's own copy is replaced) -- or
    ``session:<id>`` when the session has no address (no browser connection: a test, a
    script run without a server).

    ``peer``: the websocket's remote address (``None`` is treated as loopback, as Streamlit
    reports a loopback peer); ``headers``: the websocket request's headers."""
    if peer is None and not headers:
        return f"session:{session_id}"
    address = _ip(peer) if peer is not None else "127.0.0.1"
    if address is None:
        return f"session:{session_id}"
    if address in _addresses(PROXIES_ENV):
        real = next((v for k, v in headers.items() if k.lower() == "x-real-ip"), None)
        if real is not None:
            address = _ip(real) or address
    return f"addr:{address}"


def is_teacher(client: str) -> bool:
    """Whether ``client`` (a :func:`client_key`) is one of ``SPECDEC_TEACHER_ADDRS``."""
    return client.startswith("addr:") and client[5:] in _addresses(TEACHER_ENV)


def places() -> int:
    """Jobs queued or running at most: ``SPECDEC_MAX_JOBS``, at least 2 (the teacher's
    place and one more)."""
    return max(2, max_jobs())


def student_places() -> int:
    """Places a client that is not the teacher may take: all but the teacher's."""
    return places() - 1


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
        "kind": job.kind,
        "owner": job.owner,
        "prompt": job.prompt,
        "n": job.n,
        "repeats": job.repeats,
        "ignore_eos": job.ignore_eos,
        "with_hf": job.with_hf,
        "config": job.config,
        "drafter": job.drafter,
        "budget_s": job.budget_s,
        "extra": job.extra,
    }


class JobQueue:
    """FIFO of jobs from every session, taken one at a time by a daemon thread that runs
    their tasks in ``worker`` (a process) or, where it cannot, in itself."""

    def __init__(self, worker: Worker | None = None, clock: Clock = time.monotonic) -> None:
        self.clock = clock  # a job's budget_s is counted on it from its first task
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._running: Job | None = None
        self._cancelled: set[int] = set()
        self._clients: dict[int, str] = {}  # id(job) → its client_key, while queued/running
        self._worker: threading.Thread | None = None
        # Hooks the page installs (``ui/speed/queue.py``), so the server never imports
        # Streamlit: is a session still connected; the client (address) of a session.
        self.alive: Callable[[str], bool] = lambda _session_id: True
        self.client_of: Callable[[str], str] = lambda session_id: f"session:{session_id}"
        self.process = worker if worker is not None else Worker()

    def start(self, pair_name: str = "embedded") -> None:
        """Start the worker process now and let it load ``pair_name`` (the speed page calls
        this when it opens, so the first "Measure" does not wait for the child's imports
        and load). Nothing happens where jobs of that pair would run in the thread."""
        if _in_process(pair_name):
            self.process.start(pair_name)

    def submit(self, job: Job, client: str | None = None) -> Job:
        """Queue ``job`` for ``client`` (a :func:`client_key`; default: ``self.client_of``
        of the job's session). Raises :class:`BusyError`: ``job_running`` when the session
        already has a job, ``client_has_job`` when its client (address) has one,
        ``busy_reserved`` when every place but the teacher's is taken and the client is not
        the teacher, ``busy`` when every place is taken."""
        client = client if client is not None else self.client_of(job.owner)
        with self._lock:
            jobs = list(self._queue) + ([self._running] if self._running else [])
            if any(j.owner == job.owner for j in jobs):
                raise BusyError("this session already has a measurement", "job_running")
            if any(self._clients.get(id(j)) == client for j in jobs):
                raise BusyError("this client already has a measurement", "client_has_job")
            if len(jobs) >= places():
                raise BusyError("the measurement queue is full", "busy", limit=places())
            students = sum(not is_teacher(self._clients.get(id(j), "")) for j in jobs)
            if not is_teacher(client) and students >= student_places():
                raise BusyError(
                    "every student place in the measurement queue is taken",
                    "busy_reserved",
                    limit=student_places(),
                )
            self._clients[id(job)] = client
            self._queue.append(job)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="specdec-jobs", daemon=True)
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
                self._clients.pop(id(job), None)
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
                    self._clients.pop(id(job), None)

    def _stopped(self, job: Job) -> bool:
        return id(job) in self._cancelled or not self.alive(job.owner)

    def _run(self, job: Job) -> None:
        """Run ``job``'s tasks in order; before each: stop if cancelled, and end early
        (``job.partial``) once its ``budget_s`` does not allow another task
        (:class:`~specdec_core.bench.bounded.Budget`; the first two tasks -- a warm-up and
        one timed pass -- always run)."""
        remote = in_process(job)
        budget = Budget(job.budget_s, self.clock)
        budget.start()
        job.started = budget.started
        try:
            for task in list(job.tasks):
                if self._stopped(job):
                    job.state = "cancelled"
                    return
                if job.done >= 2 and not budget.allows(job.done):
                    job.partial = True
                    break
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
