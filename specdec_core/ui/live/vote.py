"""A question's vote on the teacher's projector, peer-instruction style (Mazur 1997): the
live chart (counts only, no names), the countdown, "Close voting", "Discuss, then revote"
(the first vote and the revote side by side, and after the reveal the shift of the share
right, e.g. 35 % → 70 %) and "Reveal".

Widget keys (the browser tests find them by key):

* ``live_timer`` — select box of the countdown (none, 30, 60, 90, 120 s) beside "Ask"
  (the revote counts down as long as the first vote did).
* ``live_chart`` — the answers' bar chart (Plotly; two bars per choice at a revote).
* ``live_clock`` — the container of the countdown line.
* ``live_close_vote`` — button "Close voting" / "结束投票".
* ``live_revote`` — button "Discuss, then revote" / "讨论后重新投票".
* ``live_reveal`` — button "Reveal" / "揭晓" (a help tooltip: click the first of two).
* ``live_shift`` — the container of the share-right line after the reveal.
* ``live_votes_push`` — the votes socket (``ui/live/push_votes``) while a vote is open.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import streamlit as st

from specdec_core.server import live_push
from specdec_core.server.room_results import share_right
from specdec_core.server.room_types import Question, RoomError, RoomView
from specdec_core.ui.errors import plain
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import DRAWN
from specdec_core.ui.live import push_votes, room
from specdec_core.ui.live.chart import answers_figure
from specdec_core.ui.live.questions import question_text, shown_choices

TIMERS = (0, 30, 60, 90, 120)  # the countdown choices, seconds (0: none)
ASKED_TIMER = "live_asked_timer"  # the countdown of the question asked: its revote's too


def seconds_left(question: Question, paused_at: float | None = None) -> int | None:
    """Whole seconds until ``question``'s vote closes (0: closed), on the store's clock, or
    frozen at ``paused_at`` (the class is paused: the store resumes the countdown with that
    time left); ``None`` without a countdown."""
    if question.closes_at is None:
        return None
    now = room.store().clock() if paused_at is None else paused_at
    return max(0, math.ceil(question.closes_at - now))


def is_open(question: Question, paused_at: float | None = None) -> bool:
    """Whether answers are taken now, or once the pause ends (not revealed, the countdown
    not over)."""
    return not question.revealed and seconds_left(question, paused_at) != 0


def clock_line(question: Question, paused_at: float | None = None) -> None:
    """The countdown line (time left, or "Voting is closed."), nothing without one; while
    paused (``paused_at``) the time left held."""
    left = seconds_left(question, paused_at)
    if left is None or question.revealed:
        return
    with st.container(key="live_clock"):
        icon = ":material/timer:" if left and paused_at is None else ":material/timer_off:"
        st.markdown(f"{icon} " + (t("live_time_left", s=left) if left else t("live_time_up")))


def timer_select() -> int | None:
    """The countdown select box of the ask row: seconds, or ``None`` for none."""
    seconds = st.selectbox(
        t("live_timer"),
        TIMERS,
        key="live_timer",
        format_func=lambda s: t("live_timer_s", s=s) if s else t("live_timer_off"),
        width=130,
    )
    st.session_state[ASKED_TIMER] = int(seconds)
    return int(seconds) or None


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.0f} %"


def question_box(view: RoomView, on_reveal: Callable[[], None]) -> None:
    """The open or revealed question of the teacher's ``view``: text, countdown, chart
    (first vote vs revote), answered line, the vote's buttons, and the outcome."""
    q = view.question
    text = question_text(q.kind, q.params)
    if q.kind == "chapter":
        check = st.session_state.get(DRAWN, {}).get(dict(q.params).get("cid", ""))
        if check is not None:
            text = check.question
    st.markdown(f"**{t('live_question')}** {text}")
    paused_at = view.paused_at if view.paused else None
    clock_line(q, paused_at)
    labels = shown_choices(q.kind, q.choices)
    first = list(view.first) if view.first else None
    names = (t("live_vote_first"), t("live_vote_second"))
    st.plotly_chart(
        answers_figure(labels, list(view.counts), q.correct if q.revealed else None, first, names),
        key="live_chart",
        config={"displayModeBar": False, "staticPlot": True},
        width="stretch",
    )
    if not q.revealed and live_push.ENABLED:  # an answer reruns this fragment at once
        push_votes.watch(view.code, view.version)
    if first is None:
        st.markdown(t("live_answered", n=view.answered, m=view.students))
    else:
        st.markdown(t("live_first_answered", n=sum(first), m=view.answered, s=view.students))
    if not q.revealed:
        row = st.container(horizontal=True, gap="small")
        with row:
            if is_open(q, paused_at):
                st.button(t("live_close_vote"), key="live_close_vote", on_click=_close, args=(q,))
            if q.vote == 1:
                st.button(
                    t("live_revote"),
                    key="live_revote",
                    on_click=_revote,
                    args=(q,),
                    help=t("live_revote_help"),
                )
            st.button(
                t("live_reveal"),
                key="live_reveal",
                on_click=on_reveal,
                type="primary",
                help=t("live_reveal_help"),
            )
        return
    if q.correct is None:
        st.info(t("live_no_outcome"))
        return
    st.success(t("live_outcome", answer=plain(labels[q.correct])))
    now = _pct(share_right(view.counts, q.correct))
    with st.container(key="live_shift"):
        if first is None:
            st.markdown(t("live_share", a=now))
        else:
            st.markdown(t("live_shift", a=_pct(share_right(first, q.correct)), b=now))


def _teacher_call(fn: Callable[..., object], *args: object) -> None:
    """A teacher's store call from a button: a refusal or a fault is kept for the
    dashboard's one line."""
    s = room.seat()
    if s is None or s.role != "teacher":
        return
    try:
        fn(s.code, s.key, *args)
    except RoomError as exc:
        if exc.code in room.FAULTS:
            room.fault(exc)
        else:
            st.session_state[room.ERROR] = exc


def _close(question: Question) -> None:
    _teacher_call(room.store().close_vote, question.qid)


def _revote(question: Question) -> None:
    seconds = int(st.session_state.get(ASKED_TIMER) or 0)
    _teacher_call(room.store().revote, question.qid, seconds or None)
