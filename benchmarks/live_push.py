"""A live class through the push route, measured: 2 replicas behind nginx (``deploy/replicas``),
SQLite or Redis (``--redis``: a throw-away ``redis-server``, the replicas on their own
ports as stand-ins for two machines), a real teacher (Chromium via Playwright: the step
page, the Lesson panel's "Start a live class", then ① ② ③ clicks) and N followers, each
one WebSocket on ``/_specdec/live`` through nginx (its route cookie random, so the class
splits over both replicas; half of them in Chinese).

Figures (p50 / p95 over every follower and click): click → follower drawn (the message with
the new state's frame received), first / median / last follower per click; server CPU per
click (both replicas, the teacher's own step included) and, from two class sizes, per
extra follower; idle followers' CPU (% of a core over ``IDLE_S``); the join storm (``--storm
N``: N students over ``STORM_S`` seconds, each opens a Streamlit session ``?room=CODE``
(the page's first run, its seat joined) and then the push socket; the time to the
teacher's moment on screen); answer → teacher's chart (``--answers N``: N seats answer one
by one, first / p50 / p95 of answer stored → the teacher's page counts it). A push socket
stands for a follower's screen: a real tab also runs its fragment every
``follow.PUSH_BEAT_S`` (heartbeat, answers), not simulated here.

    python benchmarks/live_push.py --followers 30,60 --rounds 3 --storm 60
    python benchmarks/live_push.py --redis
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import websockets

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "deploy"))
sys.path.insert(0, str(REPO / "benchmarks"))

from classroom_ws import Client  # noqa: E402
from replicas import COOKIE, cluster  # noqa: E402

from specdec_core.lessons.link import LessonState, encode  # noqa: E402
from specdec_core.ui.i18n import tr  # noqa: E402

PROMPT = "ROMEO:\nBut soft, what light"
IDLE_S = 15.0
STORM_S = 20.0
WAIT_S = 30.0
STEPS = ("st_propose", "st_verify", "st_commit")


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of the processes so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


class Follower:
    """One push socket; ``seen``: (arrival time, state digest) of every message."""

    def __init__(self, base: str, code: str, lang: str) -> None:
        self.url = f"{base.replace('http', 'ws', 1)}/_specdec/live?room={code}&lang={lang}"
        self.cookie = f"{COOKIE}={secrets.token_hex(8)}"
        self.seen: list[tuple[float, str]] = []
        self.task: asyncio.Task | None = None

    async def run(self) -> None:
        headers = {"Cookie": self.cookie}
        async with websockets.connect(self.url, additional_headers=headers) as ws:
            async for raw in ws:
                m = json.loads(raw)
                if isinstance(m.get("html"), str):
                    self.seen.append((time.perf_counter(), m["s"]))

    def last(self) -> str | None:
        return self.seen[-1][1] if self.seen else None


async def wait_for(pred, timeout: float = WAIT_S) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return False


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


async def teacher_room(browser, url: str):
    page = await (await browser.new_context(viewport={"width": 1400, "height": 1600})).new_page()
    await page.goto(f"{url}/?{urlencode(encode(LessonState(prompt=PROMPT)))}")
    await page.get_by_role("button", name="① Propose").wait_for(timeout=180_000)
    await page.get_by_text(tr("lt_title", "en")).click()
    await page.get_by_role("tab", name=tr("live_tab", "en")).click()
    await page.get_by_role("button", name=tr("live_start", "en")).click()
    box = page.locator(".st-key-live_code")
    await box.wait_for(timeout=60_000)
    return page, (await box.inner_text()).strip()


async def idle_step(page) -> None:
    await page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
    )


async def class_of(n: int, url: str, code: str, page, pids: list[int], rounds: int) -> dict:
    """N followers: idle CPU, then ``rounds`` × (① ② ③) clicks; the figures."""
    fs = [Follower(url, code, "zh" if i % 2 else "en") for i in range(n)]
    for f in fs:
        f.task = asyncio.ensure_future(f.run())
    assert await wait_for(lambda: all(f.seen for f in fs)), "not every follower connected"
    await asyncio.sleep(2.0)
    c0, t0 = cpu_s(pids), time.perf_counter()
    await asyncio.sleep(IDLE_S)
    idle = (cpu_s(pids) - c0) / (time.perf_counter() - t0) * 100
    lat, first, median, last, cpu = [], [], [], [], []
    for _ in range(rounds):
        for step in STEPS:
            before = {id(f): f.last() for f in fs}
            await idle_step(page)
            await asyncio.sleep(0.5)
            c0 = cpu_s(pids)
            clicked = time.perf_counter()
            await page.get_by_role("button", name=tr(step, "en")).click()
            moved = lambda b=before: all(f.last() != b[id(f)] for f in fs)  # noqa: E731
            assert await wait_for(moved), f"a follower missed {step}"
            got = [
                next(t for t, s in f.seen if s != before[id(f)] and t >= clicked) - clicked
                for f in fs
            ]
            await idle_step(page)
            await asyncio.sleep(0.3)
            cpu.append(cpu_s(pids) - c0)
            lat += got
            first.append(min(got))
            median.append(statistics.median(got))
            last.append(max(got))
    for f in fs:
        f.task.cancel()
    return {
        "n": n,
        "load": load(),
        "p50": pct(lat, 0.5),
        "p95": pct(lat, 0.95),
        "first": statistics.median(first),
        "median": statistics.median(median),
        "last": statistics.median(last),
        "cpu_click": statistics.median(cpu),
        "idle_pct": idle,
        "clicks": len(cpu),
    }


def room_store(env: dict):
    """A store object on the class's store (SQLite file or Redis), as a replica has it."""
    if env.get("SPECDEC_REDIS_URL"):
        from specdec_core.server.rooms_redis import RedisStore

        return RedisStore(env["SPECDEC_REDIS_URL"])
    from specdec_core.server.rooms_sqlite import SQLiteStore

    return SQLiteStore(env["SPECDEC_ROOM_DB"])


async def answers(page, code: str, n: int, env: dict) -> list[float]:
    """The teacher proposes and asks "will position 1 be accepted?"; N seats answer one by
    one (stored through a store object of their own, as a student's page run stores it;
    that run, ≈ 50 ms, is not counted), each at a random moment 0.3–1.3 s after the last
    one was counted, so the dashboard's poll phase is sampled; seconds from each answer
    stored until the teacher's page says "k of N … answered"."""
    store = room_store(env)
    seats = [f"bench-{i:03d}" for i in range(n)]
    for s in seats:
        store.join(code, s)
    await idle_step(page)
    await page.get_by_role("button", name=tr("st_propose", "en")).click()
    await idle_step(page)
    await page.locator(".st-key-live_ask button").click()
    await page.locator(".st-key-live_chart").wait_for(timeout=60_000)
    await idle_step(page)  # the Ask click's page run has ended
    qid = store.view(code).question.qid
    took = []
    for k, s in enumerate(seats, start=1):
        await asyncio.sleep(random.uniform(0.3, 1.3))
        store.answer(code, s, qid, k % 2)
        stored = time.perf_counter()
        await page.wait_for_function(
            "([k, m]) => new RegExp('(^|\\\\D)' + k + ' of ' + m + ' ').test("
            "document.body.innerText)",
            arg=[k, n],
            timeout=30_000,
            polling=10,
        )
        took.append(time.perf_counter() - stored)
    await page.locator(".st-key-live_reveal button").first.click()
    return took


async def storm(url: str, code: str, n: int) -> list[float]:
    """N students open ``?room=CODE`` over STORM_S s: Streamlit session (first run, seat),
    then the push socket; seconds until the teacher's moment arrived."""
    stream = url.replace("http", "ws", 1) + "/_stcore/stream"

    async def student(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        cookie = f"{COOKIE}={secrets.token_hex(8)}"
        async with websockets.connect(
            stream, subprotocols=["streamlit"], max_size=None, additional_headers={"Cookie": cookie}
        ) as ws:
            c = Client(ws)
            c.query_string = f"room={code}"
            await c.rerun()
            f = Follower(url, code, "en")
            f.cookie = cookie
            task = asyncio.ensure_future(f.run())
            await wait_for(lambda: bool(f.seen))
            task.cancel()
            return time.perf_counter() - started

    delays = sorted(random.uniform(0, STORM_S) for _ in range(n))
    return await asyncio.gather(*(student(d) for d in delays))


async def main_async(args, url: str, pids: list[int]) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox"]
        )
        page, code = await teacher_room(browser, url)
        rows = [await class_of(n, url, code, page, pids, args.rounds) for n in args.followers]
        for r in rows:
            print(
                f"| {r['n']} | {args.store} | {r['load']} | {r['p50']:.2f} s / {r['p95']:.2f} s "
                f"| {r['first']:.2f} / {r['median']:.2f} / {r['last']:.2f} s "
                f"| {r['cpu_click']:.2f} CPU-s | {r['idle_pct']:.1f} % | {r['clicks']} |",
                flush=True,
            )
        if len(rows) >= 2:
            a, b = rows[0], rows[-1]
            per = (b["cpu_click"] - a["cpu_click"]) / (b["n"] - a["n"]) * 1e3
            print(f"per extra follower: {per:.1f} ms CPU per click ({a['n']} → {b['n']})")
        if args.answers:
            took = await answers(page, code, args.answers, args.env)
            print(
                f"answer → teacher's chart, {args.answers} answers (load {load()}): first "
                f"{took[0]:.2f} s, p50 {pct(took, 0.5):.2f} s, p95 {pct(took, 0.95):.2f} s, "
                f"max {max(took):.2f} s",
                flush=True,
            )
        if args.storm:
            took = await storm(url, code, args.storm)
            print(
                f"join storm {args.storm} in {STORM_S:.0f} s (load {load()}): "
                f"p50 {pct(took, 0.5):.2f} s, p95 {pct(took, 0.95):.2f} s, max {max(took):.2f} s"
            )
        await browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--followers", default="30,60")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--storm", type=int, default=0)
    ap.add_argument("--redis", action="store_true")
    ap.add_argument("--answers", type=int, default=30, help="answers timed (0: none)")
    args = ap.parse_args()
    args.followers = [int(x) for x in args.followers.split(",")]
    args.store = "Redis" if args.redis else "SQLite"
    tmp = Path(tempfile.mkdtemp(prefix="specdec-push-"))
    env = {"SPECDEC_ROOM_DB": str(tmp / "rooms.sqlite3"), "SPECDEC_TORCH_THREADS": "1"}
    redis = None
    if args.redis:
        port = random.randint(20000, 40000)
        redis = subprocess.Popen(
            [
                shutil.which("redis-server") or "/usr/bin/redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        env["SPECDEC_REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        time.sleep(0.5)
    args.env = env
    print(f"load at start {load()}", flush=True)
    print(
        "| followers | store | load | click → drawn p50 / p95 | first / median / last "
        "| server CPU per click | idle followers | clicks |"
    )
    try:
        with cluster(2, env=env) as c:
            asyncio.run(main_async(args, c.url, [p.pid for p in c.replicas]))
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
