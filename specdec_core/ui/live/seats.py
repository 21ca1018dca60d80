"""The teacher's list of seats: who is in the room, "Release" for a seat held by another
device or address (the student's new phone or network takes it at once: one address holds a
seat at a time, ``server/room_seats``) and "Remove" for a seat (a ghost, a second device, a
student who should not answer). Drawn in the dashboard under a toggle, so
the list is read from the store (one read a poll) only while the teacher looks at it. The
list is in the order of the seat ids, which a heartbeat never changes (a row stays where
the teacher aims), and every student's screen shows its own seat id (:func:`own_line`), so
the teacher finds the row to remove.

Widget keys: ``live_seats_on`` — toggle "Seats"; ``live_remove_<seat id>`` /
``live_release_<seat id>`` — buttons "Remove" / "Release" of one seat.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.server.room_types import RoomError
from specdec_core.ui.i18n import t
from specdec_core.ui.live import room

MAX_SHOWN = 60  # seats listed (in seat id order); the rest as a count


def label(student: str) -> str:
    """A seat as the list shows it: the first 6 digits of its id, upper case (the id
    comes from a hash: it names the seat, never the browser's secret)."""
    return student[:6].upper()


def own_line(where=st) -> None:
    """A student's own seat id as the teacher's list shows it, in ``where`` (a container of
    the status box)."""
    s = room.seat()
    if s is not None and s.role == "student":
        where.caption(t("live_your_seat", seat=label(s.student)))


def _remove(student: str) -> None:
    _teacher_call(room.store().remove, student)


def _release(student: str) -> None:
    _teacher_call(room.store().release, student)


def _teacher_call(fn, student: str) -> None:
    s = room.seat()
    if s is None or s.role != "teacher":
        return
    try:
        fn(s.code, s.key, student)
    except RoomError as exc:
        if exc.code in room.FAULTS:
            room.fault(exc)
        else:
            st.session_state[room.ERROR] = exc


def seats_box() -> None:
    """The toggle and, when on, the seats with their last heartbeat and a Remove button."""
    s = room.seat()
    if s is None or s.role != "teacher":
        return
    if not st.toggle(t("live_seats_toggle"), key="live_seats_on"):
        return
    if room.waiting():
        return
    try:
        seats = room.store().seats(s.code, s.key)
    except RoomError as exc:
        room.fail(exc)
        return
    if not seats:
        st.caption(t("live_seats_none"))
        return
    now = room.store().clock()
    seats = sorted(seats, key=lambda seat: seat.student)  # stable: heartbeats never reorder
    for seat in seats[:MAX_SHOWN]:
        row = st.container(horizontal=True, vertical_alignment="center", gap="small")
        ago = max(0, int(now - seat.seen_at))
        key = "live_seat_row" if seat.counts else "live_seat_quiet"
        row.markdown(t(key, seat=label(seat.student), s=ago) + (" ✓" if seat.answered else ""))
        row.button(
            t("live_seat_release"),
            key=f"live_release_{seat.student}",
            on_click=_release,
            args=(seat.student,),
            help=t("live_seat_release_help"),
        )
        row.button(
            t("live_seat_remove"),
            key=f"live_remove_{seat.student}",
            on_click=_remove,
            args=(seat.student,),
        )
    if len(seats) > MAX_SHOWN:
        st.caption(t("live_seats_more", n=len(seats) - MAX_SHOWN))
