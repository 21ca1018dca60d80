"""The classroom profile of ``benchmarks/load_test.py``: Locust runs S students against
one server process or R replicas behind nginx (loopback only), then a replay-alone check.
Every run is bounded by ``--duration`` plus the ramp-up; see load_test.py's docstring."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import classroom_ws as W

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
SPAWN_RATE = 5  # students opening the page per second


def peak_rss_mb(pids: list[int]) -> float:
    """Sum over the server processes of their peak resident memory (VmHWM)."""
    total = 0.0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) / 1024
    return total


@contextmanager
def target(replicas: int, log_dir: Path):
    """Yields (http url, server pids): one process, or ``replicas`` behind nginx."""
    if replicas:
        import replicas as deploy

        with deploy.cluster(replicas) as run:
            yield run.url, [p.pid for p in run.replicas]
    else:
        from warm_up import warm_up

        with W.app_server(log_dir / "server.log") as proc:
            url = f"http://127.0.0.1:{proc.server_port}"
            asyncio.run(warm_up(url))  # as deploy/replicas.py does for each replica
            yield url, [proc.pid]


def run_locust(url: str, users: int, duration: int, teacher: bool, out: Path, seed: int):
    ramp = -(-users // SPAWN_RATE)
    classes = ["StepStudent", "LabStudent"] + (["Teacher"] if teacher else [])
    env = {
        **os.environ,
        "SPECDEC_TRACE_FILE": str(out / "traces.jsonl"),
        "SPECDEC_LOAD_SEED": str(seed),
    }
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(REPO / "benchmarks/locust_classroom.py"),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(SPAWN_RATE),
        "-t",
        f"{ramp + duration}s",
        "--host",
        url,
        "--csv",
        str(out / "class"),
        "--html",
        str(out / "class.html"),
        "--only-summary",
        "--stop-timeout",
        "15",
        "--loglevel",
        "WARNING",
        *classes,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out / "locust.log", "w") as log:
        subprocess.run(
            cmd,
            env=env,
            cwd=REPO,
            timeout=ramp + duration + 120,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    with open(out / "class_stats.csv") as f:
        rows = {r["Name"]: r for r in csv.DictReader(f)}
    path = out / "traces.jsonl"
    traces = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return rows, traces, cpu


async def replay_alone(url: str, trace: dict) -> str | None:
    """Replay one session's clicks alone; the first difference, or None."""
    client, ws = await W.open_client(url.replace("http", "ws", 1) + "/_stcore/stream")
    try:
        for i, (label, seen) in enumerate(trace["clicks"]):
            await client.rerun(click=label)
            if W.observe(client) != seen:
                return f"user {trace['user']} click {i + 1} ({label}) differs"
        return None
    finally:
        await ws.close()


def one_size(url: str, pids: list[int], users: int, args, out: Path) -> dict:
    cpu0 = sum(W.cpu_seconds(pid) for pid in pids)
    rows, traces, locust_cpu = run_locust(
        url, users, args.duration, not args.no_teacher, out, args.seed
    )
    server_cpu = sum(W.cpu_seconds(pid) for pid in pids) - cpu0
    checked = random.Random(args.seed).sample(traces, min(args.check, len(traces)))
    diffs = [d for t in checked if (d := asyncio.run(replay_alone(url, t)))]

    def cell(name: str, col: str):
        r = rows.get(name)
        return None if r is None or r[col] == "N/A" else float(r[col])

    result = {
        "students": users,
        "replicas": args.replicas,
        "duration_s": args.duration,
        "step_p50_ms": cell("step click", "50%"),
        "step_p95_ms": cell("step click", "95%"),
        "step_clicks": cell("step click", "Request Count"),
        "lab_p50_ms": cell("lab click", "50%"),
        "lab_p95_ms": cell("lab click", "95%"),
        "lab_clicks": cell("lab click", "Request Count"),
        "open_p50_ms": cell("open page", "50%"),
        "open_p95_ms": cell("open page", "95%"),
        "teacher_measures": cell("teacher Measure", "Request Count"),
        "teacher_measure_p50_ms": cell("teacher Measure", "50%"),
        "errors": int(sum(float(r["Failure Count"]) for n, r in rows.items() if n != "Aggregated")),
        "cross_talk": {"sessions_replayed": len(checked), "differences": diffs},
        "server_peak_rss_mb": round(peak_rss_mb(pids)),
        "cpu_s": {"servers": round(server_cpu), "locust": round(locust_cpu)},
        "load_avg_1m_after": os.getloadavg()[0],
    }
    failures = out / "class_failures.csv"
    result["failures"] = failures.read_text().splitlines()[1:6] if failures.exists() else []
    return result


def main(args) -> None:
    sizes = [int(s) for s in args.class_sizes.split(",")]
    results = []
    for users in sizes:  # a fresh server per size: RSS and queues start equal
        out = Path(tempfile.mkdtemp(prefix=f"class{users}-"))
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        with target(args.replicas, out) as (url, pids):
            r = one_size(url, pids, users, args, out)
        r["load_avg_1m_before"], r["wall_s"] = load_before, round(time.perf_counter() - started)
        r["reports"] = str(out)
        results.append(r)
        print(json.dumps(r, ensure_ascii=False), flush=True)
    ok = [
        r["students"]
        for r in results
        if r["errors"] == 0
        and not r["cross_talk"]["differences"]
        and max(r["step_p95_ms"] or 0, r["lab_p95_ms"] or 0) <= 1000
    ]
    summary = {
        "largest_S_with_p95_le_1s_and_0_errors": max(ok) if ok else None,
        "cpus": os.cpu_count(),
        "replicas": args.replicas,
        "teacher": not args.no_teacher,
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": results}, indent=1))
