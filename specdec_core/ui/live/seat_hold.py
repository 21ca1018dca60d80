"""A student's seat is held by one client (address) at a time (the store's rule:
:mod:`specdec_core.server.room_seats`), so a leaked seat cookie does not act as the seat from
another network: this session claims its seat before it joins, beats or answers
(:func:`claim`), and while another client holds it the status box says so
(:func:`held_line`: the seat id to tell the teacher, and when it frees itself), the seat
waits unjoined (nothing is counted or sent) and every beat tries again. A reload or a
second tab (the same address) keeps the seat; a student whose address changed takes it
back once the old screen was quiet for the lease, or at once when the teacher releases it
(the seat list's "Release")."""

from __future__ import annotations

import math

import streamlit as st

from specdec_core.server.room_store import make_store
from specdec_core.ui.i18n import t
from specdec_core.ui.live.identity import client

HELD = "live_held_s"  # (seat id, seconds left of another client's hold), while refused


def claim(code: str, student: str) -> bool:
    """Hold ``student``'s seat in room ``code`` for this session's client: ``True`` when
    it is this client's now; ``False`` (kept in :data:`HELD`) while another holds it.
    Raises ``RoomError`` (a gone room, a store fault) as the store does."""
    wait = make_store().hold(code, {student: client()}).get(student)
    if wait is None:
        st.session_state.pop(HELD, None)
        return True
    st.session_state[HELD] = (student, wait)
    return False


def held_line(label) -> None:
    """The one line of a refused claim (``label``: the seat id as the teacher's list
    shows it); nothing while this client holds its seat."""
    held = st.session_state.get(HELD)
    if held is not None:
        seat, wait = label(held[0]), max(1, math.ceil(held[1]))
        st.warning(t("live_seat_held", seat=seat, s=wait), icon=":material/devices_other:")
