"""Who drives the class and when it holds: the teacher's (or co-teacher's) pause, and the
co-teacher link.

Pause: the followers' screens hold the moment the class was paused at (the store serves
that moment while paused, :meth:`~specdec_core.server.rooms_peer.PeerInstruction.pause`)
while the teacher steps on to prepare; "Resume" brings them to the teacher's moment.

Co-teacher: the teacher makes a second secret link (its own key; making another turns the
old one off); whoever opens it drives the class like the teacher (step, ask, reveal,
pause: the room moves with their clicks) but cannot end it or make co-teacher links.

Widget keys: ``live_pause`` / ``live_resume`` — buttons "Pause the class" / "Resume the
class"; ``live_paused_line`` — the teacher's line while paused (under "The class sees:
…"); ``live_co_make`` — button "Make a co-teacher link"; ``live_co_url`` — the container of
the co-teacher link.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specdec_core.server.room_types import RoomError, RoomView
from specdec_core.ui.i18n import t
from specdec_core.ui.live import room
from specdec_core.ui.live.frame_view import teacher_at

CO_KEY = "live_co_key"  # (code, co-teacher key) the teacher made last


def _call(fn_name: str, *args: object) -> None:
    s = room.seat()
    if s is None or s.role != "teacher":
        return
    try:
        got = getattr(room.store(), fn_name)(s.code, s.key, *args)
    except RoomError as exc:
        if exc.code in room.FAULTS:
            room.fault(exc)
        else:
            st.session_state[room.ERROR] = exc
        return
    if fn_name == "co_teacher_key":
        st.session_state[CO_KEY] = (s.code, got)


def moment_line(view: RoomView) -> None:
    """Where the class is, as the followers' screens say it ("The class sees: round r,
    phase …", with the new run's note after a switch), and the line that says the class
    is paused."""
    st.caption(t("live_class_sees", where=teacher_at(view)))
    if view.paused:
        with st.container(key="live_paused_line"):
            st.warning(t("live_paused_teacher"), icon=":material/pause_circle:")


def pause_button(view: RoomView) -> None:
    """ "Pause the class", or "Resume the class" while paused."""
    if view.paused:
        st.button(
            t("live_resume"),
            key="live_resume",
            on_click=_call,
            args=("pause", False),
            type="primary",
            icon=":material/play_arrow:",
        )
        return
    st.button(t("live_pause"), key="live_pause", on_click=_call, args=("pause", True))


def co_link(link_for: Callable[[str, str], str]) -> None:
    """The co-teacher link's expander (the teacher only): "Make a co-teacher link", then
    the link ``link_for(code, co-teacher key)``."""
    s = room.seat()
    if s is None or s.role != "teacher" or s.co:
        return
    with st.expander(t("live_co_link"), expanded=False):
        st.caption(t("live_co_help"))
        made = st.session_state.get(CO_KEY)
        if made is not None and made[0] == s.code:
            with st.container(key="live_co_url"):
                st.code(link_for(s.code, made[1]), language=None, wrap_lines=True)
        st.button(t("live_co_make"), key="live_co_make", on_click=_call, args=("co_teacher_key",))
