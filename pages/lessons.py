"""Guided lessons: the course as seven chapters with predict-then-reveal checkpoints.

Widgets and rendering only: the chapters live in ``specdec_core.ui.lessons``; every live
value comes from the engine (scenarios found on the loaded pair, replayed).
"""

from __future__ import annotations

import streamlit as st

from specdec_core.ui.context import page_context
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons import render
from specdec_core.ui.live import teacher as live_teacher

pair, config = page_context()
st.title(t("ls_title"))
st.markdown(t("ls_intro"))
live_box = st.container(key="live_lessons")  # filled after the chapter: its checkpoints
render(pair)
with live_box:
    live_teacher.start_button("lessons")
    live_teacher.card("lessons")
