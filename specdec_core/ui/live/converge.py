"""Two drivers of one class (the teacher and a co-teacher) converge on one moment.

Each driver's screen publishes its own lesson state; without this, a click on a screen that
did not see the other driver's moves would publish its older moment and pull the class
back. So a driver's screen remembers the room version it last agreed with
(:data:`SYNCED`): its dashboard poll adopts the room's moment when another driver moved it
(only from a view newer than that version: a view kept through a store fault is older)
(:func:`moved_on`, then ``follow.apply`` as for a teacher link), and a click made before
that poll is not published — the click never pulls the class back, and the dashboard says
once that the screen moved (:data:`HELD`).

Moments are compared without the screen's language and presenter mode (each driver keeps
its own). While the class is paused the store serves the held moment, not the drivers',
so nothing is compared then. Two clicks within one store round trip are settled by the
store: a publish carries the version this screen agreed with as its compare-and-set base
(``RoomStore.publish``), so the second one is refused (``room_moved``) and its screen goes
to the first one's moment as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import streamlit as st

from specdec_core.lessons.link import decode
from specdec_core.server.pairs import offered_pairs
from specdec_core.server.room_types import RoomView
from specdec_core.server.rooms import RoomStore

SYNCED = "live_synced"  # the room version this driver's screen last agreed with
HELD = "live_click_held"  # this screen went to another driver's moment: said once


def moment(page: str, state: Mapping[str, str]) -> tuple:
    """``(page, state)`` as a comparable moment: the lesson link decoded without its
    language and presenter mode, and the page's other parameters (e.g. ``chapter``)."""
    lesson, _ = decode(dict(state), offered_pairs()) if "s" in state else (None, [])
    if lesson is not None:
        lesson = replace(lesson, lang="en", presenter=False)
    rest = tuple(sorted((k, v) for k, v in state.items() if k not in ("v", "lang", "s")))
    return page, lesson, rest


def moved_on(store: RoomStore, code: str, published: tuple | None) -> RoomView | None:
    """The room's view when another driver moved the class away from ``published`` (this
    screen's last ``(page, state)``) since this screen last agreed with it; else ``None``
    (and the version agreed with moves on). One version read when nothing changed."""
    S = st.session_state
    version = store.version(code)
    if published is None or version == S.get(SYNCED):
        return None
    return differs(store.view(code), published)


def differs(view: RoomView, published: tuple | None) -> RoomView | None:
    """``view`` when its moment is not ``published``'s (never while paused); else
    ``None``, and this screen agrees with ``view``'s version."""
    if published is None or view.paused or moment(view.page, view.state) == moment(*published):
        st.session_state[SYNCED] = view.version
        return None
    return view


def agreed(version: int) -> None:
    """This screen published (or adopted) the room's moment at ``version``."""
    st.session_state[SYNCED] = version
