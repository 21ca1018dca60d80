"""The teacher's side of a live class: start a room, the projector card (the room code,
the join link and its QR code, the students, the teacher link for a second device), ask
the class a question and reveal its real outcome.

Where: the step-through page's Lesson panel has a tab "Live class" with :func:`start_button`;
the Lessons page shows it above the chapter. Once the room is live, :func:`card` is drawn
at the top of the step page (above the Lessons page's chapter); its :func:`_dashboard`, an
``st.fragment(run_every=POLL_S)``, reads one version number a poll, the room's view only
when it changed (the student count, the answers' chart, "N of M answered").

Questions (:mod:`specdec_core.ui.live.questions`): on the step page about the chain round
on screen, between ① Propose and ② Verify; on the Lessons page a chapter's checkpoint.
"Reveal" runs ② Verify first when the round is not verified yet (same session, same seeded
draws), publishes the new state, then reveals the outcome read from the verified round (or
kept from it once a switch to the tree rebuilt the chain); a question about an earlier
round does not block Ask.

Widget keys (the websocket bot / browser tests find them by key):

* ``live_start_step`` / ``live_start_lessons`` — button "Start a live class" /
  "开始课堂直播" (step page: inside the Lesson panel, tab "Live class" / "课堂直播").
* ``live_teacher`` — the card's container; ``live_code`` — the room code's container.
* ``live_end`` — button "End the class" / "结束课堂" (a co-teacher: ``live_leave``,
  "Leave the class", which leaves the class running).
* ``live_kind`` — select box of the question kind (:data:`KINDS`); ``live_k`` — number
  input, the position k; ``live_check`` — select box of a chapter checkpoint (Lessons).
* ``live_ask`` — button "Ask the class" / "向全班提问".
* The vote (countdown, chart, close, revote, reveal): :mod:`~specdec_core.ui.live.vote`;
  pause and the co-teacher link: :mod:`~specdec_core.ui.live.drive`; the results' CSV:
  :mod:`~specdec_core.ui.live.results`.
"""

from __future__ import annotations

import html
import re
import secrets
from functools import lru_cache

import segno
import streamlit as st

from specdec_core.server.room_types import CODE_ALPHABET, Question, RoomError
from specdec_core.ui.errors import error_message, plain
from specdec_core.ui.i18n import lang, t
from specdec_core.ui.lessons import CHAPTER, CHAPTERS
from specdec_core.ui.lessons.checkpoint import DRAWN
from specdec_core.ui.live import comeback, converge, drive, follow, results, room, seats, vote
from specdec_core.ui.live.questions import (
    KINDS,
    Draft,
    ask_refusal,
    chapter_outcome,
    chapter_question,
    earlier_round,
    outcome,
    round_of,
    round_question,
    the_round,
)
from specdec_core.ui.run_gate import fragment
from specdec_core.ui.step import edit as step_edit
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links
from specdec_core.ui.step import tree_lesson as TL

POLL_S = room.poll_seconds()  # seconds between polls (SPECDEC_LIVE_POLL_S)
STARTED = "live_started_now"  # the step panel reruns the app once the room exists
RERUN = "live_rerun_app"  # the reveal changed the lesson: redraw the whole page
OUTCOME = "live_kept_outcome"  # (qid, index) of the open round question, while verified
_CODE = re.compile(f"[{CODE_ALPHABET}]{{1,12}}")


def _start(rerun: bool) -> None:
    room.start_room()
    st.session_state[STARTED] = rerun and room.is_teacher()


def start_button(where: str) -> None:
    """The "Start a live class" button (``where``: ``step`` or ``lessons``); in a room, a
    line saying which one."""
    S = st.session_state
    if S.pop(STARTED, False):
        st.rerun(scope="app")  # the card lives outside the step panel's fragment
    s = room.seat()
    if s is not None:  # the card (teacher) or the follower box (student) says it already
        if where == "step":
            key = "live_in_room_teacher" if s.role == "teacher" else "live_in_room_student"
            st.caption(t(key, code=plain(s.code)))
        return
    st.caption(t("live_start_help"))
    st.button(
        t("live_start"),
        key=f"live_start_{where}",
        on_click=_start,
        args=(where == "step",),
        type="primary" if where == "step" else "secondary",
        icon=":material/cast_for_education:",
    )
    if room.ERROR in S and where == "step":
        st.error(error_message(S.pop(room.ERROR)))


def join_link(code: str) -> str:
    """The join link: ``?room=CODE`` (``&lang=zh`` in Chinese); never the teacher key."""
    base = links.page_url(st.context.url or "", S_page(), links.DEFAULT_PAGE)
    return f"{base}?room={code}" + ("&lang=zh" if lang() == "zh" else "")


def teacher_link(code: str, key: str) -> str:
    base = links.page_url(st.context.url or "", S_page(), links.DEFAULT_PAGE)
    return f"{base}?room={code}&teacher={key}"


def S_page() -> str:  # noqa: N802 - the page on screen
    return st.session_state.get(links.PAGE, links.DEFAULT_PAGE)


@lru_cache(maxsize=64)
def qr_uri(url: str) -> str:
    """The QR code of ``url`` as an SVG data URI, sized for a projector (inline: no
    ``/media`` file, which lives on one replica only)."""
    return segno.make(url, error="m").svg_data_uri(scale=7, border=2)


def card(page: str) -> None:
    """The projector card of the teacher's room (nothing for a student; outside a room,
    the results of the class this teacher ended). ``page``: ``step`` or ``lessons``."""
    s = room.seat()
    if s is None:
        results.after_class()
        comeback.hint()  # a reload without the teacher link: this browser's class is live
    if s is None or s.role != "teacher":
        return
    comeback.remember(s.code)
    code = s.code if _CODE.fullmatch(s.code) else "?"
    url = join_link(code)
    with st.container(border=True, key="live_teacher"):
        # the join box: open at the start, folded once the students are in (label: the code)
        join = st.expander(
            t("live_join_title", code=code), expanded=True, icon=":material/qr_code_2:"
        )
        with join:
            left, right = st.columns([3, 2], gap="medium", vertical_alignment="center")
            with left:
                st.caption(t("live_room_code"))
                with st.container(key="live_code"):
                    # sized by its column (container query units): 6 characters at 0.6em +
                    # 0.3em spacing take 5.4em: 15cqi fills ~81%, never under the QR code
                    st.html(
                        '<div style="container-type:inline-size;width:100%">'
                        '<div style="font-size:min(4.2rem,15cqi);font-weight:700;'
                        "letter-spacing:0.3em;line-height:1.1;font-family:monospace;"
                        f'white-space:nowrap">{html.escape(code)}</div></div>'
                    )
                st.markdown(t("live_join_at"))
                st.code(url, language=None, wrap_lines=True)
                if links.is_local_url(url):
                    st.warning(t("lt_link_local"))
            with right:
                st.html(
                    f'<img src="{qr_uri(url)}" alt="QR code" '
                    'style="background:#fff;width:100%;max-width:260px">'
                )
            if s.co:
                st.info(t("live_co_badge"), icon=":material/group:")
            else:
                with st.expander(t("live_teacher_link"), expanded=False):
                    st.caption(t("live_teacher_link_help"))
                    st.code(teacher_link(code, s.key), language=None, wrap_lines=True)
                drive.co_link(teacher_link)
            st.caption(t("live_keep_teacher_link"))  # F5 drops the room: the key left the URL
            end = "live_leave" if s.co else "live_end"  # a co-teacher leaves a running class
            st.button(t(end), key=end, on_click=room.leave)
        _dashboard(page)


@fragment(run_every=POLL_S)
def _dashboard(page: str) -> None:
    S = st.session_state
    if S.pop(RERUN, False):
        st.rerun(scope="app")
    if not room.is_teacher():
        return
    unpublished = S.get(room.UNPUBLISHED)
    if unpublished is not None and not room.waiting():  # a fault held the last state back
        room.publish(*unpublished)
    view = follow.refresh()
    if view is not None and unpublished is None and view.version > S.get(converge.SYNCED, -1):
        if converge.differs(view, S.get(room.PUBLISHED)) is not None:  # another driver's
            S[room.PUBLISHED], S[room.CLAIMED] = (view.page, dict(view.state)), True
            S[converge.HELD] = True  # said once, after the replay
            converge.agreed(view.version)
            st.rerun(scope="app")  # the full run replays the class's moment (follow.apply)
    room.fault_line()
    if S.pop(converge.HELD, False):
        st.info(t("live_moved_on"), icon=":material/sync:")
    if view is None:
        if S.get(follow.ENDED):  # a co-teacher's class ended: the full run says so
            st.rerun(scope="app")
        if room.ERROR in S:
            st.error(error_message(S.pop(room.ERROR)))
        return
    with st.container(key="live_dash"):
        st.markdown(t("live_students_line", n=view.students, code=plain(view.code)))
        drive.moment_line(view)
        row = st.container(horizontal=True, vertical_alignment="center", gap="small")
        with row:
            drive.pause_button(view)
            s = room.seat()
            results.download(s.code, s.key, view.version)
        seats.seats_box()
        q = view.question
        if q is not None:
            vote.question_box(view, _reveal)
        if q is None or q.revealed or _replaceable(q, page):
            if q is not None and not q.revealed:  # the old one is dropped, results kept
                st.caption(t("live_ask_replaces"))
            _ask_box(page)
        if room.ERROR in S:
            st.error(error_message(S.pop(room.ERROR)))


def _replaceable(q: Question, page: str) -> bool:
    """An unrevealed round question about another round than the one on screen (Ask stays);
    its outcome kept while its round is verified here (:data:`OUTCOME`: a late reveal)."""
    if q.kind == "chapter" or page == "lessons":
        return False
    with L.engine() as held:
        session = L.current_session() if held else None
        if session is None:
            return False
        if the_round(session, round_of(q.params)) is not None:
            st.session_state[OUTCOME] = (q.qid, outcome(session, q.params, q.kind))
        tree = L.current("tree") if TL.mode() == "tree" else None
        return earlier_round(tree.session if tree else session, q.params)


def _ask_box(page: str) -> None:
    S = st.session_state
    st.markdown(f"**{t('live_ask_title')}**")
    if page == "lessons":
        n = S.get(CHAPTER, 1)
        drawn = S.get(DRAWN, {})
        cids = [c for c in CHAPTERS[n - 1].CHECKS if c in drawn]
        drafts = {c: chapter_question(drawn[c], n) for c in cids}
        usable = [c for c in cids if drafts[c] is not None]
        if not usable:
            st.caption(t("live_ask_no_checks"))
            return
        if S.get("live_check") not in usable:
            S["live_check"] = usable[0]
        cid = st.selectbox(
            t("live_ask_check"),
            usable,
            key="live_check",
            format_func=lambda c: drawn[c].question[:90],
        )
        vote.timer_select()
        st.button(t("live_ask"), key="live_ask", on_click=_ask, args=(drafts[cid],))
        return
    tree = L.current("tree") if TL.mode() == "tree" else None
    session = tree.session if tree else L.current_session()
    why = ask_refusal(session)
    if why is not None:
        st.caption(t(why))
        return
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    with row:
        kind = st.selectbox(
            t("live_ask_kind"),
            KINDS,
            key="live_kind",
            format_func=lambda k: t(f"live_kind_{k}"),
            width=320,
        )
        gamma = len(session.steps.drafts)
        if kind == "accept":
            if not 1 <= int(S.get("live_k", 1)) <= gamma:
                S["live_k"] = 1
            st.number_input(t("live_k"), 1, gamma, key="live_k", width=110)
        vote.timer_select()
        st.button(t("live_ask"), key="live_ask", on_click=_ask_round, type="primary")


def _ask(draft: Draft | None) -> None:
    s = room.seat()
    if s is None or s.role != "teacher" or draft is None:
        return
    question = Question(f"q{secrets.token_hex(6)}", draft.kind, draft.params, draft.choices)
    seconds = int(st.session_state.get(vote.ASKED_TIMER) or 0)
    try:
        room.store().ask(s.code, s.key, question, duration_s=seconds or None)
    except RoomError as exc:
        st.session_state[room.ERROR] = exc


def _ask_round() -> None:
    S = st.session_state
    with L.engine() as held:
        session = L.current_session()
        if not held or TL.mode() == "tree" or ask_refusal(session) is not None:
            return
        kind = S.get("live_kind", "accept")
        k = int(S.get("live_k", 1))
        try:
            draft = round_question(session, kind, k)
        except ValueError:
            return
    _ask(draft)


def _reveal() -> None:
    """Reveal the open question with its real outcome: a round question runs ② Verify
    first when its round is proposed and not verified (then the new state is published
    before the reveal); a chapter question reads its checkpoint's answer."""
    S = st.session_state
    s = room.seat()
    view = room.view()
    if s is None or view is None or view.question is None or view.question.revealed:
        return
    q = view.question
    correct: int | None = None
    if q.kind == "chapter":
        check = S.get(DRAWN, {}).get(dict(q.params).get("cid", ""))
        correct = chapter_outcome(check) if check is not None else None
    else:
        with L.engine() as held:
            if not held:
                return
            session, kept = L.current_session(), S.get(OUTCOME, (None,))
            gone = session is None or TL.mode() == "tree"
            if kept[0] == q.qid and (gone or the_round(session, round_of(q.params)) is None):
                correct = kept[1]  # its round left the session (a switch to the tree)
            elif not gone:
                try:
                    r = int(dict(q.params).get("r", "-1"))
                    if session.round_index == r and session.phase == "verify":
                        session.run_through("verify")
                        if S.get(step_edit.KEEP_OPEN):  # only an open edit box draws them
                            step_edit.previews(session)
                        links.write_url(room.publisher())  # publishes the verified state first
                        S[RERUN] = True
                    correct = outcome(session, q.params, q.kind)
                except (ValueError, KeyError):
                    correct = None
    try:
        room.store().reveal(s.code, s.key, q.qid, correct)
    except RoomError as exc:
        S[room.ERROR] = exc
