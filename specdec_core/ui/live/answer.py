"""A student's answer to the teacher's question: the radio, the answer kept in the session
until the store confirms it (:data:`PENDING`: sent at most at the seat's answer rate, the
last choice wins, tried again after a store fault), and the outcome at the reveal read back
from the store (:meth:`~specdec_core.server.rooms.RoomStore.answer_of`), so a reload shows
the answer the teacher's chart counts. Peer instruction: the time left of a countdown (the
radio closes at its end; an answer the store refuses as late gives one message), and the
revote, a radio of its own (``live_answer_<qid>_2``) under a line that says so; an answer
of the first vote still waiting when the revote opens is dropped, never sent. While the
class is paused the screen holds the question as it was at the pause (the store keeps it:
no new question, no reveal, the countdown's time left frozen, the radio off); the resume
shows the room's question as it is then."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from specdec_core.server.room_limits import BUCKETS
from specdec_core.server.room_types import Question, RoomError, RoomView
from specdec_core.ui.errors import plain
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import DRAWN
from specdec_core.ui.live import room, seat_hold
from specdec_core.ui.live.questions import question_text, shown_choices
from specdec_core.ui.live.vote import clock_line, is_open

PENDING = "live_pending"  # (qid, choice, vote): an answer the store has not confirmed yet
MINE = "live_mine"  # (qid, vote, revealed, choice): this student's answer as the store has it


def send_pending(question: Question | None) -> None:
    """Send the answer that waits (:data:`PENDING`) when the seat's answer rate allows and
    the store is not backing off; kept until the store confirms it. ``question``: the
    room's question as last read: a waiting answer of its first vote is dropped once its
    revote is open; one the rate holds back past its countdown's end goes now."""
    S = st.session_state
    s, pending = room.seat(), S.get(PENDING)
    if s is None or pending is None or not s.joined or room.waiting():
        return
    if question is not None and question.qid == pending[0] and question.vote != pending[2]:
        S.pop(PENDING, None)  # the first vote's answer: the revote is open
        return
    wait = BUCKETS.take("answer", s.student)
    if wait and not _last_call(question, wait, s.student):
        return  # the seat's next token: a later poll sends it (the last choice wins)
    qid, choice = pending[:2]
    try:
        if not seat_hold.claim(s.code, s.student):  # another address took the seat: it
            S[room.SEAT] = replace(s, joined=False)  # waits, the answer kept unsent
            return
        room.store().answer(s.code, s.student, qid, choice)
    except RoomError as exc:
        if exc.code in room.FAULTS:
            room.fault(exc)
            return
        S.pop(PENDING, None)
        S[room.ERROR] = exc
        return
    room.answered()
    if S.get(PENDING) == pending:
        S.pop(PENDING, None)


def _last_call(question: Question | None, wait: float, student: str) -> bool:
    """Whether an answer the rate holds back for ``wait`` s goes now: its countdown ends
    before the next poll after ``wait`` (it would be refused as late), and the seat's
    ``last_answer`` token allows it."""
    if question is None or question.closes_at is None:
        return False
    left = question.closes_at - room.store().clock()
    return 0 < left <= wait + room.poll_seconds() and not BUCKETS.take("last_answer", student)


def _answer(question: Question, key: str) -> None:
    choice = st.session_state.get(key)
    if room.seat() is None or choice is None:
        return
    st.session_state[PENDING] = (question.qid, int(choice), question.vote)
    send_pending(question)


def question_box(view: RoomView) -> None:
    """The open question under the follower's status line: the radio (an answer is
    sent on change), its state, and after the reveal the outcome for this seat; while
    paused, the question held (its countdown frozen)."""
    q = view.held if view.paused else view.question
    if q is None:
        return
    S = st.session_state
    text, labels = question_text(q.kind, q.params), shown_choices(q.kind, q.choices)
    if q.kind == "chapter":  # this browser's own checkpoint, in its own language
        cid = dict(q.params).get("cid", "")
        check = S.get(DRAWN, {}).get(cid)
        if check is not None and len(check.options) == len(labels):
            text = check.question
            labels = [check.label(o) for o in check.options]
    key = f"live_answer_{q.qid}" + ("_2" if q.vote == 2 else "")
    if key not in S or q.revealed:  # a reload: the answer the store counts, not an empty radio
        stored = _stored_answer(q.qid, q.vote, q.revealed)
        if stored is not None and stored < len(labels) and S.get(key) != stored:
            S[key] = stored
    st.markdown(f"**{t('live_question')}** {text}")
    if q.vote == 2 and not q.revealed:
        st.caption(t("live_revote_line"))
    paused_at = view.paused_at if view.paused else None
    taken = is_open(q) and not view.paused
    clock_line(q, paused_at)  # while paused: the time left at the pause, held
    label = "live_your_answer" if taken else "live_your_answer_closed"
    if q.revealed:  # the line says the reveal, not only that voting closed
        label = "live_your_answer_revealed"
    st.radio(
        t("live_your_answer_paused" if view.paused and is_open(q, paused_at) else label),
        list(range(len(q.choices))),
        format_func=lambda i: plain(labels[i]),
        index=None,
        key=key,
        horizontal=len(labels) <= 4,
        disabled=not taken,
        on_change=_answer,
        args=(q, key),
    )
    mine = S.get(key)
    if not q.revealed and not taken:
        return  # the countdown's line says the vote is closed, or the pause line it holds
    if not q.revealed:
        waits = S.get(PENDING, (None,))[0] == q.qid
        line = "live_answer_open" if mine is None else "live_answer_sent"
        st.caption(t("live_answer_pending" if waits else line))
        return
    mine = _stored_answer(q.qid, q.vote, True)  # the reveal says what the chart counted
    if q.correct is None:
        st.info(t("live_no_outcome"))
    elif mine is None:  # after a revote the chart counts the revote: say which was missed
        missed = "live_outcome_no_revote" if q.vote > 1 else "live_outcome_no_answer"
        st.info(t(missed, answer=plain(labels[q.correct])))
    elif mine == q.correct:
        st.success(t("live_outcome_right", answer=plain(labels[q.correct])))
    else:
        st.error(
            t("live_outcome_wrong", answer=plain(labels[q.correct]), yours=plain(labels[mine]))
        )


def _stored_answer(qid: str, vote: int, revealed: bool) -> int | None:
    """This student's answer to ``qid`` as the store has it (:meth:`RoomStore.answer_of`),
    read once per question and vote and once more at its reveal (``None``: no answer, or a
    store error)."""
    S = st.session_state
    cached = S.get(MINE)
    if cached is not None and cached[:3] == (qid, vote, revealed):
        return cached[3]
    s = room.seat()
    try:
        choice = room.store().answer_of(s.code, s.student, qid) if s is not None else None
    except RoomError:
        choice = None
    S[MINE] = (qid, vote, revealed, choice)
    return choice
