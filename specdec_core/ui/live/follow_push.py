"""A following student's tab on the push route (``ui/live/push_view``): what its fragment
mounts and when the tab runs at all. At rest a pushed tab runs no script: the teacher's
steps are drawn by the component, and the push hub keeps the seat's heartbeat and the tab's
place as its seat's fast tab (``server/live_push_seats``: the page signs the seat into the
socket's URL). The fragment runs when the component asks (the room moved, another tab took
the place, the hub's heartbeat was refused) or the student acts; it beats every
``PUSH_BEAT_S`` only while something waits on this tab (:func:`beat_needed`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from specdec_core.server.live_push import question_key
from specdec_core.server.live_push_seats import HUB_SEATS, token
from specdec_core.server.room_types import RoomView
from specdec_core.ui.i18n import lang
from specdec_core.ui.live import push_view, room
from specdec_core.ui.live.answer import PENDING
from specdec_core.ui.live.identity import client, tab_id

SELF_BEAT = "live_self_beat"  # session key: the hub cannot keep this tab's seat


def beat_needed(view: RoomView | None) -> bool:
    """Whether the tab beats on its own: a countdown running on ``view``'s question (its
    line counts down, and it closes with no change to push), an answer the store has not
    confirmed, a fault's back-off, a seat not joined yet, or a hub that cannot keep the seat
    (a token it did not make; ``SPECDEC_LIVE_HUB_SEATS=0``)."""
    S, s = st.session_state, room.seat()
    quiet = HUB_SEATS and not S.get(SELF_BEAT) and not room.waiting()
    q = None if view is None else (view.held if view.paused else view.question)
    ticking = q is not None and not q.revealed and q.closes_at is not None and not view.paused
    ticking = ticking and time.time() < q.closes_at + 1.0
    return not quiet or ticking or bool(S.get(PENDING)) or (s is not None and not s.joined)


def mount(view: RoomView, on_moved: Callable[[], None]) -> None:
    """The push component for ``view``'s room, and what its trigger of this run asks:
    ``nopush`` (the browser cannot hold the socket: the tab polls from now on),
    ``seat:refused`` (join here: the store says why), ``seat:unsigned`` (beat here)."""
    S = st.session_state
    shown = f"{view.page}|{question_key(view)}"
    s = room.seat()
    seat = None if s is None or not HUB_SEATS else token(s.code, s.student, tab_id(), client())
    moved = str(push_view.pushed(view.code, lang(), shown, on_moved, seat))
    if moved == "nopush":
        S[push_view.NO_PUSH] = True
    elif moved.startswith("seat:refused"):
        room.heartbeat()
    elif moved.startswith("seat:unsigned"):
        S[SELF_BEAT] = True
    else:
        return
    st.rerun(scope="app")
