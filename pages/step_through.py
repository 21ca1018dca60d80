"""Step-through lesson: propose → verify → commit / reject on the loaded pair.

Widgets and rendering only: every number comes from ``SpeculativeSession`` traces.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.core.trace import RoundTrace
from specdec_core.core.words import STRIP_WORDS
from specdec_core.engine.chain.session import SpeculativeSession
from specdec_core.ui import problems
from specdec_core.ui.context import page_context
from specdec_core.ui.errors import code_span, error_message
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.guards import PROMPT_CHARS, whole_number
from specdec_core.ui.i18n import t
from specdec_core.ui.live import follow as live_follow
from specdec_core.ui.live import room as live_room
from specdec_core.ui.live import teacher as live_teacher
from specdec_core.ui.render import (
    StripItem,
    round_strip,
    token_strip_html,
)
from specdec_core.ui.sidebar import current_config
from specdec_core.ui.step import edit as step_edit
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links, tree_view, view
from specdec_core.ui.step.links import fragment_run
from specdec_core.ui.step.tools import render_lesson_tools, step_back_button
from specdec_core.ui.words import PHASE, STEP_BUTTON, STOP_REASON, say

S = st.session_state
pair, config = page_context()
presenter = bool(S.get("presenter"))


# ------------------------------------------------------------------ actions
def _error(exc: Exception) -> None:
    S["step_error"] = error_message(exc)


def _say(synced: L.Sync) -> None:
    if synced.notice:
        S["step_notice"] = t(synced.notice, **(synced.notice_args or {}))


def _synced_session() -> SpeculativeSession | None:
    """The session for the inputs on screen *now*. A click that also carries an edit of the
    prompt box (typed without Ctrl+Enter) or of a sidebar number reaches session state
    before this callback runs: act on the edited inputs at once, never on the old ones."""
    synced = L.sync(pair, current_config(pair), S[L.PROMPT_KEY])
    _say(synced)
    if synced.lesson is None or synced.blocked:
        if synced.error is not None:
            _error(synced.error)
        return None
    return synced.lesson.session


@L.one_at_a_time
def _act(action: str) -> None:
    """Button callback: run one phase (or finish the round); errors leave state as is.
    Runs under the session's engine lock (a click that cannot get it is dropped)."""
    L.own_action()  # a following student explores on their own from here
    S.pop("edit_error", None)  # an edit's message belongs to the edit it answered
    S.pop("edit_notice", None)
    if action == "reset":
        try:
            L.reset(pair, current_config(pair), S[L.PROMPT_KEY])
        except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
            _error(exc)
        return
    before = L.current_session()
    session = _synced_session()
    if session is None:
        return
    if action == "round":
        action = "commit"
    elif session is before and session.phase != action:
        return  # a stale click (the button was already disabled on screen)
    try:
        # after a restart by an edit (new session in phase "propose"), run up to the
        # clicked phase so the click acts on the edited inputs at once
        session.run_through(action)
        step_edit.previews(session)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        _error(exc)


@L.one_at_a_time
def _edit(kind: str) -> None:
    L.own_action()  # a following student explores on their own from here
    session = _synced_session()
    if session is None or session.phase != "verify":
        return
    try:
        gamma = len(session.drafts)
        pos = whole_number(S.get("edit_pos", 1), 1, max(gamma, 1), "position")
        if kind == "choice":
            choice = whole_number(S.get("edit_choice"), 0, pair.vocab_size - 1, "token")
            trace = session.edit_draft(pos, choice)
        elif kind == "text":
            typed = step_edit.typed_token_id(pair, str(S.get("edit_text", "")))
            trace = session.edit_draft(pos, typed)
        elif kind == "wrong":
            trace = session.make_position_wrong(pos)
        else:
            edits = session.make_draft_agree()
            S["edit_notice"] = t("edit_agree_done", n=len(edits))
            step_edit.previews(session)
            return
        S["edit_notice"] = t(
            "edit_done",
            k=pos,
            old=code_span(visible_token(trace.old_token)),  # "→ `.`." never reads "→ .."
            new=code_span(visible_token(trace.new_token)),
        )
        step_edit.previews(session)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["edit_error"] = error_message(exc)


def _stop_run() -> None:
    S["run_left"] = 0
    S["step_notice"] = t("st_run_stopped")


# ------------------------------------------------------------------ header + prompt
def _heading(text: str) -> None:
    if presenter:  # headings cost height on a projector: bold text instead
        st.markdown(f"**{text}**")
    else:
        st.subheader(text)


# The header is one container, so the step panel below always sits at the same place on
# the page: a fragment that moves between full runs (presenter mode drops the introduction)
# leaves a stale copy of itself behind in the browser.
with st.container():
    # the chain's or the tree's introduction, for the drafter in the sidebar
    intro = tree_view.page_intro(st.session_state.get("cfg_drafter", "model"))
    if presenter:  # the projector gets the lesson, not the introduction
        st.markdown(f"### {t('st_title')}")
    else:
        st.title(t("st_title"))
        st.markdown(intro)

    # a lesson link, a scenario or step back: replayed with the sidebar's settings
    with L.engine() as held:  # the replay replaces the session: not while a click runs
        if held:
            links.apply_pending(pair, config, t("st_default_prompt"))
    L.seed_prompt(t("st_default_prompt"))
    st.text_area(
        t("st_prompt"), key=L.PROMPT_KEY, height=68 if presenter else 80, max_chars=PROMPT_CHARS
    )
    if pair.name == "embedded" and not presenter:
        st.caption(t("st_prompt_note"))
    live_teacher.card("step")  # a live class: the room code, QR code, questions, chart


# ------------------------------------------------------------------ the step panel
# Everything a step click changes (controls, messages, strip, edits, chart, KV table,
# history, the Lesson panel's link) is one fragment: a click reruns only the fragment, not
# app.py, the sidebar or the prompt above. A fragment rerun reuses this script's globals
# from the last full run, so the panel reads the settings and the lesson from session
# state (the sidebar's widgets keep their values there).
@st.fragment
def step_panel() -> None:
    # the session is read (and synced, previewed, stepped) under its engine lock: another
    # script thread of this tab (a fast full rerun) waits, never runs beside it
    publish = live_room.publisher()  # a teacher publishes each click
    with fragment_run("step_panel", publish) as fragment_only, L.engine() as held:
        if not held:
            st.info(t("busy_panel"))
            return
        live_follow.own_actions()  # a click of the user's own: a follower explores from here
        if links.PENDING in S:  # step back, a scenario or an upload: replayed by the page
            st.rerun(scope="app")
        if tree_view.mode_row() == "tree":  # verify a tree (ui/step/tree_view.py)
            tree_view.panel(pair, presenter, _heading, live_teacher.start_button)
            return
        synced = L.sync(pair, current_config(pair), S[L.PROMPT_KEY])
        if synced.lesson is None:  # the very first prompt was bad
            st.error(error_message(synced.error))
            return
        _say(synced)
        session: SpeculativeSession = synced.lesson.session
        # The inputs on screen could not start a session (bad prompt): say so on every
        # rerun and block the actions, so nothing runs on the old prompt while the box
        # shows another.
        blocked = synced.blocked
        if blocked and synced.error is not None:
            S["step_error"] = error_message(synced.error)
        phase = "finished" if blocked else session.phase
        running = _controls(session, phase)
        _messages(session, phase, blocked)
        render_lesson_tools(pair, session, live_teacher.start_button)
        last = _strip(session, phase)
        step_edit.edit_box(session, phase, presenter, _edit)
        _lower_views(session, last, phase)
        if running:  # "Run N rounds", one round a rerun (Stop ends it between rounds)
            _act("round")
            S["run_left"] = 0 if S.get("step_error") else S["run_left"] - 1
            st.rerun(scope="fragment" if fragment_only else "app")  # the URL: fragment_run


def _controls(session: SpeculativeSession, phase: str) -> bool:
    """One wrapping row of buttons sized to their labels (no label is cut at 1024 px); in
    presenter mode app.py's CSS keeps this row in view (sticky) while the page scrolls.
    Returns whether "Run N rounds" is running."""
    controls = st.container(
        horizontal=True, vertical_alignment="bottom", gap="small", key="step_controls"
    )
    with controls:
        for step, label in STEP_BUTTON.items():
            st.button(
                t(label),
                on_click=_act,
                args=(step,),
                disabled=phase != step,
                type="primary" if phase == step else "secondary",
                key=f"btn_{step}",
            )
        st.button(
            t("st_run_round"),
            on_click=_act,
            args=("round",),
            disabled=phase == "finished",
            key="btn_round",
        )
        running, run_n = bool(S.get("run_left")) and phase != "finished", False
        if running:
            st.button(t("st_stop_run"), on_click=_stop_run, type="primary", key="btn_stop_run")
        else:
            run_n = st.button(t("st_run_n"), disabled=phase == "finished", key="btn_run_n")
        n_rounds = st.number_input(t("st_n_rounds"), 1, 50, 5, key="st_n", width=110)
        st.button(
            t("st_reset"), on_click=_act, args=("reset",), help=t("st_reset_help"), key="btn_reset"
        )
        step_back_button(st, session)
    if not running and run_n:
        S["run_left"], S["run_total"] = int(n_rounds), int(n_rounds)
        running = phase != "finished"
    if running:
        done = S["run_total"] - S["run_left"]
        st.progress(done / S["run_total"], text=t("st_running", i=done + 1, n=S["run_total"]))
    return running


def _messages(session: SpeculativeSession, phase: str, blocked: bool) -> None:
    if "step_error" in S:
        st.error(S.pop("step_error"))
    if "step_notice" in S:
        st.info(S.pop("step_notice"))
    problems.show()
    if blocked:
        pass  # the prompt error above says what to fix
    elif phase == "finished":
        reason = say(STOP_REASON, session.stop_reason)
        st.success(t("st_phase") + say(PHASE, "finished", reason=reason))
    else:
        st.info(t("st_phase") + view.phase_text(session, phase))


def _strip(session: SpeculativeSession, phase: str) -> RoundTrace | None:
    """The token strip; returns the last finished round when the strip shows it."""
    verify = session.current_verify
    last = session.history[-1] if session.history and phase in ("propose", "finished") else None
    items = [StripItem(session.token(i), "prompt") for i in session.ids[: session.prompt_len]]
    generated = session.ids[session.prompt_len :]
    if last is not None:  # show how the last commit changed the text
        n_new = len(last.commit.appended)
        older = generated[: len(generated) - n_new]
        items += [StripItem(session.token(i), "committed") for i in older]
        items += round_strip(last.verify, last.record)
    else:
        items += [StripItem(session.token(i), "committed") for i in generated]
        edited = session.edited_positions
        if verify is None:
            items += [
                StripItem(session.token(y), "tentative", i + 1 in edited)
                for i, y in enumerate(session.drafts)
            ]
        else:
            items += round_strip(verify, session.current_record)
    _heading(t("st_strip"))
    stopped_early = last is not None and last.commit.kind == "stopped"
    if stopped_early:  # a stop (e.g. an accepted end-of-text) cut the commit short
        st.info(
            t(
                "st_stopped_in_round",
                n=len(last.commit.appended),
                cut=len(last.commit.cut),
                reason=say(STOP_REASON, last.commit.stop_reason or "eos"),
            )
        )
    elif last is not None and last.commit.discarded:
        gone = " ".join(f"`{visible_token(tok)}`" for tok in last.commit.discarded)
        commit = last.commit
        st.warning(
            t(
                "st_reject_step",
                tokens=gone,
                n=len(commit.discarded),
                t=commit.rolled_back_target,
                d=commit.rolled_back_draft,
            )
        )
    st.html(token_strip_html(items, list(STRIP_WORDS)))  # every state, in the house order
    return last


def _lower_views(session: SpeculativeSession, last: RoundTrace | None, phase: str) -> None:
    """The distributions with the checks table, the KV table and the history. Presenter
    mode: the chart and the KV table side by side (one look, no scroll), the checks table
    below them. Otherwise one column, in reading order."""
    # Keyed containers: the browser keeps a keyed block (and the chart inside it) across
    # reruns even when the elements above it change in number (a message, the edit box);
    # an unkeyed one at a new index is rebuilt, and the chart with it (≈ 100 ms a click).
    if presenter:
        with st.container(key="step_lower"):
            dist_box, kv_box = st.columns([1, 1], gap="medium")
        checks_box = st.container(key="step_checks_box")
    else:
        checks_box = st.container(key="step_checks_box")
        dist_box = st.container(key="step_dist_box")
        kv_box = st.container(key="step_kv_box")
    with dist_box:
        view.distributions(session, last, phase, _heading, checks_box)
    with kv_box:
        view.kv_section(session, last, presenter, _heading)
    view.history(session)


step_panel()
