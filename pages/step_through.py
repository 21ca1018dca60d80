"""Step-through lesson: propose → verify → commit / reject on the loaded pair, as a chain
or a tree.

Layout only: the header and the step panel live in ``specdec_core.ui.step`` (``header``,
``panel``); every number comes from the engine's session traces.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.ui.context import page_context
from specdec_core.ui.live import follow as live_follow
from specdec_core.ui.live import room as live_room
from specdec_core.ui.live import teacher as live_teacher
from specdec_core.ui.run_gate import fragment
from specdec_core.ui.step import header, panel

pair, config = page_context()
presenter = bool(st.session_state.get("presenter"))

# A following student sees the teacher's frame in the bar above (no replay here).
hidden = live_follow.frame_only()

# The header is one container, so the step panel below always sits at the same place on
# the page: a fragment that moves between full runs (presenter mode drops the introduction)
# leaves a stale copy of itself behind in the browser.
with st.container():
    live_teacher.card("step")  # a live class, at the top: room code, QR code, questions
    if not hidden:
        header.draw(pair, config, presenter)


@fragment
def step_panel() -> None:
    """Everything a step click changes: a click reruns only this fragment."""
    live = panel.LiveHooks(
        live_follow.own_actions, live_room.publisher(), live_teacher.start_button
    )
    panel.draw(pair, presenter, live)


if not hidden:
    step_panel()
