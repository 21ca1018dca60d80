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

    python benchmarks/classroom_ws.py   # before/after figures for issue 19's high items

Every loop is bounded; the server is started on 127.0.0.1 and stopped at the end.
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
        elif kind == "delta" and fm.delta.WhichOneof("type") == "add_block":
            block = fm.delta.add_block
            if block.WhichOneof("type") == "expandable" and block.expandable.id:
                state = WidgetState(id=block.expandable.id, bool_value=block.expandable.expanded)
                self._widget(block.expandable.id, fm.delta.fragment_id, state, True)
        elif kind == "script_finished":
            status, fragments = fm.script_finished, tuple(fm.metadata.run.fragment_ids)
            self.runs.append((status, fragments))
            self._forget_removed(status, fragments)
            return status != ForwardMsg.FINISHED_EARLY_FOR_RERUN
        return False

    def _forget_removed(self, status: int, fragments: tuple[str, ...]) -> None:
        """As the browser at the end of a run: drop the values of widgets no longer on the
        page (after a fragment run, only of widgets of that fragment)."""
        if status == ForwardMsg.FINISHED_SUCCESSFULLY:
            gone = [i for i in self.states if i not in self._drawn]
        elif status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            gone = [i for i in self.states
                    if self.fragments.get(i) in fragments and i not in self._drawn]  # fmt: skip
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
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port),
             "--browser.gatherUsageStats", "false"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_PROFILE": "1", **env},
        )  # fmt: skip
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
    for name, attack in (("3 MB prompt", big_prompt(3_000_000)),
                         ("1 MB prompt", big_prompt(1_000_000)), ("2000-row table", big_table),
                         ("3 forged cache clears (RSS +MB)", cache_clear)):  # fmt: skip
        results.append(await _scenario(url, name, attack))
    if os.environ.get("CLASSROOM_SPEED", "1") == "1":
        results.append(await _speed_jobs(url, pid))
    return results


def main() -> None:
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "classroom_ws.log"
    with app_server(log) as proc:
        url = f"ws://127.0.0.1:{proc.server_port}/_stcore/stream"
        results = asyncio.run(_measure(url, proc.pid))
    loads = len(re.findall(r"specdec-pair-load", log.read_text()))
    renders = render_times(log)
    for r in results:
        print(json.dumps(r, ensure_ascii=False))
    print(json.dumps({"pair_loads_logged": loads, "server_render_ms_max": max(renders),
                      "server_render_ms_median": statistics.median(renders)}))  # fmt: skip


if __name__ == "__main__":
    main()
