"""Room store operations per second: the follower's poll (``version``), the read
after a change (``view``), a student's ``answer`` and a teacher's ``publish``, on each
backend, from one thread and from several at once.

    python benchmarks/room_store.py                     # SQLite and Redis (if installed)
    python benchmarks/room_store.py --backend sqlite --threads 1 8 --ops 2000
    python benchmarks/room_store.py --redis-url redis://127.0.0.1:6379/0   # an existing server
    python benchmarks/room_store.py --json

SQLite runs on a file in a temp folder (WAL, as the server uses it); Redis on a throw-away
``redis-server`` (``--save '' --appendonly no``) on a free loopback port unless
``--redis-url`` names one (its keys get a ``specdec-bench`` prefix, removed after). One room
with ``--students`` students (default 60) and an open 4-choice question; every ``answer``
call changes that student's choice, so each one is a real write. Each figure is the median
of ``--repeats`` runs of ``--ops`` calls (split over the threads); the operations per second
count all threads together. Bounded: a few seconds per backend.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # specdec_core

from specdec_core.server.room_types import Question
from specdec_core.server.rooms import RoomStore
from specdec_core.server.rooms_sqlite import SQLiteStore  # noqa: E402

OPERATIONS = ("version", "view", "answer", "publish")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis() -> tuple[subprocess.Popen, str] | None:
    """A throw-away redis-server on a free loopback port, or None when not installed."""
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.path.exists(exe):
        return None
    import redis

    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_timeout=1)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    client.close()
    return proc, url


def measure(
    store: RoomStore, ops: int, threads: int, repeats: int, students: int
) -> dict[str, dict[str, float]]:
    """``{operation: {"ops_per_s": median, "p50_us": …, "p95_us": …}}`` for one store."""
    code, key = store.create()
    names = [f"bench-{i}" for i in range(students)]
    for name in names:
        store.join(code, name)
    store.ask(code, key, Question("bench", "accept", (("position", "1"),), ("a", "b", "c", "d")))
    counter = [0] * students  # each answer moves the student to the next choice
    lock = threading.Lock()
    publish_count = [0]

    def answer(i: int) -> None:
        s = i % students
        with lock:
            counter[s] += 1
            choice = counter[s] % 4
        store.answer(code, names[s], "bench", choice)

    def publish(i: int) -> None:
        with lock:
            publish_count[0] += 1
            n = publish_count[0]
        store.publish(code, key, "step", {"v": "2", "lang": "en", "s": f"state-{n}"})

    calls: dict[str, Callable[[int], object]] = {
        "version": lambda i: store.version(code),
        "view": lambda i: store.view(code),
        "answer": answer,
        "publish": publish,
    }
    result = {}
    for name in OPERATIONS:
        rates, latencies = [], []
        for _ in range(repeats):
            rate, lat = _run(calls[name], ops, threads)
            rates.append(rate)
            latencies.extend(lat)
        latencies.sort()
        result[name] = {
            "ops_per_s": round(statistics.median(rates)),
            "p50_us": round(latencies[len(latencies) // 2] * 1e6, 1),
            "p95_us": round(latencies[int(len(latencies) * 0.95)] * 1e6, 1),
        }
    return result


def _run(call: Callable[[int], object], ops: int, threads: int) -> tuple[float, list[float]]:
    per = max(1, ops // threads)
    barrier = threading.Barrier(threads + 1)
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def work(t: int) -> None:
        barrier.wait()
        own = latencies[t]
        for j in range(per):
            started = time.perf_counter()
            call(t * per + j)
            own.append(time.perf_counter() - started)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    return per * threads / elapsed, [x for own in latencies for x in own]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "redis", "both"), default="both")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rows = []
    server = None
    with tempfile.TemporaryDirectory() as folder:
        backends: list[tuple[str, Callable[[], RoomStore]]] = []
        if args.backend in ("sqlite", "both"):
            path = Path(folder) / "rooms.sqlite3"
            backends.append(("sqlite", lambda: SQLiteStore(path, max_students=10_000)))
        if args.backend in ("redis", "both"):
            url = args.redis_url
            if url is None:
                server = start_redis()
                url = server[1] if server else None
            if url is None:
                print("redis-server not installed: Redis skipped", file=sys.stderr)
            else:
                from specdec_core.server.rooms_redis import RedisStore

                backends.append(
                    ("redis", lambda: RedisStore(url, prefix="specdec-bench", max_students=10_000))
                )
        try:
            for backend, make in backends:
                for threads in args.threads:
                    store = make()
                    figures = measure(store, args.ops, threads, args.repeats, args.students)
                    for op, fig in figures.items():
                        rows.append({"backend": backend, "threads": threads, "op": op, **fig})
                    if backend == "redis":
                        for k in store.client.scan_iter("specdec-bench:*"):
                            store.client.delete(k)
        finally:
            if server is not None:
                server[0].terminate()
                server[0].wait(timeout=10)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'backend':8} {'threads':>7} {'op':8} {'ops/s':>9} {'p50 µs':>9} {'p95 µs':>9}")
    for r in rows:
        print(
            f"{r['backend']:8} {r['threads']:>7} {r['op']:8} {r['ops_per_s']:>9} "
            f"{r['p50_us']:>9} {r['p95_us']:>9}"
        )
    print(f"(median of {args.repeats} × {args.ops} calls; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
