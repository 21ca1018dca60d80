"""What a lesson link, a replay or the sidebar could not keep, shown once on the page.

A leaf of ``ui/``: :mod:`specdec_core.ui.step.links` (links, replays) and
:mod:`specdec_core.ui.sidebar` (a value the loaded pair cannot hold) both record here, and
the step page shows and forgets them with :func:`show`. Kept apart from ``links`` so the
sidebar need not import it (``links`` imports the tree lesson, which reads the sidebar).
"""

from __future__ import annotations

import streamlit as st

from specdec_core.lessons.link import Problem
from specdec_core.ui.i18n import t

KEY = "link_problems"  # what the last link/replay dropped (shown once)


def kept() -> list[Problem]:
    """The problems recorded and not shown yet (a copy)."""
    return list(st.session_state.get(KEY, []))


def keep(problems: list[Problem]) -> None:
    """Replace the recorded problems with ``problems``."""
    st.session_state[KEY] = list(problems)


def note_dropped(name: str) -> None:
    """Record that setting ``name`` could not be kept (``link_bad_value``)."""
    st.session_state.setdefault(KEY, []).append(Problem("bad_value", {"name": name}))


def show() -> None:
    """One warning naming what a link or a replay dropped (then forgotten)."""
    problems: list[Problem] = st.session_state.pop(KEY, [])
    if problems:
        items = "; ".join(t("link_" + p.code, **p.params) for p in problems)
        st.warning(t("link_dropped", items=items))
