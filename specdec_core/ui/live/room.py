"""This browser session's seat in a live class: the store, who we are in the room (the
teacher, holding the secret teacher key, or a student), the room's query parameters,
publishing the teacher's lesson state, and the store's faults.

Session-state keys (``st.session_state``):

* :data:`SEAT` — a :class:`Seat` (``None`` / absent: not in a room).
* :data:`ERROR` — a :class:`~specdec_core.server.room_types.RoomError` to show once (a bad
  room code: one translated message, ``err_room_unknown``, no hint whether it exists).
* :data:`PUBLISHED` — the teacher's last published ``(page, state)`` (only a change is).
* :data:`FAULT` — ``(retry_at, delay_s)`` while the store does not answer: one translated
  line, the store left alone until ``retry_at`` (back-off 1, 2, 4 … 16 s).

URL: ``?room=CODE`` joins as a student (once per browser session, :func:`on_load`);
``?room=CODE&teacher=KEY`` (the teacher link) claims the room back as its teacher, or as a
co-teacher with the co-teacher key (drives the class, cannot end it). The teacher key
never stays in the address bar, nor is it in the join link. A student's URL keeps ``room``.
The seat credential: :mod:`~specdec_core.ui.live.identity` (never in a URL); one address
holds a seat at a time: :mod:`~specdec_core.ui.live.seat_hold`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from typing import Literal

import streamlit as st

from specdec_core.server.jobs import is_teacher as teacher_address
from specdec_core.server.room_limits import BUCKETS, TABS, wait_s
from specdec_core.server.room_store import make_store
from specdec_core.server.room_types import RoomError, RoomView
from specdec_core.server.rooms import RoomStore
from specdec_core.ui.live import converge, frames, seat_hold
from specdec_core.ui.live.identity import browser_secret, client, seat_id, tab_id
from specdec_core.ui.step.links import ALWAYS_PARAMS, AfterWrite

SEAT = "live_seat"
ERROR = "live_error"
URL_READ = "live_url_read"
PUBLISHED = "live_published"
CLAIMED = "live_claimed"  # a teacher link was opened: the screen goes to the room's state once
FAULT = "live_fault"  # (retry_at, delay_s) while the store does not answer
UNPUBLISHED = "live_unpublished"  # (page, params) the store did not take (a fault)
ENDED = "live_ended"  # the class this student (or co-teacher) followed ended or expired
ENDED_ROOM = "live_ended_room"  # (code, key) of the class this teacher ended: its results
URL_PARAMS = ALWAYS_PARAMS  # {name: value} the URL keeps on every page (room)
FAULTS = ("room_store",)  # errors that keep the seat: the store did not answer
MAX_BACKOFF_S = 16.0
STORE_PAGE = {"step_through": "step", "lessons": "lessons"}  # app page stem -> store page
APP_PAGE = {v: k for k, v in STORE_PAGE.items()}
#: Query parameters that belong to the room, never to the published lesson state.
ROOM_PARAMS = ("room", "teacher", "sid")


def poll_seconds() -> float:
    """How often a follower and the teacher's dashboard poll the store (seconds):
    ``SPECDEC_LIVE_POLL_S`` (0.25..10), default 1. Each poll reads one version number."""
    try:
        value = float(os.environ.get("SPECDEC_LIVE_POLL_S", "1"))
    except ValueError:
        return 1.0
    return min(10.0, max(0.25, value)) if math.isfinite(value) else 1.0


_CODE_CHARS = 32  # longer "codes" from a URL go no further than this check
_KEY_CHARS = 128


@dataclass(frozen=True)
class Seat:
    """``role``: ``teacher`` (holds ``key``) or ``student`` (is ``student``, the seat id:
    16 hex digits of :func:`seat_id`); ``joined``: the store has the seat (``False``
    while a join waits for the store to answer); ``co``: a teacher seat that holds the
    co-teacher key (drives the class, cannot end it)."""

    role: Literal["teacher", "student"]
    code: str
    key: str = ""
    student: str = ""
    joined: bool = True
    co: bool = False


# ---------------------------------------------------------------- store faults
def fault(exc: RoomError) -> None:
    """The store did not answer: back off (1, 2, 4 … 16 s) and say so on every screen."""
    S = st.session_state
    _, delay = S.get(FAULT, (0.0, 0.5))
    delay = min(MAX_BACKOFF_S, delay * 2)
    S[FAULT] = (time.monotonic() + delay, delay)


def waiting() -> bool:
    """Whether this session leaves the store alone for now (a fault's back-off)."""
    held = st.session_state.get(FAULT)
    return held is not None and time.monotonic() < held[0]


def answered() -> None:
    """The store answered: the fault line goes."""
    st.session_state.pop(FAULT, None)


def fault_line() -> None:
    """One translated line while the store does not answer (every screen in a room)."""
    if FAULT in st.session_state:
        from specdec_core.ui.errors import error_message

        st.warning(error_message(RoomError("room_store")), icon=":material/cloud_off:")


def store() -> RoomStore:
    """The process-wide room store (SQLite by default, Redis with ``SPECDEC_REDIS_URL``;
    :func:`specdec_core.server.room_store.make_store`)."""
    return make_store()


def seat() -> Seat | None:
    return st.session_state.get(SEAT)


def is_teacher() -> bool:
    s = seat()
    return s is not None and s.role == "teacher"


def is_student() -> bool:
    s = seat()
    return s is not None and s.role == "student"


def start_room() -> None:
    """Button callback: create a room; this session becomes its teacher (a store error,
    e.g. ``rooms_full``, is kept in :data:`ERROR`)."""
    S = st.session_state
    who = client()
    try:
        code, key = store().create(who, exempt=teacher_address(who))
    except RoomError as exc:
        S[ERROR] = exc
        return
    answered()
    S[SEAT] = Seat("teacher", code, key=key)
    S.pop(PUBLISHED, None)
    S.pop(ERROR, None)


def leave() -> None:
    """Leave the room (the teacher closes it first and keeps its code and key for the
    results; a co-teacher just leaves). Errors are ignored: leaving always works."""
    S = st.session_state
    s = seat()
    if s is not None and s.role == "teacher" and not s.co:
        try:
            store().close(s.code, s.key)
            S[ENDED_ROOM] = (s.code, s.key)
        except RoomError:
            pass
    for key in (SEAT, PUBLISHED, ERROR, FAULT):
        S.pop(key, None)
    S[URL_PARAMS] = {}
    for name in ROOM_PARAMS:
        if name in st.query_params:
            del st.query_params[name]


def fail(exc: RoomError) -> None:
    """The room is gone or refused us (expired, closed, a wrong key): keep the message (a
    follower's: :data:`ENDED`), leave the seat. A store fault keeps the seat: :func:`fault`."""
    if exc.code in FAULTS:
        fault(exc)
        return
    S, s = st.session_state, seat()
    S.pop(FAULT, None)
    S.pop(SEAT, None)
    S[URL_PARAMS] = {}
    if exc.code == "room_unknown" and s is not None and (s.role == "student" or s.co):
        S[ENDED] = True  # one message, whichever call saw it
    else:
        S[ERROR] = exc
    for name in ROOM_PARAMS:  # a reload does not try the gone room again
        if name in st.query_params:
            del st.query_params[name]


def on_load() -> Seat | None:
    """Every full run (``app.py``, before the sidebar): once per browser session, a
    ``?room=`` in the URL joins the room as a student, ``?room=&teacher=`` claims it as
    its teacher (a bad code or key: one message, :data:`ERROR`, and no seat). Returns
    the new seat, or ``None``."""
    return _read_url()


def publisher() -> AfterWrite | None:
    """The hook to pass to ``write_url`` (``app.py``) and ``fragment_run`` (the step
    panel): :func:`publish` for a teacher, ``None`` for anyone else (nobody else pays for
    it)."""
    return publish if is_teacher() else None


def _read_url() -> Seat | None:
    S = st.session_state
    if S.get(URL_READ):
        return None
    S[URL_READ] = True
    code = (st.query_params.get("room") or "").strip()[:_CODE_CHARS]
    if not code:
        return None
    key = (st.query_params.get("teacher") or "").strip()[:_KEY_CHARS]
    if "teacher" in st.query_params:
        del st.query_params["teacher"]  # never left in the address bar
    try:
        if key:
            return _claim(code, key)
        return _join(code)
    except RoomError as exc:
        fail(exc)
        if exc.code in FAULTS:  # no seat to show the fault line on: say it once
            st.session_state[ERROR] = exc
        if "room" in st.query_params:
            del st.query_params["room"]
        return None


def _join(code: str) -> Seat | None:
    """Join as this browser's seat, within the address's join and guess rates (a refused
    try: ``room_slow``; a store fault: the seat waits, :func:`heartbeat` joins it). A
    class that ended (its results still kept) says so (:data:`ENDED`), at no guess."""
    who = client()
    wait = BUCKETS.wait("guess", who) or BUCKETS.take("join", who)
    if wait:
        raise RoomError("room_slow", wait=wait_s(wait))
    sid = seat_id(code.upper(), browser_secret())
    try:
        if held := seat_hold.claim(code, sid):  # else another address holds it: it waits
            store().join(code, sid)
    except RoomError as exc:
        if exc.code == "room_unknown" and store().ended(code):  # no guess: it ended
            st.session_state[ENDED] = True
            return None
        if exc.code == "room_unknown":
            BUCKETS.take("guess", who)
        if exc.code not in FAULTS:
            raise
        fault(exc)
        held = False
    seat = Seat("student", code, student=sid, joined=held)
    TABS.claim(sid, tab_id(), who)  # the newest tab of the browser follows fast (F5 too)
    st.session_state[SEAT] = seat
    st.session_state[URL_PARAMS] = {"room": code}
    if "sid" in st.query_params:
        del st.query_params["sid"]  # an old link's id is not this browser's seat
    return seat


def heartbeat() -> None:
    """A student's poll: join again (the seat's heartbeat, or the join a fault held
    back). A removed seat or a gone room ends the seat with its message."""
    s = seat()
    if s is None or s.role != "student" or waiting():
        return
    try:
        if held := seat_hold.claim(s.code, s.student):  # else another address holds it
            store().join(s.code, s.student)
    except RoomError as exc:
        fail(exc)
        return
    answered()
    if s.joined != held:  # not held: nothing is counted or sent here until it frees
        st.session_state[SEAT] = replace(s, joined=held)


def _claim(code: str, key: str) -> Seat:
    """The teacher link: the store says whose key it is (the teacher's or the
    co-teacher's; a refused key costs a guess of the address's bucket); the screen then
    goes to the room's state (``follow.apply`` on the next step; while paused, the moment
    the followers hold)."""
    s = store()
    who = client()
    wait = BUCKETS.wait("guess", who)
    if wait:
        raise RoomError("room_slow", wait=wait_s(wait))
    try:
        role = s.role(code, key)
    except RoomError as exc:
        if exc.code in ("room_key", "room_unknown"):
            BUCKETS.take("guess", who)
        raise
    view = s.view(code)
    seat = Seat("teacher", code, key=key, co=role == "co")
    st.session_state[SEAT] = seat
    st.session_state[PUBLISHED] = (view.page, dict(view.state))
    st.session_state[CLAIMED] = True
    if not view.paused:  # the screen goes to the class's moment: the compare-and-set base
        converge.agreed(view.version)
    st.session_state[URL_PARAMS] = {}
    if "room" in st.query_params:
        del st.query_params["room"]
    return seat


def view() -> RoomView | None:
    """The room as the store has it now (``None`` outside a room; a gone room ends the
    seat with its message)."""
    s = seat()
    if s is None:
        return None
    try:
        got = store().view(s.code, every_run=s.role == "teacher")  # a late reveal
    except RoomError as exc:
        fail(exc)
        return None
    answered()
    return got


def publish(page: str, params: dict[str, str]) -> None:
    """After :func:`specdec_core.ui.step.links.write_url` (every full run and every step
    panel click): the teacher publishes the lesson state on screen when it changed (the
    step page's or the Lessons page's; other pages are not published)."""
    s = seat()
    if s is None or s.role != "teacher" or page not in STORE_PAGE:
        return
    state = {k: str(v) for k, v in params.items() if k not in ROOM_PARAMS}
    now = (STORE_PAGE[page], state)
    if st.session_state.get(PUBLISHED) == now:
        return
    try:
        if converge.moved_on(store(), s.code, st.session_state.get(PUBLISHED)) is not None:
            st.session_state[converge.HELD] = True  # never pulls the class back: the
            return  # dashboard's poll brings this screen to the class's moment
        frames.publish_frame(store(), (s.code, s.key), page, now)  # followers draw it as is
        base = st.session_state.get(converge.SYNCED)  # compare-and-set: two drivers' clicks
        converge.agreed(store().publish(s.code, s.key, *now, base=base))
    except RoomError as exc:  # a gone room or a wrong key: say so at once (a new run)
        if exc.code == "room_moved":  # the other driver's click won: as moved_on above
            st.session_state[converge.HELD] = True
            return
        fail(exc)
        if exc.code in FAULTS:  # not published: the dashboard's next poll tries again
            st.session_state[UNPUBLISHED] = (page, params)
            return
        st.rerun()
    answered()
    st.session_state.pop(UNPUBLISHED, None)
    st.session_state[PUBLISHED] = now
