"""Locust user classes for a realistic class: students with a think time, speaking the
app's websocket protocol (``/_stcore/stream``, protobuf ``BackMsg``/``ForwardMsg``).

Run through ``benchmarks/load_test.py --profile classroom`` (starts the server or the
replicas + nginx, runs Locust headless for S users, adds RSS and the cross-talk check),
or by hand against a running server on loopback:

    locust -f benchmarks/locust_classroom.py --headless -u 30 -r 5 -t 60s \\
        --host http://127.0.0.1:8501 --csv /tmp/class

Users: ``StepStudent`` (most: ① Propose / ② Verify / ③ Commit, sometimes "Run one
round", Reset when the text is finished), ``LabStudent`` (some: a new Monte Carlo on the
rule lab, by changing N), ``Teacher`` (exactly one: "Measure" on the speed page). Each
waits 3–8 s between clicks (seeded, ``SPECDEC_LOAD_SEED``). Locust runs on gevent, so
the client is ``websocket-client`` (not the asyncio ``websockets``, locust#2383).
Clicks go as a browser sends them (:class:`classroom_ws.Client`): the step buttons live
in the step panel's ``st.fragment``, so a step click is a fragment rerun (only the panel
runs on the server); the rule lab and the speed page have no fragment, so their clicks
are full reruns. ``SPECDEC_FULL_RERUNS=1``: every click a full rerun (to compare).
Request names: ``step click``, ``lab click``, ``teacher Measure``; a failure is a
traceback element, a timeout, a closed socket, or a commit that did not grow the text.
Each step student's trace (button → what it saw, and how many clicks ended as a
fragment run) is written to ``SPECDEC_TRACE_FILE`` at the end, for the replay-alone
comparison.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import time
import urllib.request
from pathlib import Path

import websocket
from locust import User, events, task
from locust.exception import StopUser
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classroom_ws import Client, observe  # noqa: E402

SEED = int(os.environ.get("SPECDEC_LOAD_SEED", "0"))
THINK_S = (3.0, 8.0)
TIMEOUT_S = 60
STEPS = ("① Propose", "② Verify", "③ Commit / reject")
ROUND, RESET, MEASURE = "Run one round", "Reset", "Measure"
MC_N = (5_000, 10_000, 20_000, 40_000)
_ids = itertools.count()
TRACES: list[dict] = []


class SyncClient(Client):
    """:class:`classroom_ws.Client` over ``websocket-client`` (blocking, gevent-friendly)."""

    def __init__(self, host: str) -> None:
        cookie = ""
        with urllib.request.urlopen(host + "/", timeout=TIMEOUT_S) as r:  # like a browser
            route = r.headers.get("Set-Cookie", "")
            cookie = route.split(";", 1)[0] if route.startswith("specdec_route=") else ""
        ws = websocket.create_connection(
            host.replace("http", "ws", 1) + "/_stcore/stream",
            subprotocols=["streamlit"],
            timeout=TIMEOUT_S,
            cookie=cookie or None,
        )
        super().__init__(ws)
        self.cookie = cookie  # nginx's route cookie: the tab's other sockets carry it too

    def click(self, page: str | None = None, timeout_s: float = TIMEOUT_S, **values) -> float:
        """One click: its rerun (scoped to the widget's fragment, if any) until the run
        ends, a fragment run or a full one (also the full run after ``st.rerun``)."""
        msg = self.rerun_msg(page, **values)
        started = time.perf_counter()
        self.ws.settimeout(timeout_s)
        self.ws.send_binary(msg.SerializeToString())
        self.reset_run()
        while not self.handle(self.ws.recv()):
            pass
        return (time.perf_counter() - started) * 1e3


class Student(User):
    abstract = True
    page: str | None = None

    def on_start(self) -> None:
        self.index = next(_ids)
        self.rng = random.Random(SEED * 1000 + self.index)
        self.timed("open page", None, connect=True)

    def on_stop(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.ws.close()

    def wait_time(self) -> float:
        return self.rng.uniform(*THINK_S)

    def open(self) -> None:
        """A new tab: the page, its websocket, the first run (and a move to ``page``)."""
        self.client = SyncClient(self.host)
        self.client.click()
        if self.page:
            self.client.click(page=self.page)

    def timed(
        self, name: str, check=None, timeout_s: float = TIMEOUT_S, connect=False, **values
    ) -> None:
        """One click (or, with ``connect``, opening the page), reported to Locust."""
        started, error = time.perf_counter(), None
        try:
            if connect:
                self.open()
                ms = (time.perf_counter() - started) * 1e3
            else:
                ms = self.client.click(timeout_s=timeout_s, **values)
            if self.client.exceptions:
                error = RuntimeError(self.client.exceptions[0])
            elif check is not None:
                error = check()
        except Exception as e:  # noqa: BLE001 - a timeout or closed socket is a failure
            ms, error = (time.perf_counter() - started) * 1e3, e
        self.environment.events.request.fire(
            request_type="WS",
            name=name,
            response_time=ms,
            response_length=0,
            exception=error,
            context={},
        )
        if isinstance(error, (OSError, websocket.WebSocketException)):
            raise StopUser  # this tab is broken: counted, and the user leaves


class StepStudent(Student):
    """On the step-through page: the enabled step, sometimes a whole round."""

    weight = 9

    def on_start(self) -> None:
        self.trace = {"user": -1, "clicks": [], "fragment_runs": 0}
        super().on_start()
        self.trace["user"] = self.index
        TRACES.append(self.trace)

    @task
    def step(self) -> None:
        c = self.client
        enabled = [b for b in STEPS if not c.disabled.get(b, True)]
        label = ROUND if self.rng.random() < 0.25 else (enabled[0] if enabled else ROUND)
        if c.disabled.get(ROUND, False):
            label = RESET  # the text is finished
        before = int(c.metrics.get("committed length", "0"))

        def grew() -> Exception | None:
            after = int(c.metrics.get("committed length", "0"))
            if label in (ROUND, STEPS[2]) and after <= before:
                return RuntimeError(f"{label}: committed length {before} → {after}")
            return None

        self.timed("step click", grew, click=label)
        if not c.exceptions:
            self.trace["clicks"].append([label, observe(c)])
        if c.runs and c.runs[-1][0] == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            self.trace["fragment_runs"] += 1


class LabStudent(Student):
    """On the rule lab: a new Monte Carlo (another N per rule)."""

    weight = 1
    page = "acceptance_lab"

    @task
    def monte_carlo(self) -> None:
        n = self.rng.choice([n for n in MC_N if n != getattr(self, "n", None)])
        self.n = n
        self.timed("lab click", rl_mc_n=n)


class Teacher(Student):
    """Exactly one, on the speed page: presses "Measure" (waits for the result)."""

    fixed_count = 1
    page = "speed"

    @task
    def measure(self) -> None:
        self.timed("teacher Measure", timeout_s=300, click=MEASURE)


@events.test_stop.add_listener
def _dump_traces(**_kwargs) -> None:
    path = os.environ.get("SPECDEC_TRACE_FILE")
    if path:
        Path(path).write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in TRACES))
