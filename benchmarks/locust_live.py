"""Locust users for a live class: teachers who run a room and students who
follow it, speaking the app's websocket protocol (``/_stcore/stream``) as a browser tab.

Run through ``benchmarks/live_class.py`` (starts two replicas behind nginx and the store,
runs this file as a process, adds CPU, memory and store operations), or by hand against
a running server (loopback only):

    python benchmarks/locust_live.py --host http://127.0.0.1:8500 --rooms 30,30 \\
        --rounds 4 --out /tmp/live.json

Users (``locust.User``, driven through Locust's library API so the run ends when the
lesson does): one :class:`Teacher` per room (``--rooms 30,30``: two rooms at once, for
the cross-talk check) and the rooms' :class:`Student`\\ s. A teacher opens the step page
on its room's own lesson link (the rooms differ in prompt, so their states never
coincide), presses "Start a live class" (key ``live_start_step``) and reads the room code
from its projector card; then, for each round: ① Propose, asks the class "will position
1 be accepted?" (``live_kind`` / ``live_k`` defaults, ``live_ask``), waits until everyone
answered (or ``--answer-wait`` s), presses Reveal (``live_reveal``: ② Verify first, then
the reveal) and ③ Commit. A student opens ``?room=CODE`` and follows; when a question
appears it answers (the radio ``live_answer_<qid>``, a seeded choice after a seeded
1–4 s). Students open the link spread over ``--storm`` s (a join storm). Every bot also
does what the browser does with ``st.fragment(run_every=…)``: on the server's
``auto_rerun`` message it sends a fragment rerun (``is_auto_rerun``) every interval,
whatever else is going on; and with the push components (``live_tabs``): a follower opens
the push socket its page mounts and sends the component's triggers, the teacher holds the
dashboard's votes socket. ``--hosts``: the replicas' own addresses, in turn (no proxy).

What is timed (wall clock of this one process; server and bots share the machine):

* ``follow``: teacher's click sent → a pushed follower's socket receives the new state's
  frame (its digest names the state the teacher's URL carries); a follower without the
  push route: the end of the first run after which its URL carries that state (the ``s``
  parameter the teacher published); per follower and click;
* ``join_push``: the join link opened → the first frame pushed (the teacher's moment);
* ``answer``: a student's answer sent → the end of the first teacher run whose chart
  (the Plotly figure's bar heights) counts that many answers (answers of one question
  in the order they were sent);
* ``reveal``: Reveal sent → a follower shows the outcome (the success / error / info box
  under the question);
* cross-talk: every lesson state a follower ever shows must be one its own teacher
  published and none of the other room's; and the follower's token strip at that state
  (pushed: the frame's) must equal its teacher's page's.

Joins and answers are Locust requests (``join``, ``answer``; a broken tab, a lost click
or an answer never counted a failure); follow and reveal times, cross-talk and strips are
worked out at the end (:func:`analyse`, once every click's state is known); all raw
samples go to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import itertools
import json
import os
import random
import re
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl

import gevent
import websocket
from gevent.event import Event
from locust import User, events, task  # patches the standard library (gevent)
from locust.exception import StopUser
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_tabs import PUSH, VOTES, PushTab, VotesTab, strip_body  # noqa: E402
from locust_classroom import SyncClient  # noqa: E402

TIMEOUT_S = 180  # the longest any one wait lasts (a starved machine)
CLICK_WAIT_S = 60  # a teacher's click that changed nothing after this is sent again …
CLICKS = 3  # … at most this many times in all
PROPOSE, VERIFY, COMMIT = "① Propose", "② Verify", "③ Commit / reject"
PLAN: dict = {  # set by main(), or by SPECDEC_LIVE_PLAN (JSON) for ``locust -f`` by hand
    "rooms": [30, 30],
    "rounds": 4,
    "think_s": 3.0,
    "answer_wait_s": 25.0,
    "idle_s": 10.0,
    "storm_s": 20.0,  # each room's students open the join link spread over this
    "seed": 0,
    "links": [],  # per room: the teacher's starting lesson link (query string)
}
PLAN.update(json.loads(os.environ.get("SPECDEC_LIVE_PLAN", "{}")))
SAMPLES: dict[str, list] = {
    "follow": [],
    "answer": [],
    "reveal": [],
    "join": [],
    "crosstalk": [],
    "strip_mismatch": [],
    "strips_compared": [],
    "unknown_state": [],
    "answers_sent": [],
    "seen": [],
    "idle": [],
    "clicked_again": [],
    "revealed": [],
    "errors": [],
    "pushed": [],  # [room, student, s, time, strip] per push message with a frame
    "join_push": [],  # [room, student index, ms]: join link opened → first frame pushed
    "click_windows": [],  # [room, label, sent, end of the teacher's think]
    "votes_triggers": [],
    "push_triggers": [],
}


def unpack_state(query: str) -> dict | None:
    """The lesson state a URL query string carries (``s``: zlib + base64url JSON of the
    fields that differ from the defaults), or ``None``."""
    packed = (parse_qs(query).get("s") or [""])[0]
    if not packed:
        return None
    try:
        raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
        return json.loads(zlib.decompress(raw))
    except (ValueError, zlib.error):
        return None


def state_param(query: str) -> str:
    return (parse_qs(query).get("s") or [""])[0]


ROOM_PARAMS = ("room", "teacher", "sid")  # ui/live/room: never part of the published state


def push_digest(query: str) -> str:
    """The state digest a push message names the teacher's URL state by (16 hex digits of
    ``server/room_frames.state_digest`` of the step page's state: the URL's parameters
    less the room's), computed here without importing the app."""
    state = {k: v for k, v in parse_qsl(query, keep_blank_values=True) if k not in ROOM_PARAMS}
    text = json.dumps(["step", state], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Room:
    """What one room's teacher and students share inside this process (gevent)."""

    def __init__(self, index: int, size: int) -> None:
        self.index, self.size = index, size
        self.code = ""
        self.ready, self.done = Event(), Event()
        self.ready_at = 0.0  # when the teacher's room opened (the join storm starts)
        self.joined: set[int] = set()
        # s → when the click that made it was sent (None: the state the room opened with)
        self.published: dict[str, float | None] = {}
        self.digests: dict[str, str] = {}  # push digest (16 hex) → s
        self.strip_bodies: dict[str, str] = {}  # s → the teacher's token strip (its body)
        self.strips: dict[str, str] = {}  # s → digest of the teacher's token strips
        self.answers: list[float] = []  # send times of the open question's answers
        self.reveal_sends: list[float] = []  # when each Reveal was sent
        self.asked = 0  # questions asked so far (an answer counts for the one it saw)


ROOMS: list[Room] = []
_students = itertools.count()
_teachers = itertools.count()


def rooms() -> list[Room]:
    if not ROOMS:
        ROOMS.extend(Room(i, n) for i, n in enumerate(PLAN["rooms"]))
    return ROOMS


def strips_of(texts: list[str]) -> list[str]:
    return [b for b in texts if b.startswith('<div class="strip"')]


def strip_digest(texts: list[str]) -> str:
    strips = strips_of(texts)
    return hashlib.sha1("".join(strips).encode()).hexdigest()[:12] if strips else ""


#: digest → the strips it was made of (a mismatch's both sides go to the samples)
STRIPS: dict[str, list[str]] = {}


def shown_strips(c: LiveClient) -> str:
    """The digest of the token strips on the page after the run that just ended, as the
    browser shows them (``Client.page_texts``: a run cut short by ``st.rerun`` leaves only
    what the next run did not redraw), not every strip element received since the last
    finished run (which, after a cut-short run that drew strips, holds both runs')."""
    texts = c.page_texts()
    digest = strip_digest(texts)
    if digest:
        STRIPS.setdefault(digest, strips_of(texts))
    return digest


def run_kinds(c) -> list[int]:
    """The statuses of the runs that led to the page just finished (a cut-short run's
    ``FINISHED_EARLY_FOR_RERUN`` first)."""
    return [status for status, _ in c.runs]


CODE = re.compile(r"room=([A-HJ-NP-Z2-9]{6})\b")


class _Answers:
    """``key in ANSWERS``: the key of a question's answer radio (``live_answer_<qid>``),
    not another radio of the page (the sidebar's language)."""

    def __contains__(self, key: str) -> bool:
        return key.startswith("live_answer_")


ANSWERS = _Answers()


class LiveClient(SyncClient):
    """:class:`SyncClient` that also keeps ``st.fragment(run_every=…)`` timers as the
    browser does (on the server's ``auto_rerun`` message: a fragment rerun every interval,
    whatever else is going on) and hands each finished run to ``on_run`` with what it
    drew: ``run_markdown`` (markdown, HTML, code), ``run_chart`` (the Plotly bar heights,
    ``None`` when the run drew no chart) and ``run_radios`` (key → options, disabled)."""

    def __init__(self, host: str, query: str = "") -> None:
        super().__init__(host)
        self.query_string = query
        self.auto: dict[str, list[float]] = {}  # fragment id → [interval, next due]
        self._chart: list[int] | None = None
        self._radios: dict[str, tuple[list[str], bool]] = {}
        self.run_markdown: list[str] = []
        self.run_chart: list[int] | None = None
        self.run_radios: dict[str, tuple[list[str], bool]] = {}
        self.run_alerts: list[str] = []  # the last alerts and exceptions drawn (diagnosis)
        self.run_exceptions: list[str] = []
        self.run_count = 0
        # runs finished that redrew the page outside any fragment (a whole-page run). Not
        # the status alone: seen, the reveal's full run (the whole page, 136 elements,
        # 0.5 s after the click) ended FINISHED_FRAGMENT_RUN_SUCCESSFULLY when the votes
        # socket's trigger of the dashboard came in meanwhile, and a wait for
        # FINISHED_SUCCESSFULLY stalled the teacher bot 180 s (the page was long drawn)
        self.full_runs = 0
        self._page_drawn = False  # the run in progress drew outside any fragment
        self.run_keys: set[str] = set()  # the widget keys the last run drew
        self.running = False  # a script run is in progress (session_status_changed)
        self.on_run = None
        # the push components on the page (``live_tabs``): name → id, fragment, data
        self.components: dict[str, dict] = {}
        self.drawn_components: set[str] = set()  # on screen after the last run
        self._components_now: set[str] = set()  # drawn by the run in progress
        self.run_components: set[str] = set()  # drawn by the run that just ended

    def handle(self, raw: bytes) -> bool:
        fm = ForwardMsg()
        fm.ParseFromString(raw)
        kind = fm.WhichOneof("type")
        if kind == "session_status_changed":
            self.running = fm.session_status_changed.script_is_running
        elif kind == "auto_rerun":  # as the browser: a new interval restarts the timer
            fid, interval = fm.auto_rerun.fragment_id, fm.auto_rerun.interval
            if self.auto.get(fid, [None])[0] != interval:
                self.auto[fid] = [interval, time.time() + interval]
        elif kind == "stop_auto_rerun":
            for fid in fm.stop_auto_rerun.fragment_ids:
                self.auto.pop(fid, None)
        elif kind == "delta" and fm.delta.WhichOneof("type") == "add_block":
            block = fm.delta.add_block  # a keyed expander's open state is a widget value
            if block.WhichOneof("type") == "expandable" and block.expandable.id:
                self.ids[block.expandable.id.rsplit("-", 1)[-1]] = block.expandable.id
        if kind == "delta" and not fm.delta.fragment_id:
            self._page_drawn = True
        if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            el = fm.delta.new_element
            which = el.WhichOneof("type")
            if which == "plotly_chart" and el.plotly_chart.spec:
                spec = json.loads(el.plotly_chart.spec)
                self._chart = [int(y) for y in spec["data"][0].get("y", [])]
            elif which == "radio" and el.radio.id:
                key = el.radio.id.rsplit("-", 1)[-1]
                self._radios[key] = (list(el.radio.options), bool(el.radio.disabled))
            elif which == "bidi_component":
                self._component(el.bidi_component, fm.delta.fragment_id)
        elif (
            kind == "script_finished" and fm.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN
        ):
            ran = set(fm.metadata.run.fragment_ids)
            if fm.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                self.drawn_components = set(self._components_now)
            else:  # a fragment run: what its fragments no longer draw is gone
                self.drawn_components = {
                    n for n in self.drawn_components if self.components[n]["fragment"] not in ran
                } | self._components_now
            self.run_components, self._components_now = self._components_now, set()
        done = super().handle(raw)
        if done:
            self.run_markdown, self.run_chart = list(self.markdown), self._chart
            self.run_radios = self._radios
            self._chart, self._radios = None, {}
            self.run_alerts = (self.run_alerts + self.alerts)[-10:]
            self.run_exceptions = (self.run_exceptions + self.exceptions)[-10:]
            self.run_count += 1
            full = self.runs and self.runs[-1][0] == ForwardMsg.FINISHED_SUCCESSFULLY
            if self._page_drawn or full:
                self.full_runs += 1
            self._page_drawn = False
            self.run_keys = {i.rsplit("-", 1)[-1] for i in self._drawn}
            if self.on_run is not None:
                self.on_run(self)
            self.reset_run()
        return done

    def _component(self, el, fragment: str) -> None:
        name = next((n for n in (PUSH, VOTES) if el.component_name.endswith(n)), None)
        if os.environ.get("SPECDEC_BOT_DEBUG"):
            say(f"component {el.component_name} in fragment {fragment!r}")
        if name is None:
            return
        raw = el.json or (el.mixed.json if el.HasField("mixed") else "")
        data = json.loads(raw) if raw else {}
        self.components[name] = {"id": el.id, "fragment": fragment, "data": data}
        self._components_now.add(name)

    def send_rerun(self, page: str | None = None, **values) -> float:
        """Send a click or a widget change (scoped as the browser scopes it) without
        waiting for its run; returns when it was sent (Unix time, s)."""
        msg = self.rerun_msg(page, **values)
        self.ws.send_binary(msg.SerializeToString())
        return time.time()

    def _auto_rerun(self, fid: str) -> None:
        msg = self.rerun_msg()
        msg.rerun_script.fragment_id = fid
        msg.rerun_script.is_auto_rerun = True
        self.ws.send_binary(msg.SerializeToString())

    def pump(self, seconds: float) -> None:
        """Read messages for ``seconds``, sending the fragment timers' reruns when due."""
        end = time.time() + seconds
        while (now := time.time()) < end:
            for fid, timer in list(self.auto.items()):
                if timer[1] <= now:
                    self._auto_rerun(fid)
                    timer[1] = now + timer[0]
            due = min([end] + [timer[1] for timer in self.auto.values()])
            self.ws.settimeout(max(0.01, due - time.time()))
            try:
                raw = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            self.handle(raw)

    def pump_until(self, ready, timeout_s: float = TIMEOUT_S) -> bool:
        """Pump until ``ready()`` (checked after each message batch) or the timeout."""
        end = time.time() + timeout_s
        while time.time() < end:
            if ready():
                return True
            self.pump(0.05)
        return bool(ready())


def fire(env, name: str, ms: float, error: Exception | None = None) -> None:
    env.events.request.fire(
        request_type="LIVE",
        name=name,
        response_time=ms,
        response_length=0,
        exception=error,
        context={},
    )


def host_for(index: int, default: str) -> str:
    """``--hosts`` (the replicas' own ports, standing in for separate machines): user
    ``index`` goes to one of them in turn, so a room's students sit on every replica and its
    teacher on one; else the proxy's address."""
    hosts = PLAN.get("hosts") or []
    return hosts[index % len(hosts)] if hosts else default


def say(text: str) -> None:
    """One progress line on stderr (``live_class.py`` keeps it in ``locust.log``)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def fail(env, name: str, text: str) -> None:
    SAMPLES["errors"].append(f"{name}: {text}")
    fire(env, name, 0, RuntimeError(text))


class Teacher(User):
    """Runs one room: start, then rounds of ① Propose / ask / Reveal / ③ Commit."""

    fixed_count = len(PLAN["rooms"])  # one per room
    weight = 0

    def on_start(self) -> None:
        self.room = rooms()[next(_teachers)]
        self.counts: list[tuple[float, int]] = []  # (run end, answers counted)
        self.votes: VotesTab | None = None  # the dashboard's votes socket, once mounted

    def on_stop(self) -> None:
        self.room.done.set()  # never leave the students waiting

    @task
    def lesson(self) -> None:
        room, links = self.room, PLAN.get("links") or []
        self.host = host_for(room.index, self.host)
        c = LiveClient(self.host, links[room.index] if room.index < len(links) else "")
        c.on_run = self._seen
        try:
            c.click()
            c.send_rerun(lt_open=True)  # open the Lesson panel (a lazy expander)
            if not c.pump_until(lambda: "live_start_step" in c.ids, 60):
                raise RuntimeError("no 'Start a live class' button in the Lesson panel")
            c.send_rerun(click="live_start_step")
            if not c.pump_until(lambda: bool(self._code(c)), 60):
                raise RuntimeError("no room code on the teacher's card")
            room.code = self._code(c)
            c.pump(1.0)
            self._published(c, None)  # the room's first state
            room.ready_at = time.time()
            room.ready.set()
            say(f"room {room.index} {room.code} open; waiting for {room.size} students")
            c.pump_until(lambda: len(room.joined) >= room.size, 240)
            c.pump(2.0)
            say(f"room {room.index}: {len(room.joined)} joined; idle {PLAN['idle_s']} s")
            idle = time.time()
            c.pump(PLAN["idle_s"])  # only the polls: their cost alone (live_class.py)
            SAMPLES["idle"].append([room.index, idle, time.time()])
            for n in range(PLAN["rounds"]):
                say(f"room {room.index}: round {n + 1}")
                if c.disabled.get(PROPOSE, True):
                    break
                self._step(c, PROPOSE)
                self._question(c)
                self._step(c, COMMIT)
        except Exception as e:  # noqa: BLE001 - reported, then the room ends
            fail(self.environment, "teacher", f"room {room.index}: {type(e).__name__}: {e}")
        finally:
            say(f"room {room.index}: done")
            room.done.set()
            c.pump(2.0)
            if self.votes is not None:
                SAMPLES["votes_triggers"].append([room.index, self.votes.triggers])
                self.votes.close()
            c.ws.close()
        raise StopUser

    def _published(self, c: LiveClient, sent: float | None) -> None:
        """The state now in the teacher's URL, timed from ``sent``, under its URL ``s``
        and the digest the push messages name it by."""
        s = state_param(c.query_string)
        self.room.published.setdefault(s, sent)
        self.room.digests.setdefault(push_digest(c.query_string), s)

    @staticmethod
    def _code(c: LiveClient) -> str:
        for body in c.run_markdown:
            if m := CODE.search(body):
                return m.group(1)
        return ""

    def _seen(self, c: LiveClient) -> None:
        """After each teacher run: the strips drawn at this state, and the answer count."""
        s, digest = state_param(c.query_string), shown_strips(c)
        if s and digest and s not in self.room.strips:
            self.room.strips[s] = digest
            SAMPLES.setdefault("teacher_seen", []).append(
                [self.room.index, s, digest, run_kinds(c)]
            )
        if s and s not in self.room.strip_bodies:
            body = next((strip_body(x) for x in c.page_texts() if strip_body(x)), "")
            if body:
                self.room.strip_bodies[s] = body
        if c.run_chart is not None:
            self.counts.append((time.time(), sum(c.run_chart)))
        if VOTES in c.run_components:  # the dashboard's votes socket, as the browser's
            if self.votes is None:
                self.votes = VotesTab(c, self.host)
                say(f"room {self.room.index}: the votes socket opened")
            else:
                self.votes.rendered()

    def _click(self, c: LiveClient, key: str, sends: list[float] | None = None) -> float:
        """Click ``key`` once the page is idle (again, as a teacher would, when nothing
        moved for :data:`CLICK_WAIT_S`; counted in ``clicked_again``); the new lesson
        state it publishes is timed from the first click (its send time also appended to
        ``sends``)."""
        before, first = state_param(c.query_string), None
        for _ in range(CLICKS):
            c.pump_until(lambda: not c.running, TIMEOUT_S)
            sent = c.send_rerun(click=key)
            first = first or sent
            if c.pump_until(lambda: state_param(c.query_string) != before, CLICK_WAIT_S):
                break
            SAMPLES["clicked_again"].append([self.room.index, key])
        else:
            raise RuntimeError(
                f"{key}: the lesson state did not change; last alerts {c.run_alerts[-3:]}, "
                f"exceptions {c.run_exceptions[-3:]}, runs {c.run_count}"
            )
        if sends is not None:
            sends.append(first)
        self._published(c, first)
        return first

    def _step(self, c: LiveClient, label: str) -> None:
        sent = self._click(c, label)
        c.pump(PLAN["think_s"])
        SAMPLES["click_windows"].append([self.room.index, label, sent, time.time()])

    def _question(self, c: LiveClient) -> None:
        """Ask "will position 1 be accepted?", wait for the answers, reveal."""
        room = self.room
        room.answers, self.counts = [], []
        room.asked += 1
        if not c.pump_until(lambda: "live_ask" in c.run_keys, TIMEOUT_S):  # the next poll
            raise RuntimeError("no 'Ask the class' button after ① Propose")
        c.send_rerun(click="live_ask")
        if not c.pump_until(lambda: bool(self.counts), TIMEOUT_S):
            raise RuntimeError("the question's chart never appeared")
        c.pump_until(
            lambda: (
                self.counts[-1][1] >= room.size
                or len(room.answers) >= room.size
                and self.counts[-1][1] >= len(room.answers)
            ),
            PLAN["answer_wait_s"],
        )
        c.pump_until(lambda: self.counts[-1][1] >= len(room.answers), 10)
        for k, t_sent in enumerate(sorted(room.answers), start=1):
            shown = next((t for t, n in self.counts if n >= k and t >= t_sent), None)
            if shown is None:
                fail(self.environment, "answer", f"room {room.index}: answer {k} never counted")
            else:
                SAMPLES["answer"].append([room.index, (shown - t_sent) * 1e3])
                fire(self.environment, "answer", (shown - t_sent) * 1e3)
        c.pump(1.0)
        full = c.full_runs
        self._click(c, "live_reveal", room.reveal_sends)  # ② Verify + reveal
        # the reveal redraws the whole page (a full run): a click before it ends is lost
        c.pump_until(lambda: c.full_runs > full and not c.running, TIMEOUT_S)
        c.pump(PLAN["think_s"])


class Student(User):
    """Follows one room; answers each question once, a seeded choice after 1–4 s."""

    weight = 1

    def on_start(self) -> None:
        self.index = next(_students)
        bounds = list(itertools.accumulate(PLAN["rooms"]))
        self.room = rooms()[next(i for i, b in enumerate(bounds) if self.index < b)]
        self.rng = random.Random(PLAN["seed"] * 1_000_003 + self.index)
        self.last_s = ""
        self.answered: set[str] = set()
        self.revealed: set[str] = set()
        self.first_frame: float | None = None  # when the first frame was pushed

    @task
    def follow(self) -> None:
        room = self.room
        if not room.ready.wait(300):
            fail(self.environment, "join", f"room {room.index} never opened")
            raise StopUser
        order = self.index - (sum(PLAN["rooms"][: room.index]))  # 0 … size-1 in the room
        # the join storm: the class opens the link spread over storm_s (both rooms at once)
        gevent.sleep(max(0.0, room.ready_at + order * PLAN["storm_s"] / room.size - time.time()))
        started = time.time()
        self.host = host_for(self.index, self.host)
        c = LiveClient(self.host, f"room={room.code}")
        c.on_run = self._seen
        tab = None
        try:
            c.click()
            if not c.pump_until(
                lambda: PUSH in c.components or ("live_explore" in c.ids and self.last_s), 60
            ):
                raise RuntimeError("not following after 60 s")
            if PUSH in c.components:  # the component's socket, as the browser opens it
                tab = PushTab(c, self.host, lambda now, m: self._pushed(started, now, m))
                if not c.pump_until(lambda: self.first_frame is not None, 60):
                    raise RuntimeError("no frame pushed after 60 s")
            ms = ((self.first_frame or time.time()) - started) * 1e3
            SAMPLES["join"].append([room.index, ms])
            SAMPLES["join_push"].append([room.index, order, ms, started])
            fire(self.environment, "join", ms)
            room.joined.add(self.index)
            answer_at, asked = None, 0
            while not room.done.is_set():
                c.pump(0.2)
                open_q = [k for k, (_, off) in c.run_radios.items() if not off and k in ANSWERS]
                key = open_q[0] if open_q else None
                if key is None or key in self.answered:
                    continue
                if answer_at is None:
                    answer_at = time.time() + self.rng.uniform(1.0, 4.0)
                    asked = room.asked  # the question this radio belongs to
                elif time.time() >= answer_at:
                    choice = self.rng.choice(c.run_radios[key][0])
                    sent = c.send_rerun(**{key: choice})
                    if asked == room.asked:  # not a late answer to a revealed question
                        room.answers.append(sent)
                    SAMPLES["answers_sent"].append([room.index, self.index, key, choice])
                    self.answered.add(key)
                    answer_at = None
            c.pump(1.5)
        except Exception as e:  # noqa: BLE001 - a broken tab is counted
            fail(self.environment, "student", f"{type(e).__name__}: {e}")
        finally:
            if tab is not None:
                SAMPLES["push_triggers"].append([room.index, self.index, tab.triggers])
                tab.close()
            c.ws.close()
        raise StopUser

    def _pushed(self, started: float, now: float, m: dict) -> None:
        """A push message: a frame (the teacher's step drawn on this screen) is timed."""
        html = m.get("html")
        if not isinstance(html, str):
            return
        if self.first_frame is None:
            self.first_frame = now
        body = strip_body(html)
        digest = hashlib.sha1(body.encode()).hexdigest()[:12] if body else ""
        if digest:
            STRIPS.setdefault(digest, [body])
        SAMPLES["pushed"].append([self.room.index, self.index, str(m.get("s")), now, digest])

    def _seen(self, c: LiveClient) -> None:
        """After each run: a new lesson state in the URL, and a question newly revealed,
        with the time (matched with the teachers' clicks in :func:`analyse`, once every
        click's state is known: a follower may show a state before its teacher's own run
        has ended)."""
        room, now = self.room, time.time()
        s = state_param(c.query_string)
        if s and s != self.last_s:
            self.last_s = s
            SAMPLES["seen"].append([room.index, self.index, s, now, shown_strips(c)])
            SAMPLES.setdefault("seen_runs", []).append([room.index, self.index, s, run_kinds(c)])
        for key, (_, off) in c.run_radios.items():
            if off and key in ANSWERS and key not in self.revealed:
                self.revealed.add(key)
                SAMPLES["revealed"].append([room.index, now])


def analyse() -> None:
    """Follow and reveal latencies, cross-talk and strip equality from the raw samples: a
    pushed follower's from its push messages (its URL does not move: the screen is drawn
    by the component), any other's from its page runs' URL."""
    pushed = {(r, i) for r, i, *_ in SAMPLES["pushed"]}
    first: dict[tuple[int, int, str], float] = {}
    for index, student, d16, seen, digest in SAMPLES["pushed"]:
        room = rooms()[index]
        other = [r.index for r in rooms() if r is not room and d16 in r.digests]
        if other:
            SAMPLES["crosstalk"].append([index, other[0], d16])
            continue
        s = room.digests.get(d16)
        if s is None:
            SAMPLES["unknown_state"].append([index, d16])
            continue
        if (index, student, s) in first:
            continue  # the same state again (a question opened): drawn already
        first[(index, student, s)] = seen
        if room.published.get(s) is not None:
            SAMPLES["follow"].append([index, (seen - room.published[s]) * 1e3])
            SAMPLES.setdefault("follow_by_click", []).append(
                [index, d16, (seen - room.published[s]) * 1e3]
            )
        want = room.strip_bodies.get(s)
        if want and digest:
            SAMPLES["strips_compared"].append(index)
            wanted = hashlib.sha1(want.encode()).hexdigest()[:12]
            if digest != wanted:
                STRIPS.setdefault(wanted, [want])
                SAMPLES["strip_mismatch"].append([index, "pushed", s, digest, wanted])
    for index, student, s, seen, digest in SAMPLES["seen"]:
        room = rooms()[index]
        if (index, student) in pushed and all(
            s not in r.published for r in rooms() if r is not room
        ):
            continue  # a pushed follower's URL state: timed by its push messages above
        other = [r.index for r in rooms() if r is not room and s in r.published]
        if other:
            SAMPLES["crosstalk"].append([index, other[0], s[:16]])
        elif s not in room.published:
            SAMPLES["unknown_state"].append([index, s[:16]])
        elif room.published[s] is not None:
            SAMPLES["follow"].append([index, (seen - room.published[s]) * 1e3])
        want = room.strips.get(s)
        if want and digest:
            SAMPLES["strips_compared"].append(index)
            if digest != want:
                state = unpack_state(f"s={s}") or {}
                where = [state.get("round", 0), state.get("phase", "propose")]
                SAMPLES["strip_mismatch"].append([index, where, s, digest, want])
    for index, seen in SAMPLES["revealed"]:
        sent = [t for t in rooms()[index].reveal_sends if t <= seen]
        if sent:
            SAMPLES["reveal"].append([index, (seen - max(sent)) * 1e3])


def main() -> None:
    """Run the class through Locust's library API: the teachers and students of
    ``--rooms``, until every teacher is done (or ``--timeout``); samples to ``--out``."""
    from locust.env import Environment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--rooms", default="30,30", help="students per room")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--think", type=float, default=3.0, help="teacher's pause, s")
    parser.add_argument("--answer-wait", type=float, default=25.0)
    parser.add_argument("--idle", type=float, default=10.0, help="polls alone, s")
    parser.add_argument("--storm", type=float, default=20.0, help="joins spread over, s")
    parser.add_argument(
        "--hosts", default="[]", help="JSON list: replicas' own addresses (no proxy), in turn"
    )
    parser.add_argument("--links", default="[]", help="JSON list: each room's lesson link")
    parser.add_argument("--spawn-rate", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    PLAN.update(
        rooms=[int(n) for n in args.rooms.split(",")],
        rounds=args.rounds,
        think_s=args.think,
        answer_wait_s=args.answer_wait,
        idle_s=args.idle,
        storm_s=args.storm,
        hosts=json.loads(args.hosts),
        links=json.loads(args.links),
        seed=args.seed,
    )
    Teacher.fixed_count = len(PLAN["rooms"])  # one per room
    env = Environment(user_classes=[Teacher, Student], host=args.host, events=events)
    runner = env.create_local_runner()
    started = time.time()
    runner.start(len(PLAN["rooms"]) + sum(PLAN["rooms"]), spawn_rate=args.spawn_rate)
    deadline = started + args.timeout
    while time.time() < deadline:
        gevent.sleep(0.5)
        if len(rooms()) == len(PLAN["rooms"]) and all(r.done.is_set() for r in rooms()):
            break
    gevent.sleep(2.0)
    runner.quit()
    analyse()
    out = {
        "plan": {k: v for k, v in PLAN.items() if k != "links"},
        "started": started,
        "ended": time.time(),
        "published": [len(r.published) for r in rooms()],
        "clicks": [{"published": r.published, "digests": r.digests} for r in rooms()],
        "samples": SAMPLES,
        "mismatched_strips": {
            d: STRIPS.get(d, []) for m in SAMPLES["strip_mismatch"] for d in (m[3], m[4])
        },
    }
    text = json.dumps(out)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
