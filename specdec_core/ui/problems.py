"""What a lesson link, a replay or the sidebar could not keep, shown once on the page.

A leaf of ``ui/``: :mod:`specdec_core.ui.step.links` (links, replays) and
:mod:`specdec_core.ui.sidebar` (a value the loaded pair cannot hold) both record here, and
the step page shows and forgets them with :func:`show`. Kept apart from ``links`` so the
sidebar need not import it (``links`` imports the tree lesson, which reads the sidebar).
"""

from __future__ import annotations

import streamlit as st

from specdec_core.lessons.link import Problem
from specdec_core.ui.i18n import lang, strings, tr

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


def field_label(name: str, language: str) -> str:
    """The human, translated label of a setting a link or the sidebar can drop (UI string
    ``link_field_<name>``); an unknown name (a key the link made up, already reduced to
    ``[A-Za-z0-9_.-]`` by ``lessons/link.py``) is shown as it is; a list ``"a, b"`` of
    names has each one translated."""
    if ", " in name:  # several unknown names, joined by ``lessons/link.py``
        return ", ".join(field_label(part, language) for part in name.split(", "))
    key = f"link_field_{name}"
    return tr(key, language) if key in strings() else name


def message(problems: list[Problem], language: str) -> str:
    """The one warning text naming every problem in ``problems``, in ``language``."""
    items = []
    for p in problems:
        params = dict(p.params)
        if p.code == "bad_value" and "name" in params:
            params["name"] = field_label(str(params["name"]), language)
        items.append(tr("link_" + p.code, language).format(**params))
    return tr("link_dropped", language).format(items=tr("link_join", language).join(items))


def show() -> None:
    """One warning naming what a link or a replay dropped (then forgotten)."""
    problems: list[Problem] = st.session_state.pop(KEY, [])
    if problems:
        st.warning(message(problems, lang()))
