"""The step panel's Lesson panel, one for both shapes (one-click scenarios, the lesson link
with its QR code, the files of :mod:`specdec_core.ui.step.files`, a live class's tab), and
step back (undo). Logic lives in the engine (``lessons/``: ``link``, ``replay``,
``scenarios``) and in :mod:`specdec_core.ui.step.links`; this module draws the controls."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import segno
import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.engine.session import Session
from specdec_core.lessons.link import LessonState
from specdec_core.lessons.replay import MAX_REPLAY_FORWARDS, replay_forwards, step_back
from specdec_core.lessons.scenarios import SCENARIOS
from specdec_core.ui.i18n import lang, t
from specdec_core.ui.step import files, links
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step.files import TAB_KEY, VIEW_KEY, with_view

if TYPE_CHECKING:
    from specdec_core.ui.step.shapes import StepShape

OPEN_KEY = "lt_open"  # the Lesson panel is open (lazy expander state)
LiveTab = Callable[[str], None]  # draws the "Live class" tab for the page ``where``
TAB_LABEL = {
    "scenarios": "lt_tab_scenarios",
    "link": "lt_tab_link",
    "files": "lt_tab_files",
    "export": "lt_tab_export",
    "live": "live_tab",
}


def _step_back() -> None:
    L.own_action()
    state = step_back(links.current_state("step_through"))
    if state is not None:
        links.request(state)
        st.session_state["step_notice"] = t("lt_stepped_back")


def step_back_button(container, session: Session) -> None:
    """ "↶ Step back": the lesson one phase or edit earlier (replayed; a tree lesson one
    phase earlier)."""
    at_start = session.phase == "propose" and not session.history
    # step back replays from the start: off where that replay would pass the cap
    earlier = None if at_start else step_back(links.current_state("step_through"))
    capped = earlier is not None and replay_forwards(earlier) > MAX_REPLAY_FORWARDS
    why = t("lt_step_back_capped", forwards=MAX_REPLAY_FORWARDS) if capped else None
    container.button(
        t("lt_step_back"),
        on_click=_step_back,
        disabled=at_start or capped,
        help=why or t("lt_step_back_help"),
        key="btn_step_back",
    )


def _open_scenario(state: LessonState) -> None:
    links.request(with_view(state))
    st.session_state[TAB_KEY] = "scenarios"
    st.session_state.pop(VIEW_KEY, None)


def _want_scenarios() -> None:
    st.session_state["sc_wanted"] = True


def _scenarios(pair: ModelPair) -> None:
    if not links.scenarios_ready(pair) and not st.session_state.get("sc_wanted"):
        st.caption(t("sc_intro"))
        st.button(t("sc_find"), on_click=_want_scenarios, key="btn_sc_find")
        return
    found = {f.key: f.state for f in links.scenarios(pair)}
    keys = [k for k in SCENARIOS if found.get(k) is not None]
    missing = [k for k in SCENARIOS if found.get(k) is None]
    if not keys:
        st.info(t("sc_none"))
        return
    # the translated titles are the options themselves (no format_func) and there is one
    # widget per language: Streamlit matches a radio's value by its label
    titles = {t(f"sc_{k}_title"): k for k in keys}
    key = titles[st.radio(t("sc_pick"), list(titles), key=f"sc_choice_{lang()}")]
    st.markdown(t(f"sc_{key}_text"))
    state = with_view(found[key])
    st.button(t("sc_open"), on_click=_open_scenario, args=(state,), type="primary")
    st.caption(t("sc_link"))
    st.code(links.link_for(state), language=None, wrap_lines=True)
    if missing:
        st.caption(t("sc_missing", names=", ".join(t(f"sc_{k}_title") for k in missing)))


def _link() -> None:
    state = links.current_state("step_through")
    url = links.link_for(state)
    st.caption(t("lt_link_help"))
    st.code(url, language=None, wrap_lines=True)
    if links.is_local_url(url):  # a projected QR code of localhost opens nothing on a phone
        st.warning(t("lt_link_local"))
    uri, version = _qr(url)
    # an <img> with a data URI: inline, no /media file (which lives on one replica only)
    st.html(f'<img src="{uri}" alt="QR code" style="background:#fff">')
    st.caption(t("lt_link_len", n=len(url), version=version))


@lru_cache(maxsize=256)
def _qr(url: str) -> tuple[str, int]:
    """The QR code of ``url`` as an SVG data URI and its version (≈ 55 ms to build, so
    built once per link, not on every click)."""
    qr = segno.make(url, error="m")
    return qr.svg_data_uri(scale=5, border=2), qr.version


def lesson_tools(
    pair: ModelPair,
    session: Session,
    shape: StepShape,
    live_tab: LiveTab | None = None,
) -> None:
    """The "Lesson" expander of ``shape`` (its row's title, tabs and caption). Drawn only
    while it is open (a lazy expander: opening it reruns the step panel): closed, a step
    click builds no link, QR code or download; open, the link follows every step.
    ``live_tab(where)`` draws the "Live class" tab (the step page passes
    ``ui/live/teacher.start_button``); no tab without it."""
    box = st.expander(
        t(shape.title), expanded=False, icon=":material/school:", key=OPEN_KEY, on_change="rerun"
    )
    if not box.open:
        return
    with box:
        if shape.note:
            st.caption(t(shape.note))
        names = {name: t(TAB_LABEL[name]) for name in shape.tabs + ("live",) * bool(live_tab)}
        # the tab a click of this panel belongs to stays selected when the click replays
        # the lesson (a full rerun remounts the tabs: an upload jumped back to Scenarios)
        chosen = names.get(st.session_state.get(TAB_KEY, "scenarios"))
        tabs = st.tabs(list(names.values()), default=chosen)
        draw = {
            "scenarios": lambda: _scenarios(pair),
            "link": _link,
            "files": lambda: files.chain_files(session),
            "export": lambda: files.tree_files(session),
            "live": lambda: live_tab("step"),
        }
        for tab, name in zip(tabs, names, strict=True):
            with tab:
                draw[name]()
