"""A student's screen in a live class: follow the teacher (the teacher's lesson state,
replayed here by the same deterministic replay a lesson link takes: only the state comes
over the store, never model output), explore on one's own, answer the teacher's questions.

Flow. :func:`before_sidebar` (``app.py``, every full run, before the sidebar) reads the
room's latest ``(page, state)`` when the student follows. A step state with a **frame**
(:mod:`~specdec_core.ui.live.frames`: the teacher's own strip, checks, chart and KV table,
stored once per state) is drawn as is by the fragment
(:mod:`~specdec_core.ui.live.frame_view`), the step page below nothing (:func:`frame_only`):
no replay here. Otherwise (a Lessons state, a state without a frame) the settings are
seeded into the sidebar's widget keys and the step page replays the state
(``links.request`` → ``links.apply_pending``); a Lessons state sets the chapter.
:func:`bar` (``app.py``, in the keyed container ``live_bar`` above every page) is the
follower's status line and question box, a fragment: on the push route
(:mod:`~specdec_core.ui.live.follow_push`) it runs only when the push component asks or
something waits; otherwise it polls (``st.fragment(run_every=POLL_S)``: ONE version number
read, the room's view only when it changed; a changed state without a frame reruns the
app, which applies it). "Explore on my own" replays the followed state here (own language).

Widget keys (the websocket bot / browser tests find them by key):

* ``live_bar`` — the container above every page (empty outside a room).
* ``live_explore`` / ``live_follow`` — "Explore on my own" / "Follow again" (自己探索 / 重新跟随).
* ``live_answer_<qid>`` — radio over the open question's choices (sent on change).
* ``live_status`` — the container of the status line ("Following the teacher — …").
* ``live_this_tab`` — button "Follow in this tab" (a seat's other tab, polling every 10 s).

Bounded per client (:mod:`specdec_core.server.room_limits`): one fast tab per seat, others
poll every 10 s; a heartbeat every :data:`HEARTBEAT_S`; an answer resent till confirmed.
"""

from __future__ import annotations

import time
from dataclasses import replace

import streamlit as st

from specdec_core.lessons.link import decode
from specdec_core.server import live_push
from specdec_core.server.pairs import offered_pairs
from specdec_core.server.room_limits import TABS
from specdec_core.server.room_types import RoomError, RoomView
from specdec_core.ui.errors import error_message
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons import CHAPTER, CHAPTERS, URL_READ
from specdec_core.ui.live import follow_push, frame_view, push_view, room, seat_hold, seats
from specdec_core.ui.live.answer import question_box, send_pending
from specdec_core.ui.live.frame_cache import room_frame
from specdec_core.ui.live.identity import client, tab_id
from specdec_core.ui.run_gate import fragment
from specdec_core.ui.step import links
from specdec_core.ui.step.files import with_view
from specdec_core.ui.step.lesson import OWN_ACTION

FOLLOW = "live_follow_on"  # the student follows the teacher (else explores)
SEEN = "live_seen"  # the room version the last poll read
VIEW = "live_view"  # the RoomView read at that version
APPLIED = "live_applied"  # the (page, state) last applied (None: apply the latest)
WANT_PAGE = "live_want_page"  # the app page stem the teacher's state is on
ENDED = room.ENDED  # the room this student followed has ended (closed or expired)
BEAT = "live_beat_at"  # monotonic time of the seat's last heartbeat
READ_AT = "live_read_at"  # monotonic time the view was last read
POLLED = "live_polled_at"  # monotonic time this tab's poll last read the store
POLL_S = room.poll_seconds()  # seconds between polls (SPECDEC_LIVE_POLL_S)
SLOW_POLL_S = 10.0  # a seat's other tabs
PUSH_BEAT_S = 10.0  # a pushed follower's own beat while something waits (follow_push)
HEARTBEAT_S = 20.0  # a student's seat heartbeat (well inside the store's seat TTL)
REREAD_S = 10.0  # the view is read again this often even when its version did not move
FRAME = "live_frame"  # the teacher's frame of the state followed (None: replayed instead)
HIDDEN = "live_page_hidden"  # the last full run drew the frame instead of the step page


def following() -> bool:
    return bool(st.session_state.get(FOLLOW, True))


def refresh() -> RoomView | None:
    """The room's view, read again only when its version changed or, for the teacher,
    :data:`REREAD_S` passed (seats that went quiet change the count without a version);
    ``None`` when the room is gone (its message is kept, the seat left). While the store
    does not answer: the last view read (the fault line says so) and no store call until
    the back-off ends."""
    S, s = st.session_state, room.seat()
    if s is None:
        return None
    if room.waiting():
        return S.get(VIEW)
    try:
        version = room.store().version(s.code)
        stale = s.role == "teacher" and time.monotonic() - S.get(READ_AT, 0.0) > REREAD_S
        if version != S.get(SEEN) or VIEW not in S or stale:
            view = room.store().view(s.code, every_run=s.role == "teacher")
            S[VIEW], S[SEEN], S[READ_AT] = view, view.version, time.monotonic()
    except RoomError as exc:
        room.fail(exc)  # a follower's class that is gone: ENDED
        return S.get(VIEW) if exc.code in room.FAULTS else None
    room.answered()
    return S[VIEW]


def keep_seat() -> None:
    """A student's seat heartbeat every :data:`HEARTBEAT_S` (at once while it waits)."""
    S, s = st.session_state, room.seat()
    if s is None or s.role != "student":
        return
    if not s.joined or time.monotonic() - S.get(BEAT, 0.0) > HEARTBEAT_S:
        S[BEAT] = time.monotonic()
        room.heartbeat()


def target(view: RoomView) -> tuple[str, dict[str, str]]:
    return (view.page, dict(view.state))


def apply(view: RoomView) -> None:
    """Show the teacher's ``(page, state)`` here: the state decoded as a lesson link is
    (validated like any link), in this browser's language and presenter mode; the step
    page replays it on this run, a Lessons state opens its chapter."""
    S = st.session_state
    S[APPLIED] = target(view)
    S[WANT_PAGE] = room.APP_PAGE.get(view.page, "step_through")
    if not view.state:  # a new room: the teacher has not published yet
        return
    if view.page == "lessons":
        raw = str(view.state.get("chapter", ""))
        if raw.isdigit() and 1 <= int(raw) <= len(CHAPTERS):
            S[CHAPTER], S[URL_READ] = int(raw), True
        return
    state, _ = decode(view.state, offered_pairs())
    if not state.prompt:  # nothing to replay
        return
    # the student's own language and presenter mode, never the teacher's
    links.request(replace(with_view(state), page="step_through"))
    S["pair_reason"] = "live_class"  # the sidebar's note under the pair: the teacher's


def before_sidebar() -> None:
    """``app.py``, every full run, before the sidebar: a student who follows gets the
    teacher's latest state; a teacher who just opened the teacher link gets the room's
    state once."""
    S = st.session_state
    own_actions()  # a click of the student's own before this run: they explore now
    s = room.seat()
    if s is None:
        return _ended_replay()
    if s.role == "teacher":
        if S.pop(room.CLAIMED, False):
            view = room.view()
            if view is not None:
                apply(view)
        return
    S[HIDDEN] = False
    if not following():
        view = S.get(VIEW)  # left the teacher's frame: the state is replayed here, to explore
        if S.pop(FRAME, None) is not None and view is not None and target(view) != S.get(APPLIED):
            apply(view)
        return
    view = refresh()
    if view is None:
        return _ended_replay()
    S[FRAME] = room_frame(room.store(), view)
    if S[FRAME] is not None:
        S[WANT_PAGE] = room.APP_PAGE.get(view.page, "step_through")
        S[HIDDEN] = True
        frame_view.adopt_pair(view)
    elif target(view) != S.get(APPLIED):
        apply(view)


def _ended_replay() -> None:
    """The class ended: a follower keeps its text (the last state read, replayed once)."""
    S = st.session_state
    view = S.pop(VIEW, None) if S.get(ENDED) else None
    if view is not None and following() and target(view) != S.get(APPLIED):
        apply(view)


def frame_only() -> bool:
    """Whether the step page draws nothing this run: a following student sees the
    teacher's frame in the bar above instead (decided by :func:`before_sidebar`)."""
    return bool(room.is_student() and st.session_state.get(HIDDEN))


def _explore() -> None:
    st.session_state[FOLLOW] = False


def own_actions() -> None:
    """:func:`own_click` once after a step-page action of the user's own (the flag
    ``OWN_ACTION`` its callbacks set); ``app.py`` before the sidebar and the step panel."""
    if st.session_state.pop(OWN_ACTION, False):
        own_click()


def own_click() -> None:
    """An action of the student's own (a step button, an edit, step back, another Lessons
    chapter): while following, the student now explores (the line says so with the
    teacher's moment and "Follow again", one click back to it). Nothing outside a room or
    for the teacher."""
    if room.is_student() and following():
        st.session_state[FOLLOW] = False


def _follow_again() -> None:
    st.session_state[FOLLOW] = True
    st.session_state[APPLIED] = None  # replay the teacher's latest state
    st.session_state.pop(POLLED, None)  # this run reads the store


def bar(page: str, pages: dict) -> None:
    """``app.py``, above every page (inside the keyed container ``live_bar``): a room
    error's one message; for a student, the follower (a fragment that polls), and the
    switch to the teacher's page while following. ``page``: the page stem on screen;
    ``pages``: page stem → ``st.Page``."""
    S = st.session_state
    if room.ERROR in S:
        st.error(error_message(S.pop(room.ERROR)))
    if not room.is_student():
        if room.is_teacher() and page not in room.APP_PAGE.values():
            room.fault_line()  # the card's dashboard says it on the pages it is drawn on
        if S.get(ENDED):  # one line, no more polling (the fragment is not drawn)
            st.info(t("live_ended"), icon=":material/event_busy:")
        return
    S.pop(ENDED, None)
    want = S.get(WANT_PAGE)
    if following() and want and want != page and want in pages:
        st.switch_page(pages[want])
    if not _fast():
        _follower_slow()
    elif live_push.ENABLED and following() and not S.get(push_view.NO_PUSH):  # drawn by push
        (_follower_pushed_beat if follow_push.beat_needed(S.get(VIEW)) else _follower_pushed)()
    else:
        _follower()


def _fast() -> bool:  # this tab is its seat's fast follower (room_limits.Tabs)
    s = room.seat()
    return s is not None and TABS.poll(s.student, tab_id(), client())


def _this_tab() -> None:
    if (s := room.seat()) is not None:
        TABS.claim(s.student, tab_id(), client())


@fragment(run_every=POLL_S)
def _follower() -> None:
    if not _fast():  # another tab of this browser took over: this one slows down
        st.rerun(scope="app")
    _follow_box(fast=True)


@fragment
def _follower_pushed() -> None:  # at rest: runs when its component asks (``follow_push``)
    _pushed(beat=False)


@fragment(run_every=PUSH_BEAT_S)
def _follower_pushed_beat() -> None:  # while something waits (``follow_push.beat_needed``)
    _pushed(beat=True)


def _pushed(beat: bool) -> None:
    if not _fast():
        st.rerun(scope="app")
    _follow_box(fast=True, pushed=True)
    if follow_push.beat_needed(st.session_state.get(VIEW)) != beat:  # e.g. an answer to retry
        st.rerun(scope="app")  # the other of the two fragments takes over


@fragment(run_every=SLOW_POLL_S)
def _follower_slow() -> None:
    if _fast():  # the fast tab went quiet (closed): this one takes over
        st.rerun(scope="app")
    _follow_box(fast=False)


def _fragment_run() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _due(fast: bool) -> bool:
    """Whether this poll reads the store: always in a full run; in a fragment rerun only
    when this tab's interval (1 s fast, 10 s slow, less 20 %) passed since its last read (a
    client sending polls faster, e.g. forty tabs, gets the last view redrawn)."""
    S, now = st.session_state, time.monotonic()
    fragment_run = _fragment_run()
    every = POLL_S if fast else SLOW_POLL_S
    if fragment_run and now - S.get(POLLED, 0.0) < 0.8 * every and VIEW in S:
        return False
    S[POLLED] = now
    return True


def _follow_box(fast: bool, pushed: bool = False) -> None:
    S = st.session_state
    due = _due(fast)
    if due:
        keep_seat()
    view = refresh() if due else S.get(VIEW)
    if due and view is not None:  # not a first vote's answer into its revote
        send_pending(view.question)
    room.fault_line()
    seat_hold.held_line(seats.label)  # another address holds this seat: say so, retry
    if view is None:
        if S.get(ENDED):
            st.rerun(scope="app")  # the full run says so, without this polling fragment
        if room.ERROR in S:
            st.error(error_message(S.pop(room.ERROR)))
        s = room.seat()
        if s is not None and not s.joined:
            st.caption(t("live_join_pending"))
        return
    if due and following():
        frame = room_frame(room.store(), view)
        if frame is None and target(view) != S.get(APPLIED):
            st.rerun(scope="app")  # the full run applies it (before the sidebar)
        S[FRAME] = frame
    if _fragment_run() and (following() and S.get(FRAME) is not None) != S.get(HIDDEN, False):
        st.rerun(scope="app")  # the page below shows the frame, or the replayed state again
    if room.ERROR in S:  # e.g. an answer sent after the reveal
        st.error(error_message(S.pop(room.ERROR)))
    with st.container(border=True, key="live_status"):
        if not fast:
            row = st.container(horizontal=True, vertical_alignment="center", gap="small")
            row.caption(t("live_other_tab", s=int(SLOW_POLL_S)))
            row.button(t("live_this_tab"), key="live_this_tab", on_click=_this_tab)
        row = st.container(horizontal=True, vertical_alignment="center", gap="small")
        seats.own_line(row)  # the id the teacher's seat list shows
        where = frame_view.teacher_at(view)
        if following():
            if not (pushed and S.get(FRAME) is not None):  # else the pushed screen says it
                row.markdown(t("live_following", where=where))
            row.button(t("live_explore"), key="live_explore", on_click=_explore)
        else:
            row.markdown(t("live_exploring", where=where))
            row.button(
                t("live_follow_again"), key="live_follow", on_click=_follow_again, type="primary"
            )
        if view.paused:  # the store serves the paused moment: this screen holds it
            st.markdown(f":material/pause_circle: **{t('live_paused')}**")
        question_box(view)
    if pushed and following():
        follow_push.mount(view, lambda: S.pop(POLLED, None))
    elif following() and S.get(FRAME) is not None:
        frame_view.draw(S[FRAME], bool(S.get("presenter")))
