"""Peer instruction in the room store, the same cases on SQLite and Redis (the fixtures of
``test_rooms.py``): vote → revote kept apart per seat, a countdown that refuses late
answers, closing a vote early, pause (followers hold the paused moment), the results per
question kept after the end until the room expires, the co-teacher's key (drives, does
not end), bad keys refused; and the results' CSV."""

from __future__ import annotations

import csv
import io
import threading

import pytest
import test_rooms

from specdec_core.server import rooms_redis, rooms_redis_peer, rooms_sqlite_peer
from specdec_core.server.room_results import (
    QuestionResult,
    csv_text,
    result_of,
    share_right,
)
from specdec_core.server.room_types import Question, RoomError
from specdec_core.server.rooms import RoomStore

T0 = test_rooms.T0
# the store fixtures of test_rooms.py: each backend, an injected clock
redis_url, make, clock, store = (
    test_rooms.redis_url,
    test_rooms.make,
    test_rooms.clock,
    test_rooms.store,
)


def _q(qid: str = "q1", n: int = 2) -> Question:
    return Question(qid, "accept", (("r", "0"), ("k", "1")), tuple(f"c{i}" for i in range(n)))


def _err(fn, *args, **kw) -> str:
    with pytest.raises(RoomError) as exc:
        fn(*args, **kw)
    return exc.value.code


def _room(store: RoomStore, students=("a", "b", "c")) -> tuple[str, str]:
    code, key = store.create()
    for s in students:
        store.join(code, s)
    return code, key


# ---------------------------------------------------------------- vote → revote
def test_a_revote_keeps_each_seats_first_vote_apart(store):
    code, key = _room(store)
    store.ask(code, key, _q(n=3))
    for s, c in (("a", 0), ("b", 1), ("c", 1)):
        store.answer(code, s, "q1", c)
    v = store.revote(code, key, "q1")
    view = store.view(code)
    assert (view.version, view.question.vote) == (v, 2)
    assert (view.counts, view.first, view.answered) == ((0, 0, 0), (1, 2, 0), 0)
    assert store.answer_of(code, "b", "q1") is None  # the revote starts empty
    for s, c in (("a", 0), ("b", 0), ("c", 2)):
        store.answer(code, s, "q1", c)
    view = store.view(code)
    assert (view.counts, view.first) == ((2, 0, 1), (1, 2, 0))
    assert store.answer_of(code, "b", "q1") == 0
    store.reveal(code, key, "q1", 0)
    (res,) = store.results(code, key)
    assert (res.first, res.revote, res.correct) == ((1, 2, 0), (2, 0, 1), 0)
    assert share_right(res.first, 0) == pytest.approx(1 / 3)
    assert share_right(res.revote, 0) == pytest.approx(2 / 3)


def test_a_revote_is_once_per_open_question(store):
    code, key = _room(store)
    store.ask(code, key, _q())
    assert _err(store.revote, code, key, "q2") == "room_vote"  # not the open question
    assert _err(store.revote, code, key, "bad id!") == "room_vote"
    store.revote(code, key, "q1")
    assert _err(store.revote, code, key, "q1") == "room_vote"  # a second revote
    store.reveal(code, key, "q1", 1)
    assert _err(store.revote, code, key, "q1") == "room_vote"  # after the reveal
    store.ask(code, key, _q("q2"))  # a new question starts at its first vote
    view = store.view(code)
    assert (view.question.vote, view.first, view.counts) == (1, (), (0, 0))


def test_removing_a_seat_removes_both_its_votes(store):
    code, key = _room(store)
    store.ask(code, key, _q())
    store.answer(code, "a", "q1", 1)
    store.revote(code, key, "q1")
    store.answer(code, "a", "q1", 0)
    store.remove(code, key, "a")
    view = store.view(code)
    assert (view.first, view.counts) == ((0, 0), (0, 0))


# ---------------------------------------------------------------- countdown
def test_a_countdown_refuses_answers_from_its_end(store, clock):
    code, key = _room(store)
    store.ask(code, key, _q(), duration_s=30)
    assert store.view(code).question.closes_at == T0 + 30
    clock.advance(29.9)
    store.answer(code, "a", "q1", 1)
    clock.advance(0.1)
    assert _err(store.answer, code, "b", "q1", 0) == "room_time_up"
    assert _err(store.answer, code, "a", "q1", 0) == "room_time_up"  # no change either
    assert store.view(code).counts == (0, 1)
    store.revote(code, key, "q1", duration_s=60)  # the revote has its own countdown
    assert store.view(code).question.closes_at == T0 + 30 + 60
    store.answer(code, "b", "q1", 0)
    assert store.view(code).counts == (1, 0)


def test_the_teacher_closes_a_vote_early(store, clock):
    code, key = _room(store)
    store.ask(code, key, _q())
    assert store.view(code).question.closes_at is None
    store.answer(code, "a", "q1", 0)
    v = store.close_vote(code, key, "q1")
    assert store.close_vote(code, key, "q1") == v  # closing a closed vote changes nothing
    assert store.view(code).question.closes_at == T0 and store.view(code).question.closed
    assert _err(store.answer, code, "b", "q1", 1) == "room_closed"  # not "time is up"
    assert store.view(code).counts == (1, 0)
    assert _err(store.close_vote, code, key, "q9") == "room_vote"
    store.reveal(code, key, "q1", 0)  # a closed vote is still revealed
    assert store.view(code).question.correct == 0


@pytest.mark.parametrize("duration", [0, 4, 601, 30.5, True, "30", -30])
def test_a_countdown_out_of_bounds_is_refused(store, duration):
    code, key = _room(store)
    assert _err(store.ask, code, key, _q(), duration_s=duration) == "room_vote"
    assert store.view(code).question is None
    store.ask(code, key, _q())
    assert _err(store.revote, code, key, "q1", duration_s=duration) == "room_vote"
    assert store.view(code).question.vote == 1


# ---------------------------------------------------------------- pause
def test_followers_hold_the_paused_moment_until_the_resume(store):
    code, key = _room(store)
    store.publish(code, key, "step", {"r": "1"})
    v1 = store.pause(code, key, True)
    assert store.pause(code, key, True) == v1  # pausing twice changes nothing
    v2 = store.publish(code, key, "lessons", {"chapter": "3"})  # the teacher prepares
    view = store.view(code)
    assert v2 > v1 and view.paused
    assert (view.page, view.state) == ("step", {"r": "1"})
    v3 = store.pause(code, key, False)
    view = store.view(code)
    assert v3 > v2 and not view.paused
    assert (view.page, view.state) == ("lessons", {"chapter": "3"})


def test_the_pause_holds_its_question_in_the_store_for_every_replica(make, clock):
    """Paused through one store object, read through another (a replica, a reload): the
    question as it was at the pause and the pause's time, whatever the teacher does
    meanwhile; the resume drops both."""
    one, two = make(clock=clock), make(clock=clock)
    code, key = _room(one)
    one.ask(code, key, _q(), duration_s=60)
    asked = one.view(code).question
    clock.advance(20)
    one.pause(code, key, True)
    clock.advance(15)
    two.reveal(code, key, "q1", 0)  # the teacher reveals while paused (another replica)
    view = two.view(code)
    assert view.paused and view.question.revealed and view.question.correct == 0
    assert view.held == asked and not view.held.revealed  # what the followers hold
    assert view.paused_at == T0 + 20 and view.held.closes_at - view.paused_at == 40
    two.pause(code, key, False)
    view = one.view(code)
    assert (view.paused, view.held, view.paused_at) == (False, None, None)
    assert view.question.revealed
    two.ask(code, key, _q("q2"))
    one.pause(code, key, True)
    two.reveal(code, key, "q2", None)
    two.ask(code, key, _q("q3"))  # a new question while paused: the followers hold q2
    view = two.view(code)
    assert (view.question.qid, view.held.qid, view.held.revealed) == ("q3", "q2", False)


def test_the_pause_freezes_the_countdown_and_the_resume_goes_on_from_it(make, clock):
    """Paused with 46 s left and held for 50 s (past the countdown's first end): the
    resume gives the vote its 46 s again, on every replica; an answer then is taken, one
    after those 46 s is late. A question without a countdown, or one whose countdown had
    ended at the pause, is left as it was."""
    one, two = make(clock=clock), make(clock=clock)
    code, key = _room(one)
    one.ask(code, key, _q(), duration_s=60)
    one.join(code, "s1")
    clock.advance(14)
    one.pause(code, key, True)
    clock.advance(50)
    view = two.view(code)
    assert view.held.closes_at - view.paused_at == 46  # what every follower shows, held
    two.pause(code, key, False)
    view = one.view(code)
    assert view.question.closes_at - clock() == 46 and view.held is None
    one.answer(code, "s1", "q1", 1)
    assert one.answer_of(code, "s1", "q1") == 1
    clock.advance(46)
    assert _err(one.answer, code, "s1", "q1", 0) == "room_time_up"
    one.pause(code, key, True)  # ended before the pause: the resume reopens nothing
    clock.advance(30)
    one.pause(code, key, False)
    assert one.view(code).question.closes_at == T0 + 60 + 50  # shifted by the first pause only
    one.ask(code, key, _q("q2"))  # no countdown: none after a pause either
    one.pause(code, key, True)
    clock.advance(5)
    one.pause(code, key, False)
    assert one.view(code).question.closes_at is None


def test_a_pause_without_a_question_holds_none(store):
    code, key = _room(store)
    store.pause(code, key, True)
    view = store.view(code)
    assert view.paused and view.held is None and view.paused_at == T0


# ---------------------------------------------------------------- results
def test_results_list_every_question_and_outlive_the_class(make, clock):
    store = make(clock=clock, ttl_s=3600)
    code, key = _room(store)
    co = store.co_teacher_key(code, key)
    store.ask(code, key, _q("q1"))
    store.answer(code, "a", "q1", 1)
    store.answer(code, "b", "q1", 1)
    store.reveal(code, key, "q1", 1)
    store.ask(code, key, _q("q2", n=4))
    store.answer(code, "c", "q2", 3)
    live = store.results(code, key)
    assert [(r.question.qid, r.first, r.revote, r.correct) for r in live] == [
        ("q1", (0, 2), None, 1),
        ("q2", (0, 0, 0, 1), None, None),
    ]
    clock.advance(600)
    store.close(code, key)  # the class ends at T0 + 600: kept until T0 + 600 + 3600
    assert _err(store.view, code) == "room_unknown"
    assert store.results(code, co) == live  # the co-teacher reads them too
    assert _err(store.results, code, "not-the-key") == "room_key"
    clock.advance(3599)
    store.purge()
    assert len(store.results(code, key)) == 2
    clock.advance(1)
    assert _err(store.results, code, key) == "room_unknown"
    store.purge()
    assert _err(store.results, code, key) == "room_unknown"


def test_a_room_keeps_at_most_max_results_questions(store, monkeypatch):
    for module in (rooms_sqlite_peer, rooms_redis, rooms_redis_peer):
        monkeypatch.setattr(module, "MAX_RESULTS", 3)
    code, key = _room(store)
    for i in range(5):
        store.ask(code, key, _q(f"q{i}"))
    assert [r.question.qid for r in store.results(code, key)] == ["q2", "q3", "q4"]
    store.close(code, key)
    assert [r.question.qid for r in store.results(code, key)] == ["q2", "q3", "q4"]


def test_an_expired_room_takes_its_results_with_it(make, clock):
    store = make(clock=clock, ttl_s=100)
    code, key = _room(store)
    store.ask(code, key, _q())
    store.ask(code, key, _q("q2"))
    assert len(store.results(code, key)) == 2
    clock.advance(101)
    assert _err(store.results, code, key) == "room_unknown"
    store.purge()
    assert _err(store.results, code, key) == "room_unknown"


# ---------------------------------------------------------------- co-teacher
def test_a_co_teacher_drives_the_class_but_cannot_end_it(store):
    code, key = _room(store)
    co = store.co_teacher_key(code, key)
    assert co != key and len(co) == 32
    assert (store.role(code, key), store.role(code, co)) == ("teacher", "co")
    v = store.publish(code, co, "step", {"r": "2"})
    assert store.view(code).state == {"r": "2"} and store.version(code) == v
    store.ask(code, co, _q(), duration_s=60)
    store.answer(code, "a", "q1", 0)
    store.close_vote(code, co, "q1")
    store.revote(code, co, "q1")
    store.reveal(code, co, "q1", 0)
    store.pause(code, co, True)
    assert store.view(code).paused
    assert [s.student for s in store.seats(code, co)] != []
    store.remove(code, co, "c")
    assert _err(store.close, code, co) == "room_co_teacher"
    assert _err(store.co_teacher_key, code, co) == "room_co_teacher"
    assert store.view(code).question.revealed  # still live
    again = store.co_teacher_key(code, key)  # a new co-teacher key replaces the old one
    assert _err(store.role, code, co) == "room_key"
    assert _err(store.publish, code, co, "step", {"r": "3"}) == "room_key"
    assert store.role(code, again) == "co"
    store.close(code, key)
    assert _err(store.view, code) == "room_unknown"


# ---------------------------------------------------------------- two drivers: compare-and-set
def test_a_publish_from_an_older_moment_is_refused_and_the_winners_stays(store):
    code, key = _room(store, ())
    co = store.co_teacher_key(code, key)
    base = store.view(code).version  # both drivers' screens agree with the room here
    won = store.publish(code, key, "step", {"r": "1"}, base=base)  # the teacher clicks first
    store.join(code, "a")  # a join bumps the version, not the moment
    assert _err(store.publish, code, co, "step", {"r": "9"}, base=base) == "room_moved"
    view = store.view(code)
    assert (view.state, view.moment, view.version) == ({"r": "1"}, won, won + 1)
    # the state the room already shows passes from any base (nothing to refuse)
    assert store.publish(code, co, "step", {"r": "1"}, base=base) == view.version
    # from the winner's moment (a later version: the join) the co-teacher's click goes
    moved = store.publish(code, co, "lessons", {"chapter": "2"}, base=view.version)
    view = store.view(code)
    assert (view.page, view.state, view.moment) == ("lessons", {"chapter": "2"}, moved)
    assert store.publish(code, key, "step", {"r": "2"}) > moved  # no base: no check
    assert _err(store.publish, code, key, "step", {"r": "3"}, base=moved) == "room_moved"


def test_near_simultaneous_clicks_of_two_replicas_have_one_winner(make):
    """Two store objects (replicas) and 8 threads publish from one base at once: exactly
    one publish is stored, every other is refused, and the room shows the winner's state."""
    one, two = make(), make()
    code, key = one.create()
    co = one.co_teacher_key(code, key)
    base = one.view(code).version
    start, got = threading.Barrier(8), {}

    def click(i: int) -> None:
        store, k = (one, key) if i % 2 else (two, co)
        start.wait()
        try:
            got[i] = store.publish(code, k, "step", {"r": str(i)}, base=base)
        except RoomError as exc:
            got[i] = exc.code

    threads = [threading.Thread(target=click, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    winners = [i for i, v in got.items() if isinstance(v, int)]
    assert len(got) == 8 and len(winners) == 1
    assert sorted(v for v in got.values() if not isinstance(v, int)) == ["room_moved"] * 7
    view = two.view(code)
    assert (view.state, view.moment) == ({"r": str(winners[0])}, got[winners[0]])


@pytest.mark.parametrize("bad", ["", "x" * 200, "clé", "wrong-key", None, 42])
def test_bad_keys_are_refused_everywhere(store, bad):
    code, key = _room(store)
    store.co_teacher_key(code, key)
    store.ask(code, key, _q())
    for call in (
        lambda: store.role(code, bad),
        lambda: store.pause(code, bad, True),
        lambda: store.revote(code, bad, "q1"),
        lambda: store.close_vote(code, bad, "q1"),
        lambda: store.results(code, bad),
        lambda: store.co_teacher_key(code, bad),
        lambda: store.close(code, bad),
    ):
        assert _err(call) == "room_key"
    view = store.view(code)
    assert (view.paused, view.question.vote, view.question.closes_at) == (False, 1, None)


# ---------------------------------------------------------------- the CSV
def test_the_csv_has_a_row_per_choice_and_escapes_formulas():
    q = Question("q1", "correction", (), ("=cmd()", "+1", "ok"))
    res = QuestionResult(q, correct=2, first=(2, 1, 1), revote=(0, 1, 3))
    open_q = QuestionResult(_q("q2"), correct=None, first=(1, 0), revote=None)
    header = [f"h{i}" for i in range(9)]
    text = csv_text([res, open_q], header, ["Which?", "@risk"], [q.choices, ["yes", "no"]])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == header
    assert rows[1] == ["1", "Which?", "1", "'=cmd()", "0", "2", "0", "25.0", "75.0"]
    assert rows[2] == ["1", "Which?", "2", "'+1", "0", "1", "1", "25.0", "75.0"]
    assert rows[3] == ["1", "Which?", "3", "ok", "1", "1", "3", "25.0", "75.0"]
    assert rows[4] == ["2", "'@risk", "1", "yes", "", "1", "", "", ""]
    assert len(rows) == 6


def test_a_lua_entry_with_empty_tables_reads_as_no_answers():
    from specdec_core.server.room_types import question_json

    text = '{"q":%s,"revealed":"0","correct":"","vote":"1","a":{},"f":{}}'
    res = result_of(text % __import__("json").dumps(question_json(_q())))
    assert (res.first, res.revote, res.correct) == ((0, 0), None, None)
