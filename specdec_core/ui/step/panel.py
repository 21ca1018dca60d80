"""The step panel, one for both verification shapes: the mode row (a chain | a tree), the
step buttons, the messages, the Lesson panel, then the shape's own drawing -- the chain's
strip, edit box, distributions and KV table (:mod:`~specdec_core.ui.step.chain_view`) or
the tree's picture, mask and compaction (:mod:`~specdec_core.ui.step.tree_view`). The
shape's row of :data:`~specdec_core.ui.step.shapes.SHAPES` holds all that differs; the
rest is written once.

Everything a step click changes is inside the page's ``st.fragment``: a click reruns only
this panel, not ``app.py``, the sidebar or the prompt above. A fragment rerun reuses the
page's globals from its last full run, so the panel reads the settings and the lesson from
session state (the sidebar's widgets keep their values there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.ui import problems
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import t
from specdec_core.ui.sidebar import current_config
from specdec_core.ui.step import actions, links, tools
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_lesson as TL
from specdec_core.ui.step.header import INTRO_MODE, heading_for
from specdec_core.ui.step.links import AfterWrite, fragment_run
from specdec_core.ui.step.shapes import SHAPES, StepShape
from specdec_core.ui.step.tools import LiveTab, step_back_button
from specdec_core.ui.words import MODE, PHASE, STEP_BUTTON, STOP_REASON, Mode, say, step_where


@dataclass(frozen=True)
class LiveHooks:
    """What a live class adds to the panel, passed in by the page (``ui/live`` sits above
    ``ui/step``): ``own_actions()`` turns a follower's own click into exploring;
    ``publish``, a teacher's ``write_url`` hook (``None``: not a teacher); ``live_tab``,
    the Lesson panel's "Live class" tab."""

    own_actions: Callable[[], None]
    publish: AfterWrite | None
    live_tab: LiveTab | None


def draw(pair: ModelPair, presenter: bool, live: LiveHooks) -> None:
    """The step panel (the body of the page's fragment). The session is read (and synced,
    stepped) under its engine lock: another script thread of this tab (a fast full rerun)
    waits, never runs beside it."""
    S = st.session_state
    with fragment_run("step_panel", live.publish) as fragment_only, L.engine() as held:
        if not held:
            st.info(t("busy_panel"))
            return
        live.own_actions()  # a click of the user's own: a follower explores from here
        if links.PENDING in S:  # step back, a scenario or an upload: replayed by the page
            st.rerun(scope="app")
        shape = SHAPES[mode_row()]
        config = current_config(pair)  # once per run: the shape's check and the sync
        if not shape.ready(config):
            return
        synced = actions.synced(shape, config)
        if synced.lesson is None:  # the very first prompt was bad
            st.error(error_message(synced.error))
            return
        actions.say(synced)
        # The inputs on screen could not start a session (bad prompt): say so on every
        # rerun and block the actions, so nothing runs on the old prompt while the box
        # shows another.
        if synced.blocked and synced.error is not None:
            S["step_error"] = error_message(synced.error)
        session = synced.lesson.session
        phase = "finished" if synced.blocked else session.phase
        running = _controls(shape, session, phase)
        _messages(shape, session, phase, synced.blocked)
        tools.lesson_tools(pair, session, shape, live.live_tab)
        shape.draw(pair, synced.lesson, phase, presenter, heading_for(presenter))
        if running:  # "Run N rounds", one round a rerun (Stop ends it between rounds)
            actions.act(shape, "round")
            S["run_left"] = 0 if S.get("step_error") else S["run_left"] - 1
            st.rerun(scope="fragment" if fragment_only else "app")  # the URL: fragment_run


def mode_row() -> Mode:
    """The "Verify: a chain | a tree" control (and, in tree mode, the shape box) in one
    row at the top of the step panel. Returns the mode."""
    TL.seed_widgets()
    row = st.container(
        horizontal=True, vertical_alignment="bottom", gap="medium", key="step_mode_row"
    )
    with row:
        names = {m: say(MODE, m) for m in TL.MODES}  # bound now: one widget per language
        st.segmented_control(
            t("tree_mode_label"),
            list(TL.MODES),
            key=TL.mode_key(),
            on_change=TL.switch_mode,
            format_func=names.__getitem__,
            help=t("tree_mode_help"),
        )
        mode = TL.mode()
        if mode == "tree":
            st.selectbox(
                t("tree_shape_label"),
                TL.shape_options(),
                key=TL.SHAPE_KEY,
                on_change=TL.keep_shape,
                help=t("tree_shape_help"),
                width=380,
            )
    if st.session_state.get(INTRO_MODE, mode) != mode:  # the page's introduction is stale
        st.rerun()  # inside the fragment: the whole page, with the other introduction
    return mode


def _controls(shape: StepShape, session, phase: str) -> bool:
    """One wrapping row of buttons sized to their labels (no label is cut at 1024 px); in
    presenter mode app.py's CSS keeps this row in view (sticky) while the page scrolls.
    Returns whether "Run N rounds" is running."""
    S, mode, keys = st.session_state, shape.mode, shape.keys
    row = st.container(
        horizontal=True, vertical_alignment="bottom", gap="small", key="step_controls"
    )
    running, run_n = False, False
    with row:
        for (m, step), label in STEP_BUTTON.items():
            if m != mode:
                continue
            st.button(
                t(label),
                on_click=actions.act,
                args=(shape, step),
                disabled=phase != step,
                type="primary" if phase == step else "secondary",
                key=f"btn_{keys}{step}",
            )
        st.button(
            t("st_run_round"),
            on_click=actions.act,
            args=(shape, "round"),
            disabled=phase == "finished",
            key=f"btn_{keys}round",
        )
        if shape.run_n:
            running = bool(S.get("run_left")) and phase != "finished"
            if running:
                st.button(
                    t("st_stop_run"), on_click=actions.stop_run, type="primary", key="btn_stop_run"
                )
            else:
                run_n = st.button(t("st_run_n"), disabled=phase == "finished", key="btn_run_n")
            n_rounds = st.number_input(t("st_n_rounds"), 1, 50, 5, key="st_n", width=110)
        st.button(
            t("st_reset"),
            on_click=actions.act,
            args=(shape, "reset"),
            help=t(shape.reset_help),
            key=f"btn_{keys}reset",
        )
        step_back_button(st, session)
    if not running and run_n:
        S["run_left"], S["run_total"] = int(n_rounds), int(n_rounds)
        running = phase != "finished"
    if running:
        done = S["run_total"] - S["run_left"]
        st.progress(done / S["run_total"], text=t("st_running", i=done + 1, n=S["run_total"]))
    return running


def _messages(shape: StepShape, session, phase: str, blocked: bool) -> None:
    """The click's error or notice, what a lesson link or a replay dropped, and the phase
    line (none while the prompt on screen is blocked: its error says what to fix)."""
    S = st.session_state
    if "step_error" in S:
        st.error(S.pop("step_error"))
    if "step_notice" in S:
        st.info(S.pop("step_notice"))
    problems.show()
    if blocked:
        return
    if phase == "finished":
        reason = say(STOP_REASON, session.stop_reason)
        st.success(t("st_phase") + say(PHASE, (shape.mode, "finished"), reason=reason))
    else:  # what is done and what comes next in the words the class sees (ui/live)
        where = step_where(session.round_index, phase, mode=shape.mode)
        st.info(t("st_phase_where", where=where, what=shape.phase_line(session, phase)))
