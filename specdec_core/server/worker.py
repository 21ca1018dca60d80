"""The speed page's measurement worker: one separate process, at lower CPU priority.

Streamlit runs every student's script in a thread of the server process. A measurement run
in another thread of that process competes with them for the GIL (a small GPT-2's forward
is mostly Python) as well as for the cores; run here, in a child process, it competes only
for the cores, and at ``nice`` +10 the kernel gives a student's thread about nine times the
worker's CPU share whenever both want the same core (CFS weights 1024 : 110), while an idle
server still gives the worker whole cores (nice +19, weight 15, would starve a measurement
on a busy server and make its timings meaningless).

The child is a fresh interpreter, started (lazily on the first task, or by
:meth:`Worker.start`) the way ``multiprocessing``'s "spawn" starts one -- fork + exec, so
nothing of the threaded server is copied -- but with ``subprocess`` and a
``multiprocessing.connection`` pipe rather than ``multiprocessing.Process``: "spawn"
replays the parent's ``__main__`` in the child, and in a Streamlit server ``__main__`` is
the fake module of the app script (``app.py`` would run in the worker). The child lives on:
it loads the pair itself by preset name through the server's allow-list
(:func:`specdec_core.server.pairs.get_pair`) and keeps it across jobs; its torch threads are
the server's (sent at start). One task at a time travels over the pipe: (pair name, the
job's picklable fields, the task) out; ``run_task``'s ``job.out`` entries and ``job.points``
additions back. A child that dies or overruns :data:`TASK_TIMEOUT_S` fails the task with
:class:`WorkerError` and the next task starts a fresh one; the child leaves when the
server does (its pipe closes, or its parent changes). Every wait here is bounded.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

from specdec_core.core.errors import SpecDecError

log = logging.getLogger("specdec.jobs")
WORKER_NICE = 10  # CFS weight 110 against a student's 1024: see the module docstring
TASK_TIMEOUT_S = 900.0  # one task (the pair's first load included) never takes this long
POLL_S = 0.2  # how often a waiting task checks that the child is alive
JOIN_S = 5.0  # how long a stopped child is given to go
ROOT = Path(__file__).resolve().parents[2]  # the folder that holds specdec_core
_ENTRY = "from specdec_core.server.worker import main; main()"


class WorkerError(SpecDecError, RuntimeError):
    """The measurement worker process stopped (killed, crashed) or overran its time; the
    job failed, the next one starts a new worker. Code ``job_worker``: the page shows
    ``err_job_worker``."""

    default_code = "unexpected"


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to pickle: send a plain copy
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _orphan_watch(parent: int) -> None:
    """Leave as soon as the server is gone, even in the middle of a task."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main() -> None:
    """The worker process (``argv``: pipe fd, torch threads, nice, the server's pid): run
    tasks from the pipe until it closes."""
    fd, threads, nice, parent = (int(a) for a in sys.argv[1:5])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's; it stops us
    try:
        os.nice(nice)  # first: every thread started later (torch's too) inherits it
    except OSError:  # not allowed here: run at the server's priority
        pass
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    from specdec_core.server import pairs as loader
    from specdec_core.server import tasks as job_tasks

    conn = Connection(fd)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        op, name, fields, task = msg
        try:
            pair = loader.get_pair(name)
            if op == "load":  # warm-up: no reply (a failed load is reported by the task)
                continue
            job = job_tasks.Job(pair=pair, **fields)
            job_tasks.run_task(job, task)
            reply: tuple = ("ok", job.out, job.points)
        except Exception as exc:  # noqa: BLE001 - sent to the parent, which reports it
            if op == "load":
                continue
            reply = ("error", _portable(exc), traceback.format_exc())
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send(("error", RuntimeError(f"result not picklable: {exc}"), ""))
        except OSError:  # the server is gone
            return


class Worker:
    """The server's handle on the worker process. :meth:`run` is called by one thread at a
    time (the queue's); :meth:`start` and :meth:`stop` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self.busy = False  # a task is in the child
        self.tasks_run = 0  # tasks the child finished (tests, logs)
        self.starts = 0  # children started so far

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def _ensure(self) -> None:  # with self._lock held
        if self.alive():
            return
        self._discard()
        import torch

        parent, child = Pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        argv = [
            sys.executable,
            "-c",
            _ENTRY,
            str(child.fileno()),
            str(torch.get_num_threads()),
            str(WORKER_NICE),
            str(os.getpid()),
        ]
        try:
            proc = subprocess.Popen(
                argv, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, env=env
            )
        finally:
            child.close()  # the child has its own copy: EOF reaches us when it dies
        self._proc, self._conn = proc, parent
        self.starts += 1
        log.info("measurement worker started (pid %s, nice +%s)", proc.pid, WORKER_NICE)

    def start(self, pair_name: str | None = None) -> None:
        """Start the child now (e.g. from a warm-up) and let it load ``pair_name``."""
        with self._lock:
            self._ensure()
            if pair_name is not None:
                self._conn.send(("load", pair_name, None, None))  # type: ignore[union-attr]

    def run(self, pair_name: str, fields: dict, task: tuple) -> tuple[dict, list]:
        """Run ``task`` of the job described by ``fields`` in the child.

        Returns:
            ``(out, points)``: what ``run_task`` stored in ``job.out`` / added to
            ``job.points``.

        Raises:
            WorkerError: the child died or overran :data:`TASK_TIMEOUT_S` (it is stopped).
            whatever ``run_task`` raised in the child (a copy).
        """
        with self._lock:
            self._ensure()
            conn, proc = self._conn, self._proc
            assert conn is not None and proc is not None
            try:
                conn.send(("task", pair_name, fields, task))
            except OSError:
                raise self._failed(proc, task, "stopped", locked=True) from None
            self.busy = True
        deadline = time.monotonic() + TASK_TIMEOUT_S
        try:
            while True:
                try:
                    if conn.poll(POLL_S):
                        reply = conn.recv()
                        break
                except (EOFError, OSError):  # died mid-reply, or stop() closed the pipe
                    raise self._failed(proc, task, "stopped") from None
                if proc.poll() is not None:
                    raise self._failed(proc, task, "stopped")
                if time.monotonic() > deadline:
                    raise self._failed(proc, task, "timeout")
        finally:
            self.busy = False
        if reply[0] == "ok":
            self.tasks_run += 1
            return reply[1], reply[2]
        exc, tb = reply[1], reply[2]
        if not isinstance(exc, SpecDecError) and tb:
            log.error("measurement failed in the worker process:\n%s", tb)
        raise exc

    def _failed(
        self, proc: subprocess.Popen, task: tuple, why: str, locked: bool = False
    ) -> WorkerError:
        if locked:
            self._drop(proc)
        else:
            with self._lock:
                self._drop(proc)
        code = proc.returncode
        if why == "timeout":
            message = f"the measurement worker overran {TASK_TIMEOUT_S:.0f} s on task {task}"
        else:
            message = f"the measurement worker process stopped (exit code {code}) on task {task}"
        message += "; the next measurement starts a new worker"
        log.error(message)
        return WorkerError(message, "job_worker", reason=why, exit_code=str(code))

    def _drop(self, proc: subprocess.Popen) -> None:  # with self._lock held
        if proc is self._proc:  # not already replaced (stop() and a new start)
            self._discard()
        else:
            _end(proc)

    def _discard(self) -> None:  # with self._lock held: stop and forget the child
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            _end(proc)

    def stop(self) -> None:
        """Stop the child (the next task starts a new one)."""
        with self._lock:
            self._discard()


def _end(proc: subprocess.Popen) -> None:
    """Kill ``proc`` if it still runs and reap it (bounded)."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(JOIN_S)
    except subprocess.TimeoutExpired:
        log.error("measurement worker %s did not exit after SIGKILL", proc.pid)
