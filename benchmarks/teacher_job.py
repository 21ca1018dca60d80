"""What a student's step costs while a teacher's "Measure" job runs on the same server
process (the speed page's job queue, ``specdec_core/server/jobs.py``).

Student threads (``--students``, as Streamlit's script threads) step through the embedded
pair one round per "click" (propose, verify, commit; no chart built), with ``THINK_S`` of
think time between rounds, while the same process runs one teacher's job
(``make_job("measure", …, n=--job-tokens, repeats=--job-repeats, with_hf=True)``, the
greedy pair of runs + the verify-cost curve + HF's runs) in each of these cases:

- ``alone``: no job (``ALONE_S`` of rounds);
- ``a: in-thread``: the job in a thread of this process (``SPECDEC_JOB_WORKER=thread``,
  how measurements ran before the worker process);
- ``b: process nice 10``: the job in the worker process (``job_worker``) at nice +10, the
  default;
- ``c: process nice 0``: the worker process at the server's own priority.

The cycle of cases repeats ``--rounds`` times, then ``alone`` once more (the machine's
drift over the run). Every queue's worker is started and warmed by a small job of the same
kind before anything is timed (the child's imports and the pair's load are not part of the
figures). A job case lasts as long as its job: only rounds started while it ran count.

Prints one JSON line per case (step time p50/p95/max in ms over every student's rounds,
the job's seconds from submit to done, the 1-min load average before → after), then a
table per case and the memory of each worker process and of this one (Rss, Pss, USS from
``/proc/<pid>/smaps_rollup``, MiB); ``--json`` also writes it all to a file. A benchmark,
not a timed test: figures on a shared machine are noisy and nothing is asserted. Every
wait is bounded (a job that does not finish in ``JOB_TIMEOUT_S`` → exit status 1).

    python benchmarks/teacher_job.py [--students 1] [--rounds 1] [--job-tokens 128]
        [--job-repeats 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"
STUDENT_TOKENS = 48  # a student's text: a new session (not timed) when it is finished
THINK_S = 0.05  # a student's think time between rounds (short: the worst case)
WARM_ROUNDS = 10  # rounds of one student before anything is timed
ALONE_S = 20.0  # how long the "alone" case steps
JOB_TIMEOUT_S = 600.0  # one job (warm-up or timed) never takes longer: else an error
JOIN_S = 60.0  # a student's last round ends within this once told to stop
POLL_S = 0.02  # how often a running job is checked (the job's seconds are this exact)
WARM_TOKENS = 4  # the warm-up job: the timed job's tasks, small
CASES = (  # name, where the job runs (None: no job), the worker's nice
    ("alone", None, None),
    ("a: in-thread", "thread", None),
    ("b: process nice 10", "process", 10),
    ("c: process nice 0", "process", 0),
)


class BenchError(RuntimeError):
    """A job failed or overran, or a student's thread failed or hung."""


def pct(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def figures(times_ms: list[float]) -> dict:
    """n, p50 and p95 (ms) of ``times_ms`` (None where there are none)."""
    if not times_ms:
        return {"n": 0, "p50": None, "p95": None}
    return {
        "n": len(times_ms),
        "p50": round(pct(times_ms, 50), 1),
        "p95": round(pct(times_ms, 95), 1),
    }


def always_alive(session_id: str) -> bool:
    """The queue's session check: there is no Streamlit runtime here, every owner lives."""
    return True


def smaps(pid: int) -> dict[str, float]:
    """Rss, Pss and USS (private clean + dirty) of ``pid`` in MiB."""
    kb: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, *rest = line.split()
        if key in ("Rss:", "Pss:", "Private_Clean:", "Private_Dirty:"):
            kb[key[:-1]] = int(rest[0])
    uss = kb["Private_Clean"] + kb["Private_Dirty"]
    mib = {"Rss": kb["Rss"], "Pss": kb["Pss"], "USS": uss}
    return {k: round(v / 1024, 1) for k, v in mib.items()}


def student(pair, stop: threading.Event, times: list[float], errors: list, rounds: int = 0):
    """One student: a round (propose, verify, commit) per click, ``THINK_S`` between
    clicks; appends each round's ms to ``times`` until ``stop`` (or ``rounds`` done)."""
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.session import SpeculativeSession

    config = SessionConfig(max_new_tokens=STUDENT_TOKENS)
    try:
        session = SpeculativeSession(pair, PROMPT, config)
        while not stop.is_set() and not (rounds and len(times) >= rounds):
            if session.stop_reason is not None:  # the text is finished: start over
                session = SpeculativeSession(pair, PROMPT, config)
            t0 = time.perf_counter()
            session.propose()
            session.verify()
            session.commit()
            times.append((time.perf_counter() - t0) * 1e3)
            stop.wait(THINK_S)
    except Exception as exc:  # noqa: BLE001 - reported by the main thread
        errors.append(exc)
        stop.set()


def wait_job(queue, job, what: str) -> float:
    """Seconds until ``job`` (submitted now) is done; BenchError if it failed or overran
    ``JOB_TIMEOUT_S`` (then it is cancelled)."""
    t0 = time.perf_counter()
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not job.finished:
        if time.monotonic() > deadline:
            queue.cancel(job)
            raise BenchError(f"{what}: the job did not finish in {JOB_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)
    seconds = time.perf_counter() - t0
    if job.state != "done":
        raise BenchError(f"{what}: the job ended {job.state}: {job.error!r}")
    return seconds


def use(where: str, nice: int | None) -> None:
    """Where the next job runs (``SPECDEC_JOB_WORKER``) and at which nice a worker process
    (re)started from now on runs."""
    from specdec_core.server import jobs
    from specdec_core.server import worker as job_worker

    os.environ[jobs.WORKER_ENV] = where
    if nice is not None:
        job_worker.WORKER_NICE = nice


def make_job(pair, owner: str, tokens: int, repeats: int):
    from specdec_core.core.settings import SessionConfig
    from specdec_core.server import tasks

    return tasks.make_job(
        "measure", owner, pair, PROMPT, tokens, repeats, True, True, SessionConfig()
    )


def warm(queues: dict, pair) -> None:
    """Start every queue's worker (process or thread) and run a small job in it."""
    for name, where, nice in CASES[1:]:
        use(where, nice)
        queue = queues[name]
        queue.start(pair.name)  # nothing in thread mode
        wait_job(queue, queue.submit(make_job(pair, "warm", WARM_TOKENS, 1)), f"warm {name}")


def run_case(name: str, cycle: object, pair, queue, args) -> dict:
    """One case: the students step while the job runs (or ``ALONE_S`` without one)."""
    load0 = os.getloadavg()[0]
    stop = threading.Event()
    times: list[list[float]] = [[] for _ in range(args.students)]
    errors: list[BaseException] = []
    job = None
    if queue is not None:
        job = queue.submit(make_job(pair, name, args.job_tokens, args.job_repeats))
    threads = [
        threading.Thread(
            target=student, args=(pair, stop, times[i], errors), name=f"student-{i}", daemon=True
        )
        for i in range(args.students)
    ]
    for thread in threads:
        thread.start()
    try:
        if job is not None:
            job_s = wait_job(queue, job, name)
        else:
            job_s = None
            stop.wait(ALONE_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(JOIN_S)
    if any(thread.is_alive() for thread in threads):
        raise BenchError(f"{name}: a student's round did not end in {JOIN_S:.0f} s")
    if errors:
        raise BenchError(f"{name}: a student failed: {errors[0]!r}") from errors[0]
    every = [t for ts in times for t in ts]
    worker_pid = queue.process.pid if queue is not None else None  # None in thread mode
    row = {
        "case": name,
        "cycle": cycle,
        **figures(every),
        "max": round(max(every), 1) if every else None,
        "job_s": round(job_s, 1) if job_s is not None else None,
        "load1": f"{load0:.2f} → {os.getloadavg()[0]:.2f}",
        "worker_nice": os.getpriority(os.PRIO_PROCESS, worker_pid) if worker_pid else None,
        "times_ms": every,
    }
    print(
        json.dumps({k: v for k, v in row.items() if k != "times_ms"}, ensure_ascii=False),
        flush=True,
    )
    return row


def summary(rows: list[dict]) -> list[dict]:
    """Per case, every cycle's rounds together; the job's seconds: the median."""
    out = []
    for name, _, _ in CASES:
        mine = [r for r in rows if r["case"] == name]
        every = [t for r in mine for t in r["times_ms"]]
        jobs_s = [r["job_s"] for r in mine if r["job_s"] is not None]
        out.append(
            {
                "case": name,
                "runs": len(mine),
                **figures(every),
                "job_s": round(statistics.median(jobs_s), 1) if jobs_s else None,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=1, help="student threads stepping")
    ap.add_argument("--rounds", type=int, default=1, help="repetitions of the case cycle")
    ap.add_argument("--job-tokens", type=int, default=128, help="the job's n")
    ap.add_argument("--job-repeats", type=int, default=3, help="the job's repeats")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = ap.parse_args(argv)
    if args.students < 1 or args.rounds < 1:
        ap.error("--students and --rounds must be ≥ 1")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported
    sys.path.insert(0, str(ROOT))
    import torch

    from specdec_core.core.errors import SpecDecError
    from specdec_core.server import jobs, tasks
    from specdec_core.server import pairs as loader
    from specdec_core.server import worker as job_worker

    try:  # the job's size within the server's caps, before anything is loaded
        tasks.check_work(args.job_tokens, args.job_repeats)
    except SpecDecError as exc:
        ap.error(f"--job-tokens/--job-repeats: {exc}")
    pair = loader.get_pair("embedded")
    setup = {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "server_nice": os.getpriority(os.PRIO_PROCESS, 0),
        "students": args.students,
        "rounds": args.rounds,
        "job": {
            "kind": "measure",
            "n": args.job_tokens,
            "repeats": args.job_repeats,
            "with_hf": True,
        },
    }
    print(json.dumps(setup), flush=True)

    saved_env, saved_nice = os.environ.get(jobs.WORKER_ENV), job_worker.WORKER_NICE
    queues = {name: jobs.JobQueue() for name, where, _ in CASES if where is not None}
    for queue in queues.values():
        queue.alive = always_alive
    rows: list[dict] = []
    try:
        warm_stop = threading.Event()
        warm_errors: list[BaseException] = []
        student(pair, warm_stop, [], warm_errors, rounds=WARM_ROUNDS)
        if warm_errors:
            raise BenchError(f"warm-up student failed: {warm_errors[0]!r}")
        warm(queues, pair)
        for cycle in range(1, args.rounds + 1):
            for name, where, nice in CASES:
                if where is not None:
                    use(where, nice)
                rows.append(run_case(name, cycle, pair, queues.get(name), args))
        rows.append(run_case("alone", "end", pair, None, args))
        memory = {
            f"worker ({name})": smaps(queue.process.pid)
            for name, queue in queues.items()
            if queue.process.pid is not None
        }
        memory["server"] = smaps(os.getpid())
        starts = {name: queue.process.starts for name, queue in queues.items()}
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        for queue in queues.values():
            queue.process.stop()
        if saved_env is None:
            os.environ.pop(jobs.WORKER_ENV, None)
        else:
            os.environ[jobs.WORKER_ENV] = saved_env
        job_worker.WORKER_NICE = saved_nice

    table = summary(rows)
    print(f"\n{'case':<20}{'runs':>5}{'n':>6}{'p50 ms':>8}{'p95 ms':>8}{'job s':>7}")
    for r in table:
        cells = [f"{r[k]:.1f}" if r[k] is not None else "–" for k in ("p50", "p95", "job_s")]
        print(f"{r['case']:<20}{r['runs']:>5}{r['n']:>6}{cells[0]:>8}{cells[1]:>8}{cells[2]:>7}")
    print(f"\n{'memory MiB':<30}{'Rss':>8}{'Pss':>8}{'USS':>8}")
    for who, mib in memory.items():
        print(f"{who:<30}{mib['Rss']:>8.1f}{mib['Pss']:>8.1f}{mib['USS']:>8.1f}")
    restarted = {name: n for name, n in starts.items() if n > 1}
    if restarted:
        print(f"worker processes started more than once: {restarted}", flush=True)
    if args.json:
        result = {
            "setup": setup,
            "cases": rows,
            "summary": table,
            "memory_mib": memory,
            "worker_starts": starts,
        }
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
        print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
