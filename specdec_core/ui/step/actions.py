"""The step panel's button callbacks, one set for both verification shapes: a phase, a
whole round or reset (:func:`act`), an edit of a drafted token (:func:`edit`, the chain's)
and "Stop" for "Run N rounds" (:func:`stop_run`). The panel hands each callback the
shape's row of ``ui/step/shapes.SHAPES``; none names a shape.

Every callback first syncs the shape's lesson with the inputs on screen
(:func:`specdec_core.ui.step.lesson.sync`): a click that also carries an edit of the
prompt box (typed without Ctrl+Enter) or of a sidebar number acts on the edited inputs at
once, never on the old ones. Errors leave the state as it was and are kept as one message
(``step_error`` / ``edit_error``) for the panel; each click says "own action"
(:func:`specdec_core.ui.step.lesson.own_action`: a following student explores from here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from specdec_core.core.errors import SpecDecError
from specdec_core.core.inputs import whole_number
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.session import Session
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import t
from specdec_core.ui.sidebar import current_config
from specdec_core.ui.step import edit as step_edit
from specdec_core.ui.step import lesson as L
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import Mode

if TYPE_CHECKING:
    from specdec_core.ui.step.shapes import StepShape


def say(synced: L.Sync) -> None:
    """Keep a sync's notice (a restart that lost something visible) for the panel."""
    if synced.notice:
        st.session_state["step_notice"] = t(synced.notice, **(synced.notice_args or {}))


def synced(shape: StepShape, config: SessionConfig | None = None) -> L.Sync:
    """The lesson of ``shape`` for the pair, settings (``config``, else read from the
    sidebar's widgets now), tree shape and prompt on screen *now*."""
    try:
        tree = shape.tree()
    except SpecDecError as exc:  # a shape box that holds none: the lesson kept, blocked
        lesson = L.current(shape.mode)
        return L.Sync(lesson, blocked=lesson is not None, error=exc)
    return _synced(shape.mode, tree, config)


def _synced(mode: Mode, tree: tuple[int, ...], config: SessionConfig | None = None) -> L.Sync:
    pair = st.session_state["pair"]
    config = current_config(pair) if config is None else config
    return L.sync(pair, config, st.session_state[L.PROMPT_KEY], mode, tree)


def _session(now: L.Sync) -> Session | None:
    """The synced session, or ``None`` (its error kept) when the inputs cannot start one."""
    say(now)
    if now.lesson is None or now.blocked:
        if now.error is not None:
            st.session_state["step_error"] = error_message(now.error)
        return None
    return now.lesson.session


@L.one_at_a_time
def act(shape: StepShape, action: str) -> None:
    """Button callback: one phase (``propose`` | ``verify`` | ``commit``), a whole round
    (``round``: up to Commit) or ``reset`` of the lesson of ``shape``. Runs under the session's
    engine lock (a click that cannot get it is dropped). A stale click (its button was
    already disabled on screen) does nothing; after a restart by an edit of the inputs
    the session runs up to the clicked phase, so the click acts on them at once."""
    L.own_action()
    S = st.session_state
    S.pop("edit_error", None)  # an edit's message belongs to the edit it answered
    S.pop("edit_notice", None)
    try:
        if action == "reset":
            pair = S["pair"]
            L.start(pair, current_config(pair), S[L.PROMPT_KEY], shape=shape.tree())
            return
        before = L.current(shape.mode)
        session = _session(synced(shape))
        if session is None:
            return
        if action == "round":
            action = "commit"
        elif before is not None and session is before.session and session.phase != action:
            return  # a stale click
        session.run_through(action)
        if shape.edits and S.get(step_edit.KEEP_OPEN):  # only an open box draws them
            step_edit.previews(session)  # the edit box's preview of the new drafts
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["step_error"] = error_message(exc)


@L.one_at_a_time
def edit(kind: str) -> None:
    """The chain's edit box: ``choice`` (a token from the list), ``text`` (a typed token),
    ``wrong`` ("make position k wrong") or ``agree`` ("make the draft agree with the
    target") at the position in ``edit_pos``; only before Verify."""
    L.own_action()
    S = st.session_state
    session = _session(_synced("chain", ()))  # the edit box is the chain's
    if session is None or session.phase != "verify":
        return
    try:
        pair = S["pair"]
        pos = whole_number(S.get("edit_pos", 1), 1, max(len(session.steps.drafts), 1), "position")
        if kind == "choice":
            choice = whole_number(S.get("edit_choice"), 0, pair.vocab_size - 1, "token")
            trace = session.steps.edit_draft(pos, choice)
        elif kind == "text":
            typed = step_edit.typed_token_id(pair, str(S.get("edit_text", "")))
            trace = session.steps.edit_draft(pos, typed)
        elif kind == "wrong":
            trace = session.steps.make_position_wrong(pos)
        else:
            edits = session.steps.make_draft_agree()
            S["edit_notice"] = t("edit_agree_done", n=len(edits))
            drafts = session.steps.drafts  # re-drafting after an edit may make fewer than pos
            if drafts:  # the box shows the token at pos now (the last one if pos is gone)
                S["edit_choice"] = drafts[min(pos, len(drafts)) - 1]
            step_edit.previews(session)
            return
        S["edit_choice"] = trace.new_token.id  # the "Replace with" box shows the new token
        S["edit_notice"] = t(
            "edit_done",
            k=pos,
            old=token_in_sentence(trace.old_token),  # "→ “`.`”." never reads "→ .."
            new=token_in_sentence(trace.new_token),
        )
        step_edit.previews(session)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        S["edit_error"] = error_message(exc)


def stop_run() -> None:
    """ "Stop" while "Run N rounds" runs: no more rounds after the one running."""
    st.session_state["run_left"] = 0
    st.session_state["step_notice"] = t("st_run_stopped")
