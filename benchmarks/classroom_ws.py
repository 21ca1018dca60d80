"""A hand-made Streamlit websocket client for classroom-abuse checks (loopback only).

(Over 300 lines on purpose: the client and the abuse scenarios it drives are one tool.)

Speaks the same protocol as ``benchmarks/load_test.py`` (``/_stcore/stream``, protobuf
``BackMsg``/``ForwardMsg``) but can also send crafted widget values (a huge prompt, an
oversized table edit state), a forged clear-cache message and page switches. Widgets are
found by their ``key=`` (the suffix of Streamlit's element id), buttons by label.

A click is sent as a browser sends it (Streamlit 1.67's frontend): ``rerun_script`` with
every widget value the tab knows (the last value drawn or sent; a button's trigger only
with its click), the URL's query string as the app last wrote it (``page_info_changed``),
and, for a widget drawn inside an ``st.fragment`` (``Delta.fragment_id``), that fragment's
id in ``ClientState.fragment_id``: the server then reruns only the fragment (the step
panel's buttons), not ``app.py`` and the whole page. ``SPECDEC_FULL_RERUNS=1`` sends every
click as a full rerun instead (to compare the two).

The hostile probe (the default): one replica behind nginx on loopback
(``deploy/replicas.py``); for each attack in :data:`ATTACKS` an honest classmate clicks
"Run one round" before, during and after it; the table gives the classmate's click p50 /
p95, whether its tab still shows what a fresh replay of the same clicks shows, and a
verdict (during p95 ≤ 2 × before p95, state unchanged, the attack's own criterion). Add an
attack: one coroutine (see :class:`ProbeContext`) and one line in :data:`ATTACKS`.

    python benchmarks/classroom_ws.py                          # every attack, the table
    python benchmarks/classroom_ws.py --attacks "queue fill"   # some of them
    python benchmarks/classroom_ws.py --issue19                # the first class's figures

Every loop is bounded (no attack holds its pressure past ``HOLD_S``); everything runs on
127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.Slider_pb2 import Slider
from streamlit.proto.WidgetStates_pb2 import WidgetState

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120


def shown_state(which: str, w) -> tuple[WidgetState | None, bool]:
    """The value a widget element shows, as the browser's widget state would hold it, and
    whether the server set it (``set_value``: it replaces what the tab had). ``None``:
    no value (an empty select box) or a widget whose state this client does not model
    (buttons send triggers only; a data editor or an uploader, only what was sent)."""
    ws, value, is_set = WidgetState(id=w.id), None, bool(getattr(w, "set_value", False))
    if which == "checkbox":
        ws.bool_value = w.value if is_set else w.default
        return ws, is_set
    if which in ("radio", "selectbox"):
        if is_set:
            value = w.raw_value if w.HasField("raw_value") else None
        elif w.HasField("default") and 0 <= w.default < len(w.options):
            value = w.options[w.default]
        if value is not None:
            ws.string_value = value
    elif which in ("text_area", "text_input"):
        field = "value" if is_set else "default"
        if w.HasField(field):
            ws.string_value = value = getattr(w, field)
    elif which == "number_input":
        field = "value" if is_set else "default"
        if w.HasField(field):
            value = getattr(w, field)
            if w.data_type == NumberInput.INT:
                ws.int_value = int(value)
            else:
                ws.double_value = value
    elif which == "slider" and w.type == Slider.SELECT_SLIDER:
        value = list(w.raw_value) if is_set else [w.options[int(i)] for i in w.default]
        ws.string_array_value.data[:] = value
    elif which == "slider":
        value = list(w.value if is_set else w.default)
        ws.double_array_value.data[:] = value
    elif which == "button_group":
        value = list(w.raw_values) if is_set else [w.options[i].content for i in w.default]
        ws.string_array_value.data[:] = value
    elif which == "multiselect":
        value = list(w.raw_values) if is_set else [w.options[i] for i in w.default]
        ws.string_array_value.data[:] = value
    return (ws if value is not None else None), is_set


class Client:
    """One session (one browser tab): page hashes, widget ids (by key and by label) with
    the fragment each widget lives in and its last known value, the URL's query string,
    and the last run's alerts, metrics and exception elements."""

    def __init__(self, ws, fragment_reruns: bool | None = None) -> None:
        self.ws = ws
        self.page_hash = ""
        self.pages: dict[str, str] = {}  # url path → page hash
        self.ids: dict[str, str] = {}  # widget key or label → element id
        self.disabled: dict[str, bool] = {}
        self.fragments: dict[str, str] = {}  # element id → its fragment's id ("": none)
        self.states: dict[str, WidgetState] = {}  # element id → last known value
        self.query_string = ""  # the tab's URL, as the app last wrote it
        self.metrics: dict[str, str] = {}
        self.alerts: list[str] = []
        self.exceptions: list[str] = []
        self.markdown: list[str] = []  # markdown, HTML, text, code of the last run
        if fragment_reruns is None:
            fragment_reruns = os.environ.get("SPECDEC_FULL_RERUNS") != "1"
        self.fragment_reruns = fragment_reruns
        self.last_fragment = ""  # the fragment the last rerun asked for ("": a full run)
        self.runs: list[tuple[int, tuple[str, ...]]] = []  # (status, fragments) per run
        self._drawn: set[str] = set()  # widget ids drawn by the run in progress
        # the page as the browser holds it: delta path → (text body, fragment id) of every
        # markdown / HTML / text / code element on screen (see :meth:`page_texts`)
        self.page: dict[tuple[int, ...], tuple[str, str]] = {}
        self._written: set[tuple[int, ...]] = set()  # paths the run in progress drew

    async def send(self, msg: BackMsg) -> None:
        await self.ws.send(msg.SerializeToString())

    async def rerun(self, page: str | None = None, **values) -> float:
        """Rerun (optionally on another page) with widget values: ``click=label`` for a
        button, ``<key>=str`` for a text widget, ``<key>=dict`` for a data editor (JSON).
        A change to a widget inside a fragment reruns only that fragment. Returns the
        click → script-finished time in ms."""
        msg = self.rerun_msg(page, **values)
        started = time.perf_counter()
        await self.send(msg)
        await self._read()
        return (time.perf_counter() - started) * 1e3

    def rerun_msg(self, page: str | None = None, **values) -> BackMsg:
        """The ``BackMsg`` of :meth:`rerun` (shared with the Locust client): every widget
        value the tab knows, the changed ones replaced, a click's trigger last; scoped to
        the fragment of the changed widgets when they all live in one (and no page
        change), as the browser does."""
        msg = BackMsg()
        rerun = msg.rerun_script
        if page is not None:  # a page change drops the page's query parameters
            self.page_hash, self.query_string = self.pages[page], ""
        rerun.page_script_hash = self.page_hash
        rerun.query_string = self.query_string
        changed = [self._state(name, value) for name, value in values.items()]
        for w in changed:
            if w.WhichOneof("value") != "trigger_value":
                self.states[w.id] = w
        rerun.widget_states.widgets.extend(self.states.values())
        rerun.widget_states.widgets.extend(w for w in changed if w.id not in self.states)
        scopes = {self.fragments.get(w.id, "") for w in changed}
        if self.fragment_reruns and page is None and len(scopes) == 1:
            rerun.fragment_id = scopes.pop()  # "" (a full rerun) outside any fragment
        self.last_fragment = rerun.fragment_id
        return msg

    def _state(self, name: str, value) -> WidgetState:
        w = WidgetState()
        if name == "click":
            w.id, w.trigger_value = self.ids[value], True
        elif isinstance(value, dict):
            w.id, w.string_value = self.ids[name], json.dumps(value)
        elif isinstance(value, bool):  # a checkbox or toggle
            w.id, w.bool_value = self.ids[name], value
        elif isinstance(value, float):
            w.id, w.double_value = self.ids[name], value
        elif isinstance(value, int):
            w.id, w.int_value = self.ids[name], value
        else:
            w.id, w.string_value = self.ids[name], value
        return w

    async def clear_cache(self) -> None:
        msg = BackMsg()
        msg.clear_cache = True
        await self.send(msg)

    def reset_run(self) -> None:
        """Forget the last run's elements (a new rerun starts)."""
        self.metrics, self.alerts, self.exceptions, self.markdown = {}, [], [], []
        self.runs = []

    def handle(self, raw: bytes) -> bool:
        """Read one ``ForwardMsg``; True when it ends the script run, a full run
        (``FINISHED_SUCCESSFULLY``) or a fragment run (``FINISHED_FRAGMENT_RUN_SUCCESSFULLY``)
        alike. A run that ends in ``st.rerun()`` (``FINISHED_EARLY_FOR_RERUN``) is not the
        end: its rerun follows, e.g. the full run of a fragment's ``st.rerun(scope="app")``."""
        fm = ForwardMsg()
        fm.ParseFromString(raw)
        kind = fm.WhichOneof("type")
        if kind == "new_session":
            if fm.new_session.page_script_hash:
                self.page_hash = fm.new_session.page_script_hash
            self._drawn = set()
        elif kind == "navigation":
            self.page_hash = fm.navigation.page_script_hash or self.page_hash
            for p in fm.navigation.app_pages:
                self.pages[p.url_pathname] = p.page_script_hash
        elif kind == "page_info_changed":  # the app wrote st.query_params: the tab's URL
            self.query_string = fm.page_info_changed.query_string
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            self._element(fm.delta.new_element, fm.delta.fragment_id)
            self._place(tuple(fm.metadata.delta_path), fm.delta.new_element, fm.delta.fragment_id)
        elif kind == "delta" and fm.delta.WhichOneof("type") == "add_block":
            block = fm.delta.add_block
            if block.WhichOneof("type") == "expandable" and block.expandable.id:
                state = WidgetState(id=block.expandable.id, bool_value=block.expandable.expanded)
                self._widget(block.expandable.id, fm.delta.fragment_id, state, True)
        elif kind == "script_finished":
            status, fragments = fm.script_finished, tuple(fm.metadata.run.fragment_ids)
            self.runs.append((status, fragments))
            self._forget_removed(status, fragments)
            self._clear_stale(status, fragments)
            return status != ForwardMsg.FINISHED_EARLY_FOR_RERUN
        return False

    def _place(self, path: tuple[int, ...], el, fragment: str) -> None:
        """An element drawn at ``path`` replaces what the page held there."""
        which = el.WhichOneof("type")
        self._written.add(path)
        if which in ("markdown", "html", "text"):
            self.page[path] = (getattr(el, which).body, fragment)
        elif which == "code":
            self.page[path] = (el.code.code_text, fragment)
        else:
            self.page.pop(path, None)

    def _clear_stale(self, status: int, fragments: tuple[str, ...]) -> None:
        """As the browser at the end of a run: a full run keeps only what it drew (what a
        run cut short by ``st.rerun`` drew goes, unless drawn again), a fragment run drops
        what its fragments no longer draw; a run cut short removes nothing."""
        if status == ForwardMsg.FINISHED_SUCCESSFULLY:
            self.page = {p: v for p, v in self.page.items() if p in self._written}
        elif status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            self.page = {
                p: v for p, v in self.page.items() if p in self._written or v[1] not in fragments
            }
        self._written = set()

    def page_texts(self) -> list[str]:
        """The markdown, HTML, text and code on screen now, in page order (by delta path):
        what a browser shows after the last run, where :attr:`markdown` is only what the
        last run drew (plus, after a run cut short by ``st.rerun``, what that one drew)."""
        return [body for _, (body, _) in sorted(self.page.items())]

    def _forget_removed(self, status: int, fragments: tuple[str, ...]) -> None:
        """As the browser at the end of a run: drop the values of widgets no longer on the
        page (after a fragment run, only of widgets of that fragment)."""
        if status == ForwardMsg.FINISHED_SUCCESSFULLY:
            gone = [i for i in self.states if i not in self._drawn]
        elif status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            gone = [
                i
                for i in self.states
                if self.fragments.get(i) in fragments and i not in self._drawn
            ]
        else:
            return
        for i in gone:
            del self.states[i]

    async def _read(self) -> None:
        self.reset_run()
        while not self.handle(await asyncio.wait_for(self.ws.recv(), TIMEOUT_S)):
            pass

    def _widget(self, eid: str, fragment: str, state: WidgetState | None, is_set: bool) -> None:
        self.fragments[eid] = fragment
        self._drawn.add(eid)
        if is_set and state is None:
            self.states.pop(eid, None)
        elif state is not None and (is_set or eid not in self.states):
            self.states[eid] = state  # a value the tab had (typed, picked) stays

    def _element(self, el, fragment: str = "") -> None:
        which = el.WhichOneof("type")
        inner = getattr(el, which)
        if which == "metric":
            self.metrics[el.metric.label] = el.metric.body
        elif which in ("markdown", "html", "text"):
            self.markdown.append(inner.body)
        elif which == "code":
            self.markdown.append(inner.code_text)
        elif which == "alert":
            self.alerts.append(el.alert.body)
        elif which == "exception":
            self.exceptions.append(f"{el.exception.type}: {el.exception.message}")
        eid = getattr(inner, "id", "") if hasattr(inner, "id") else ""
        if eid:
            self.ids[eid.rsplit("-", 1)[-1]] = eid  # the user key ends the id
            if getattr(inner, "label", ""):
                self.ids[inner.label] = eid
                self.disabled[inner.label] = bool(getattr(inner, "disabled", False))
            self._widget(eid, fragment, *shown_state(which, inner))


def observe(c: Client) -> str:
    """A digest of what a step-through session saw that depends only on its own clicks:
    the KV metrics, the token strips, the verdicts and the lesson link's state (timings,
    which differ from run to run, left out). Equal digests: the same lesson. The lesson
    link is the tab's URL (the step panel writes it with ``st.query_params``, in a fragment
    run too), and the link box when the Lesson panel is open."""
    seen: list = [sorted(c.metrics.items())]
    for body in c.markdown:
        if body.startswith('<div class="strip"') or "→ **" in body:
            seen.append(body)
        elif "?v=1" in body:
            seen.append(body[body.index("?v=1") :])
    seen.append(c.query_string)
    return hashlib.sha1(json.dumps(seen, ensure_ascii=False).encode()).hexdigest()[:16]


@contextmanager
def connect_url(port: int):
    yield f"ws://127.0.0.1:{port}/_stcore/stream"


async def open_client(url: str) -> tuple[Client, object]:
    ws = await websockets.connect(
        url, subprotocols=["streamlit"], max_size=None, open_timeout=TIMEOUT_S
    )
    client = Client(ws)
    await client.rerun()
    return client, ws


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_server(log_path: Path, **env: str):
    """``streamlit run app.py`` on 127.0.0.1 with ``SPECDEC_PROFILE=1``; yields the port."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
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
            env={**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_PROFILE": "1", **env},
        )
    try:
        for _ in range(180):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        proc.server_port = port  # type: ignore[attr-defined]
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def render_times(log_path: Path) -> list[float]:
    return [float(x) for x in re.findall(r"specdec-render-ms (\d+\.\d)", log_path.read_text())]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def oversized_table(rows: int) -> dict:
    return {
        "edited_rows": {},
        "added_rows": [{"name": f"r{i}", "p": 1.0, "q": 1.0} for i in range(rows)],
        "deleted_rows": [],
    }


# ------------------------------------------------------------------ measurement
async def _victim_clicks(victim: Client, n: int) -> list[float]:
    times = []
    for _ in range(n):
        label = "Run one round"
        if victim.disabled.get(label):
            await victim.rerun(click="Reset")
        times.append(await victim.rerun(click=label))
    return times


async def _scenario(url: str, name: str, attack, clicks: int = 6) -> dict:
    victim, vws = await open_client(url)
    attacker, aws = await open_client(url)
    try:
        base = await _victim_clicks(victim, clicks)
        started = time.perf_counter()
        task = asyncio.ensure_future(attack(attacker))
        await asyncio.sleep(0.05)
        loaded = await _victim_clicks(victim, clicks)
        attack_ms = await asyncio.wait_for(task, TIMEOUT_S * 3)
        return {
            "scenario": name,
            "attacker_ms": round(attack_ms if attack_ms else (time.perf_counter() - started) * 1e3),
            "victim_base_median_ms": round(statistics.median(base)),
            "victim_under_attack_median_ms": round(statistics.median(loaded)),
            "victim_under_attack_max_ms": round(max(loaded)),
            "attacker_alerts": [a[:120] for a in attacker.alerts],
            "attacker_exceptions": attacker.exceptions[:2],
        }
    finally:
        await vws.close()
        await aws.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _speed_jobs(url: str, pid: int, n_jobs: int = 6, clicks: int = 6) -> dict:
    """``n_jobs`` students press "Sweep γ" at once, then close their tabs."""
    victim, vws = await open_client(url)
    base = await _victim_clicks(victim, clicks)
    attackers = []
    for _ in range(n_jobs):
        c, ws = await open_client(url)
        await c.rerun(page="speed")
        await c.send(c.rerun_msg(click="Sweep γ = 1…8"))  # do not wait: the sweep runs on
        attackers.append(ws)
    await asyncio.sleep(0.5)
    loaded = await _victim_clicks(victim, clicks)
    for ws in attackers:  # the tabs close
        await ws.close()
    await asyncio.sleep(3)
    after_close = await _victim_clicks(victim, clicks)
    await vws.close()
    await asyncio.sleep(2)
    cpu0 = cpu_seconds(pid)
    await asyncio.sleep(10)  # nobody connected: is the server still measuring?
    idle_cpu = cpu_seconds(pid) - cpu0
    return {
        "scenario": f"{n_jobs} speed sweeps at once, then tabs closed",
        "victim_base_median_ms": round(statistics.median(base)),
        "victim_during_median_ms": round(statistics.median(loaded)),
        "victim_during_max_ms": round(max(loaded)),
        "victim_after_close_median_ms": round(statistics.median(after_close)),
        "server_cpu_s_in_10_s_after_all_tabs_closed": round(idle_cpu, 1),
    }


async def _measure(url: str, pid: int) -> list[dict]:
    def big_prompt(chars: int):
        async def attack(c: Client) -> float:
            total, started = 0.0, time.perf_counter()
            try:
                for _ in range(3):  # a click after the prompt: is it tokenized again?
                    total += await c.rerun(st_prompt=("To be or not to be. " * chars)[:chars])
            except websockets.ConnectionClosed:  # over server.maxMessageSize: refused
                c.alerts.append("connection closed by the server (message too large)")
                return (time.perf_counter() - started) * 1e3
            return total / 3

        return attack

    async def big_table(c: Client) -> float:
        await c.rerun(page="acceptance_lab")
        key = next(k for k in c.ids if k.startswith("rl_editor_"))
        total = 0.0
        for _ in range(3):
            total += await c.rerun(**{key: oversized_table(2000)})
        return total / 3

    async def cache_clear(c: Client) -> float:
        before = rss_mb(pid)
        for _ in range(3):
            await c.clear_cache()
            await asyncio.sleep(0.2)
            fresh, fws = await open_client(url)
            await fws.close()
        return rss_mb(pid) - before  # MB grown (reported in the ms slot)

    results = []
    if os.environ.get("CLASSROOM_ONLY_SPEED") == "1":
        return [await _speed_jobs(url, pid)]
    for name, attack in (
        ("3 MB prompt", big_prompt(3_000_000)),
        ("1 MB prompt", big_prompt(1_000_000)),
        ("2000-row table", big_table),
        ("3 forged cache clears (RSS +MB)", cache_clear),
    ):
        results.append(await _scenario(url, name, attack))
    if os.environ.get("CLASSROOM_SPEED", "1") == "1":
        results.append(await _speed_jobs(url, pid))
    return results


# ------------------------------------------------------------------ the hostile probe
# Each attack is one coroutine in ATTACKS (name → function). It gets a
# ProbeContext, sets up its pressure, sets ``ctx.ready``, keeps the pressure on until
# ``ctx.release`` is set (an honest classmate clicks meanwhile), stops, and returns
# ``{"facts": str, "ok": bool}`` (``ok``: its own pass criterion, e.g. new visitors got a
# page). :func:`probe` runs each against an honest classmate's clicks before / during /
# after and prints one table row per attack. Clients live on different loopback addresses,
# so nginx and the app tell them apart: the classmate 127.0.0.1, the attacker 127.0.0.2, the
# teacher 127.0.0.3 (``SPECDEC_TEACHER_ADDRS`` of the probed server).
VICTIM_ADDR, ATTACKER_ADDR, TEACHER_ADDR = "127.0.0.1", "127.0.0.2", "127.0.0.3"
HOLD_S = 60.0  # no attack keeps its pressure on longer than this, whatever happens
VISITOR_TIMEOUT_S = 5.0  # a new visitor must get its page / websocket within this


class ProbeContext:
    """What an attack needs: nginx's ``http`` and websocket ``ws`` addresses, the replica's
    pid and log file, and the two events of the protocol above."""

    def __init__(self, http: str, ws: str, pid: int, log: Path) -> None:
        self.http, self.ws, self.pid, self.log = http, ws, pid, log
        self.ready = asyncio.Event()
        self.release = asyncio.Event()

    async def client(self, addr: str = ATTACKER_ADDR, page: str | None = None) -> Client:
        """A new tab from ``addr`` (its first run finished; on ``page`` if given)."""
        ws = await websockets.connect(
            self.ws,
            subprotocols=["streamlit"],
            max_size=None,
            open_timeout=TIMEOUT_S,
            local_addr=(addr, 0),
        )
        c = Client(ws)
        await c.rerun()
        if page is not None:
            await c.rerun(page=page)
        return c

    async def held(self) -> None:
        """Wait (at most :data:`HOLD_S`) until the classmate's clicks are done."""
        self.ready.set()
        try:
            await asyncio.wait_for(self.release.wait(), HOLD_S)
        except TimeoutError:
            pass


def log_bytes(log: Path) -> int:
    """Bytes of a replica's log and its rotated copies (``replica0.log``, ``….1``, …)."""
    return sum(f.stat().st_size for f in log.parent.glob(log.name + "*") if f.is_file())


async def new_visitors(ctx: ProbeContext, n: int = 10) -> tuple[int, int]:
    """How many of ``n`` page loads and of ``n`` websocket handshakes (from the classmate's
    address) finish within :data:`VISITOR_TIMEOUT_S` each."""

    def page() -> bool:
        try:
            with urllib.request.urlopen(ctx.http + "/", timeout=VISITOR_TIMEOUT_S) as r:
                return r.status == 200 and b"<html" in r.read(4096).lower()
        except OSError:
            return False

    async def handshake() -> bool:
        try:
            ws = await websockets.connect(
                ctx.ws, subprotocols=["streamlit"], open_timeout=VISITOR_TIMEOUT_S
            )
        except (OSError, TimeoutError, websockets.WebSocketException):
            return False
        await ws.close()
        return True

    pages = sum([await asyncio.to_thread(page) for _ in range(n)])
    sockets = sum([await handshake() for _ in range(n)])
    return pages, sockets


HALF_OPEN = b"GET / HTTP/1.1\r\nHost: x\r\n"  # no final blank line: nginx waits for more
HALF_OPEN_N = int(os.environ.get("PROBE_HALF_OPEN", 3000))


async def _hold_half_open(
    host: str, port: int, n: int, stop: asyncio.Event, seconds: float, stats: dict
) -> None:
    """Hold ``n`` half-open requests from :data:`ATTACKER_ADDR` (each one reopened 0.5 s
    after nginx closes it) until ``stop`` is set or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds

    async def hold_one() -> None:
        while time.monotonic() < deadline and not stop.is_set():
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(host, port, local_addr=(ATTACKER_ADDR, 0)), 5
                )
                w.write(HALF_OPEN)
                await w.drain()
            except (OSError, TimeoutError):
                stats["refused"] += 1
                await asyncio.sleep(0.5)
                continue
            stats["opened"] += 1
            stats["held"] += 1
            read = asyncio.ensure_future(r.read(1))
            halt = asyncio.ensure_future(stop.wait())
            await asyncio.wait(
                {read, halt},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            stats["held"] -= 1
            read.cancel()
            halt.cancel()
            w.close()
            if read.done():  # closed by nginx: open another one a moment later
                stats["closed_by_nginx"] += 1
                await asyncio.sleep(0.5)

    tasks = []
    for i in range(0, n, 250):  # in waves: the listen backlog is 511
        tasks += [asyncio.ensure_future(hold_one()) for _ in range(min(250, n - i))]
        await asyncio.sleep(0.1)
    await asyncio.wait(tasks, timeout=seconds + 15)


def hold_main(spec: str) -> None:
    """The holding process (``--hold-half-open HOST:PORT:N:SECONDS``): raises its file
    limit, holds, prints its counts as one JSON line every 0.2 s, stops when its stdin
    closes or after SECONDS. A process of its own: its 3,000 sockets do not share an event
    loop (or a GIL) with the classmate whose clicks are timed."""
    import resource

    host, port, n, seconds = spec.rsplit(":", 3)
    n_, soft_hard = int(n), resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, hard = soft_hard
    want = n_ + 256 if hard == resource.RLIM_INFINITY else min(hard, n_ + 256)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    stats = {"held": 0, "opened": 0, "closed_by_nginx": 0, "refused": 0}

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, sys.stdin.read).add_done_callback(
            lambda _f: loop.call_soon_threadsafe(stop.set)
        )
        hold = asyncio.ensure_future(
            _hold_half_open(host, int(port), n_, stop, float(seconds), stats)
        )
        while not hold.done():
            print(json.dumps(stats), flush=True)
            await asyncio.sleep(0.2)
        print(json.dumps(stats), flush=True)

    asyncio.run(run())
    os._exit(0)  # the stdin reader thread may still wait


async def half_open_flood(ctx: ProbeContext, n: int | None = None) -> dict:
    """``n`` half-open requests held open to nginx from one address by another process
    (:func:`hold_main`), then 10 page loads and 10 websocket handshakes from a new
    visitor while they are held."""
    n = n or HALF_OPEN_N
    host, port = ctx.http.removeprefix("http://").rsplit(":", 1)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "--hold-half-open",
        f"{host}:{port}:{n}:{HOLD_S + 30}",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    stats = {"held": 0, "opened": 0, "closed_by_nginx": 0, "refused": 0}

    async def follow() -> None:
        while line := await proc.stdout.readline():
            stats.update(json.loads(line))

    reader = asyncio.ensure_future(follow())
    try:
        for _ in range(300):  # up to 30 s until all are held (the process starts first)
            if stats["held"] >= n:
                break
            await asyncio.sleep(0.1)
        held_at_start = stats["held"]
        started = time.perf_counter()
        pages, sockets = await new_visitors(ctx)
        visit_s = time.perf_counter() - started
        held_after = stats["held"]
        await ctx.held()
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
        await asyncio.wait_for(reader, 5)
    held = min(held_at_start, held_after)
    return {
        "ok": pages == 10 and sockets == 10,
        "pages": pages,
        "sockets": sockets,
        "held": held,
        "facts": (
            f"{held}–{max(held_at_start, held_after)} of {n} held (another process); new visitors: "
            f"{pages}/10 pages, {sockets}/10 websockets in {visit_s:.1f} s; nginx closed "
            f"{stats['closed_by_nginx']}, refused {stats['refused']}"
        ),
    }


async def no_attack(ctx: ProbeContext) -> dict:
    """Nothing: the classmate's own noise (the first row of the table)."""
    await ctx.held()
    return {"ok": True, "facts": "nobody attacks: the spread of an idle classmate's clicks"}


def malformed(c: Client, chars: int = 1300) -> BackMsg:
    """A rerun whose seed box (a whole-number input) holds ``chars`` letters: Streamlit
    fails to read it before the script runs and logs the traceback (≈ 1.3 KB sent)."""
    msg = c.rerun_msg()
    for w in msg.rerun_script.widget_states.widgets:
        if w.id == c.ids.get("cfg_seed"):
            w.string_value = "x" * chars
    return msg


LOG_FLOOD_RATE = 50  # messages a second
LOG_FLOOD_S = 20.0  # the flood lasts this long at most (and at least while the classmate
# clicks)
LOG_BOUND = 100_000  # bytes a flood may add to the log (the guard: 5 × ≤ 16 KB + 1 line)


async def log_flood(ctx: ProbeContext) -> dict:
    """A student sends :func:`malformed` reruns at :data:`LOG_FLOOD_RATE` a second (each
    waits for its run) for :data:`LOG_FLOOD_S`; the replica's log growth is measured."""
    c = await ctx.client()
    msg = malformed(c)
    size0 = log_bytes(ctx.log)
    sent, started = 0, time.perf_counter()
    ctx.ready.set()
    while time.perf_counter() - started < LOG_FLOOD_S:
        if ctx.release.is_set() and time.perf_counter() - started >= LOG_FLOOD_S / 2:
            break
        t0 = time.perf_counter()
        await c.send(msg)
        await asyncio.wait_for(c._read(), TIMEOUT_S)
        sent += 1
        await asyncio.sleep(max(0.0, 1 / LOG_FLOOD_RATE - (time.perf_counter() - t0)))
    seconds = time.perf_counter() - started
    await asyncio.sleep(1.0)  # the last records reach the file
    await c.ws.close()
    grown = log_bytes(ctx.log) - size0
    text = ctx.log.read_text(errors="replace")
    full = text.count("Uncaught app execution\nTraceback")
    return {
        "ok": grown <= LOG_BOUND,
        "messages": sent,
        "log_bytes": grown,
        "facts": (
            f"{sent} malformed messages ({len(msg.SerializeToString()):,} B each) "
            f"in {seconds:.0f} s: "
            f"log +{grown / 1e3:,.1f} KB ({grown / max(sent, 1):,.0f} B a message; {full} "
            f"tracebacks in full in the log so far)"
        ),
    }


async def _press(c: Client, label: str) -> str:
    """Press ``label`` on the speed page: the refusal's text, or "" when the job was taken
    (the run then waits on the job and does not finish within 5 s, or finishes quietly)."""
    try:
        await asyncio.wait_for(c.rerun(click=label), 5)
    except TimeoutError:
        pass
    return next((a for a in c.alerts if a.startswith("Nothing was changed")), "")


async def queue_fill(ctx: ProbeContext, tabs: int = 6) -> dict:
    """One student's ``tabs`` tabs (one address) press "Sweep γ" one after another, then
    the teacher (:data:`TEACHER_ADDR`) presses "Measure"; the tabs stay open while the
    classmate clicks, then close (their jobs are cancelled with their sessions)."""
    clients = [await ctx.client(ATTACKER_ADDR, page="speed") for _ in range(tabs)]
    answers = [await _press(c, "Sweep γ = 1…8") for c in clients]
    teacher = await ctx.client(TEACHER_ADDR, page="speed")
    teacher_answer = await _press(teacher, "Measure")
    await ctx.held()
    for c in [*clients, teacher]:
        await c.ws.close()
    taken = sum(not a for a in answers)

    def short(alert: str) -> str:
        for part, name in (
            ("from your computer", "one per computer"),
            ("kept for the teacher", "student places full"),
            ("queue is full", "queue full"),
            ("already have", "one per tab"),
        ):
            if part in alert:
                return name
        return alert.removeprefix("Nothing was changed: ")[:60]

    why = sorted({short(a) for a in answers if a})
    return {
        "ok": taken == 1 and not teacher_answer,
        "facts": (
            f"{tabs} tabs of one student: {taken} queued, {tabs - taken} refused "
            f"({'; '.join(why) or '–'}); the teacher: "
            + (f"refused ({short(teacher_answer)})" if teacher_answer else "queued")
        ),
    }


def _p(xs: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` ∈ (0, 1] of ``xs`` (ms)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-int(q * 100) * len(s) // 100) - 1))]


async def _classmate(c: Client, n: int, done: list[str], seen: list[str]) -> list[float]:
    """``n`` step-through clicks (Reset when a lesson is finished): click times (ms); the
    labels go to ``done``, what the tab showed after each to ``seen``."""
    times = []
    for _ in range(n):
        label = "Reset" if c.disabled.get("Run one round") else "Run one round"
        times.append(await c.rerun(click=label))
        done.append(label)
        seen.append(observe(c) if not c.exceptions else "exception: " + c.exceptions[0])
    return times


async def probe_one(ctx: ProbeContext, name: str, attack, clicks: int) -> dict:
    """One row: the classmate's clicks before / during / after ``attack``, its state
    (replayed alone afterwards in a fresh tab: the same clicks must show the same), and the
    verdict (during p95 ≤ 2 × before p95, state unchanged, the attack's own ``ok``)."""
    victim = await ctx.client(VICTIM_ADDR)
    done: list[str] = []
    seen: list[str] = []
    try:
        before = await _classmate(victim, clicks, done, seen)
        task = asyncio.ensure_future(attack(ctx))
        try:
            await asyncio.wait_for(ctx.ready.wait(), HOLD_S + 60)
        except TimeoutError:
            pass
        during = await _classmate(victim, clicks, done, seen) if not task.done() else []
        ctx.release.set()
        result = await asyncio.wait_for(task, HOLD_S + 120)
        await asyncio.sleep(1)
        after = await _classmate(victim, clicks, done, seen)
    finally:
        await victim.ws.close()
    replay = await ctx.client(VICTIM_ADDR)
    again: list[str] = []
    for label in done:
        if label not in replay.ids:  # the replay's page lacks the button: not the same tab
            print(
                "replay: no",
                label,
                replay.alerts,
                replay.exceptions,
                replay.markdown[:3],
                file=sys.stderr,
            )
            break
        await replay.rerun(click=label)
        again.append(observe(replay) if not replay.exceptions else "x")
    await replay.ws.close()
    unchanged = again == seen and not any(s.startswith("exception") for s in seen)
    row = {
        "attack": name,
        "before": before,
        "during": during,
        "after": after,
        "unchanged": unchanged,
        **result,
    }
    if not unchanged:
        pairs = enumerate(zip(seen, again, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), min(len(seen), len(again)))
        row["facts"] += f"; the classmate's tab differs from its replay from click {first + 1}"
    p95 = _p(before, 0.95)
    row["verdict"] = (
        "pass"
        if (during and _p(during, 0.95) <= 2 * p95 and unchanged and result["ok"])
        else "FAIL"
    )
    return row


def table(rows: list[dict]) -> str:
    """The README table: attack, the classmate's p50 / p95 (ms) before / during / after,
    state, verdict, what the attack saw."""

    def pp(xs: list[float]) -> str:
        return f"{_p(xs, 0.5):,.0f} / {_p(xs, 0.95):,.0f}" if xs else "–"

    out = [
        "| attack | classmate p50 / p95 before | during | after | classmate's state | "
        "verdict | what happened |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['attack']} | {pp(r['before'])} ms | {pp(r['during'])} ms | "
            f"{pp(r['after'])} ms | {'unchanged' if r['unchanged'] else 'CHANGED'} | "
            f"{r['verdict']} | {r['facts']} |"
        )
    return "\n".join(out)


ATTACKS = {
    "none": no_attack,
    "half-open flood": half_open_flood,
    "log flood": log_flood,
    "queue fill": queue_fill,
}
# The hostile inputs (links, files, fast reruns, uploads, amplification): one
# module of their own, given this one (the probe runs as __main__).
import probe_attacks  # noqa: E402

ATTACKS.update(probe_attacks.attacks(sys.modules[__name__]))


def probe(names: list[str] | None = None, clicks: int = 10, env: dict | None = None) -> list:
    """Start one replica behind nginx (``deploy/replicas.py``, loopback), run the chosen
    attacks one after another, stop everything; returns the rows (see :func:`table`)."""
    sys.path.insert(0, str(REPO / "deploy"))
    import replicas

    chosen = {k: v for k, v in ATTACKS.items() if not names or k in names}
    rows = []
    env = {"SPECDEC_TEACHER_ADDRS": TEACHER_ADDR, **(env or {})}
    with replicas.cluster(1, env=env) as run:
        for name, attack in chosen.items():
            ws = run.url.replace("http", "ws", 1) + "/_stcore/stream"
            ctx = ProbeContext(run.url, ws, run.replicas[0].pid, run.logs / "replica0.log")
            row = asyncio.run(
                asyncio.wait_for(probe_one(ctx, name, attack, clicks), 3 * HOLD_S + 600)
            )
            print(
                json.dumps(
                    {k: v for k, v in row.items() if k not in ("before", "during", "after")},
                    ensure_ascii=False,
                ),
                flush=True,
            )
            rows.append(row)
    return rows


def issue19() -> None:
    """The first class's figures (huge prompts, an oversized table, forged cache clears, six
    measurements at once) against one server without nginx."""
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "classroom_ws.log"
    with app_server(log) as proc:
        url = f"ws://127.0.0.1:{proc.server_port}/_stcore/stream"
        results = asyncio.run(_measure(url, proc.pid))
    loads = len(re.findall(r"specdec-pair-load", log.read_text()))
    renders = render_times(log)
    for r in results:
        print(json.dumps(r, ensure_ascii=False))
    print(
        json.dumps(
            {
                "pair_loads_logged": loads,
                "server_render_ms_max": max(renders),
                "server_render_ms_median": statistics.median(renders),
            }
        )
    )


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="The classroom probe (loopback only).")
    parser.add_argument("--attacks", help=f"comma-separated, of: {', '.join(ATTACKS)}")
    parser.add_argument("--clicks", type=int, default=10, help="classmate clicks per phase")
    parser.add_argument("--issue19", action="store_true", help="the first class's figures instead")
    parser.add_argument(
        "--hold-half-open", metavar="HOST:PORT:N:SECONDS", help=argparse.SUPPRESS
    )  # the half-open flood's own process
    args = parser.parse_args()
    if args.hold_half_open:
        hold_main(args.hold_half_open)
        return
    if args.issue19:
        issue19()
        return
    names = [a.strip() for a in args.attacks.split(",")] if args.attacks else None
    unknown = set(names or ()) - set(ATTACKS)
    if unknown:
        parser.error(f"unknown attack(s): {', '.join(sorted(unknown))}")
    print(table(probe(names, args.clicks)))


if __name__ == "__main__":
    main()
