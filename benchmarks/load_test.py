"""Load test: a classroom of browser-less students against a real app server on loopback.

Starts ``streamlit run app.py`` on 127.0.0.1 (a free port), then opens N concurrent
sessions over Streamlit's own websocket protocol (``/_stcore/stream``, protobuf
``BackMsg``/``ForwardMsg``, what a browser tab sends: ``benchmarks/classroom_ws.py``'s
client, a rerun with the clicked button's trigger and the tab's widget values, scoped to
the step panel's ``st.fragment`` as a browser scopes it, so the server reruns only the
panel). Each student presses ① Propose, ② Verify, ③ Commit, then "Run one
round" R times, and checks that the committed length grew every round. Prints errors
(must be 0), p50/p95/max step latency (click → script finished as the client sees it, ms),
the server's own time per rerun (``SPECDEC_PROFILE=1`` makes ``app.py`` log it, and the
step panel its fragment runs, ``fragment=step_panel``) and the server's peak memory.
Traffic goes to 127.0.0.1 only; the loop is bounded and stops by itself.

    python benchmarks/load_test.py [--students 20] [--rounds 10]

``--profile classroom`` is a real class instead: Locust
(``benchmarks/locust_classroom.py``) runs S students for each S in ``--class-sizes``,
each pressing a button every 3–8 s (seeded): most step through, some rerun the rule lab's
Monte Carlo, one teacher presses "Measure" on the speed page. Per S it reports p50/p95
click latency (Locust's percentiles), errors, the server's peak RSS, and the cross-talk
check: up to ``--check`` step-through sessions are replayed alone, click for click, on the
same server afterwards and must see exactly what they saw under load. ``--replicas 2``
runs the same through nginx in front of two replicas (``deploy/replicas.py``).

    python benchmarks/load_test.py --profile classroom [--class-sizes 10,30,60,100]
        [--duration 60] [--replicas 0|2] [--no-teacher] [--json out.json]

A step click is a fragment rerun, as in a browser; ``--full-reruns`` sends every click as a
full rerun instead (``app.py`` and the whole page each time: the load before the step
panel became a fragment), to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import classroom_ws as W
import websockets

REPO = Path(__file__).resolve().parents[1]
STEPS = ["① Propose", "② Verify", "③ Commit / reject"]
TIMEOUT_S = 120


class Student:
    """One browser-less session (:class:`classroom_ws.Client`, which keeps the page hash,
    the widgets of the last run and the fragment each lives in)."""

    def __init__(self, url: str, seed: int) -> None:
        self.url, self.seed = url, seed

    async def lesson(self, rounds: int, latencies: list[float]) -> None:
        async with websockets.connect(
            self.url, subprotocols=["streamlit"], max_size=None, open_timeout=TIMEOUT_S
        ) as ws:
            c = W.Client(ws)
            await c.rerun()
            for label in STEPS + ["Run one round"] * rounds:
                before = int(c.metrics.get("committed length", "0"))
                if c.disabled.get(label, True):
                    break  # finished (max new tokens): the button is disabled
                latencies.append(await c.rerun(click=label))
                if c.exceptions:
                    raise RuntimeError(c.exceptions[0])
                after = int(c.metrics["committed length"])
                if label != STEPS[0] and label != STEPS[1] and after <= before:
                    raise RuntimeError(f"{label}: committed length {before} → {after}; {c.alerts}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def classroom(url: str, students: int, rounds: int) -> tuple[list[float], list[str]]:
    latencies: list[float] = []
    results = await asyncio.gather(
        *(Student(url, i).lesson(rounds, latencies) for i in range(students)),
        return_exceptions=True,
    )
    errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    return latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", choices=["burst", "classroom"], default="burst")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--class-sizes", default="10,30,60,100")
    parser.add_argument("--duration", type=int, default=60, help="seconds after ramp-up")
    parser.add_argument("--replicas", type=int, default=0, help="0: one process, no proxy")
    parser.add_argument("--no-teacher", action="store_true")
    parser.add_argument("--check", type=int, default=10, help="sessions replayed alone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--full-reruns", action="store_true", help="step clicks as full reruns (no fragment)"
    )
    args = parser.parse_args()
    if args.full_reruns:  # read by classroom_ws.Client, here and in the Locust process
        os.environ["SPECDEC_FULL_RERUNS"] = "1"
    if args.profile == "classroom":
        import classroom as classroom_profile  # not ``classroom``: the function below

        classroom_profile.main(args)
        return
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_PROFILE": "1"},
    )
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        started = time.perf_counter()
        url = f"ws://127.0.0.1:{port}/_stcore/stream"
        latencies, errors = asyncio.run(classroom(url, args.students, args.rounds))
        wall = time.perf_counter() - started
        peak = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else [0.0] * 19
    print(
        f"students {args.students} × ({len(STEPS)} steps + {args.rounds} rounds), "
        f"one server process, 127.0.0.1"
    )
    print(f"steps {len(latencies)}  errors {len(errors)}  wall {wall:.1f} s")
    print(
        f"step latency ms: p50 {statistics.median(latencies):.0f}  p95 {q[18]:.0f}  "
        f"max {max(latencies):.0f}"
    )
    log.seek(0)
    runs = re.findall(r"specdec-render-ms (\d+\.\d)( fragment=)?", log.read())
    kinds = [
        ("full reruns, app.py start → end", "", 2),  # the first two: cold
        ("fragment reruns, step panel start → end", " fragment=", 0),
    ]
    for what, fragment, cold in kinds:
        renders = [float(ms) for ms, f in runs if f == fragment][cold:]
        if len(renders) > 1:
            r = statistics.quantiles(renders, n=20)
            print(
                f"server time per rerun ms ({what}, SPECDEC_PROFILE): n {len(renders)}  "
                f"p50 {statistics.median(renders):.0f}  p95 {r[18]:.0f}"
            )
    print(f"server peak memory {peak:.0f} MB")
    for e in errors[:10]:
        print("  ", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
