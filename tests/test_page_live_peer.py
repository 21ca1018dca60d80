"""Peer instruction in the app (AppTest; the fixtures and helpers of ``test_page_live.py``):
vote → revote with both votes on the teacher's chart and the shift after the reveal; a
countdown the students see, closed early or run out, a late answer refused with one
message; pause holds the followers on the paused moment and resume brings them on; the
results' CSV during and after the class; the co-teacher link drives but does not end.
The teacher runs in English (AppTest formats a select box's options in the test's
language); the students in both."""

from __future__ import annotations

import csv
import io
import json

import pytest
import test_page_live as P
from conftest import open_app

from specdec_core.ui.i18n import tr
from specdec_core.ui.live import frames

store = P.store  # the fixture: a fresh SQLite room store for the test


def _chart(at) -> list[dict]:
    charts = [c for c in at.get("plotly_chart") if c.proto.id.endswith("live_chart")]
    return json.loads((charts or at.get("plotly_chart"))[0].proto.spec)["data"]


def _ask(teacher, seconds: int = 0):
    """Propose, then ask "Will position 1 be accepted?" (the default kind) with a
    countdown of ``seconds`` (set through the session: AppTest matches a select box's
    value by the label in the test's language)."""
    P.click(teacher, "btn_propose")
    if seconds:
        teacher.session_state["live_timer"] = seconds
        teacher.run()
    P.click(teacher, "live_ask")


def _texts(at) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.caption, *at.error, *at.info])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_vote_discuss_revote_and_the_shift_on_the_projector(embedded_pair, store, lang):
    teacher, seat = P.teacher_app()
    a, b = P.student_app(seat.code, lang), P.student_app(seat.code, lang)
    _ask(teacher)
    q = store.view(seat.code).question
    for s, choice in ((a, 0), (b, 1)):
        s.run()
        s.radio(key=f"live_answer_{q.qid}").set_value(choice).run()
    P.click(teacher, "live_revote")
    assert store.view(seat.code).question.vote == 2
    for s in (a, b):
        s.run()
        assert s.radio(key=f"live_answer_{q.qid}_2").value is None  # a new, empty vote
        assert tr("live_revote_line", lang) in _texts(s)
    a.radio(key=f"live_answer_{q.qid}_2").set_value(0).run()
    b.radio(key=f"live_answer_{q.qid}_2").set_value(0).run()
    teacher.run()
    first, again = _chart(teacher)
    assert (first["y"], again["y"]) == ([1, 1], [2, 0])
    assert (first["name"], again["name"]) == ("First vote", "Revote")
    assert not any(bt.key == "live_revote" for bt in teacher.button)  # one revote
    P.click(teacher, "live_reveal")
    correct = store.view(seat.code).question.correct
    session = teacher.session_state["step_session"]  # the round the reveal verified
    record = session.current_record or session.history[0].record
    assert correct == (0 if record.statuses[0] == "accepted" else 1)
    share = {0: ("50 %", "100 %"), 1: ("50 %", "0 %")}[correct]
    line = tr("live_shift", "en").format(a=share[0], b=share[1])
    assert line in _texts(teacher)
    a.run()
    radio = a.radio(key=f"live_answer_{q.qid}_2")
    assert radio.disabled and radio.label == tr("live_your_answer_revealed", lang)
    assert (
        radio.label
        == {
            "en": "Your answer (the question is revealed: voting is closed)",
            "zh": "你的回答（本题已揭晓：投票已结束）",
        }[lang]
    )


def test_a_countdown_shows_closes_and_refuses_a_late_answer(embedded_pair, store):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    _ask(teacher, 30)
    q = store.view(seat.code).question
    assert q.closes_at == pytest.approx(store.clock() + 30, abs=5)
    student.run()
    assert "s left to answer" in _texts(student) and "s left to answer" in _texts(teacher)
    radio = student.radio(key=f"live_answer_{q.qid}")
    assert not radio.disabled
    real = store.clock
    try:
        store.clock = lambda: real() + 31  # the countdown ran out
        student.session_state["live_pending"] = (q.qid, 0, 1)  # an answer sent too late
        student.run()
        assert student.radio(key=f"live_answer_{q.qid}").disabled
        assert tr("live_time_up", "en") in _texts(student)
        assert [e.value for e in student.error if tr("err_room_time_up", "en") in e.value]
        assert store.view(seat.code).counts == (0, 0)
        student.run()  # said once
        assert not [e for e in student.error if tr("err_room_time_up", "en") in e.value]
    finally:
        store.clock = real


def test_the_teacher_closes_voting_early(embedded_pair, store):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code, "zh")
    _ask(teacher)
    q = store.view(seat.code).question
    student.run()
    assert student.radio(key=f"live_answer_{q.qid}").label == tr("live_your_answer", "zh")
    student.radio(key=f"live_answer_{q.qid}").set_value(1).run()
    P.click(teacher, "live_close_vote")
    assert store.view(seat.code).question.closes_at is not None
    assert tr("live_time_up", "en") in _texts(teacher)
    student.run()
    assert tr("live_time_up", "zh") in _texts(student)
    radio = student.radio(key=f"live_answer_{q.qid}")
    assert radio.disabled and radio.value == 1  # the answer given stays shown
    assert radio.label == tr("live_your_answer_closed", "zh")  # not "change it until …"
    assert store.view(seat.code).counts == (0, 1)  # the answer given in time counts


def test_pause_holds_the_followers_and_resume_brings_them_on(embedded_pair, store):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    P.click(teacher, "btn_propose")
    student.run()
    P.same_moment(teacher, student)
    held = P.frame(student)["phase"]  # the teacher's frame of the moment (no replay)
    P.click(teacher, "live_pause")
    assert tr("live_paused_teacher", "en") in " ".join(w.value for w in teacher.warning)
    P.click(teacher, "btn_verify")  # the teacher prepares while paused
    student.run()
    student.run()
    assert P.frame(student)["phase"] == held != P.session(teacher).phase
    assert tr("live_paused", "en") in _texts(student)
    P.click(teacher, "live_resume")
    student.run()
    student.run()
    P.same_moment(teacher, student)
    assert tr("live_paused", "en") not in _texts(student)


def test_results_csv_during_and_after_the_class(embedded_pair, store):
    lang = "en"
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    _ask(teacher)
    q = store.view(seat.code).question
    student.run()
    student.radio(key=f"live_answer_{q.qid}").set_value(1).run()
    teacher.run()
    assert any(d.key == "live_results_csv" for d in teacher.get("download_button"))
    rows = list(csv.reader(io.StringIO(teacher.session_state["live_results_built"][3])))
    assert rows[0] == tr("live_csv_header", lang).split("|")
    assert [r[2:7] for r in rows[1:]] == [
        ["1", tr("live_yes", lang), "", "0", ""],
        ["2", tr("live_no", lang), "", "1", ""],
    ]
    P.click(teacher, "live_reveal")
    correct = store.view(seat.code).question.correct + 1  # the real outcome, 1 or 2
    P.click(teacher, "live_end")
    assert any(c.key == "live_after" for c in teacher.get("flex_container"))
    assert tr("live_results_ended", lang).format(code=seat.code) in _texts(teacher)
    rows = list(csv.reader(io.StringIO(teacher.session_state["live_results_built"][3])))
    assert [r[4] for r in rows[1:]] == [str(int(correct == 1)), str(int(correct == 2))]
    assert rows[1][7] == ("0.0" if correct == 1 else "100.0")
    P.click(teacher, "live_after_dismiss")
    assert not any(c.key == "live_after" for c in teacher.get("flex_container"))


def test_a_co_teacher_drives_the_class_but_does_not_end_it(embedded_pair, store):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    P.click(teacher, "live_co_make")
    code, co_key = teacher.session_state["live_co_key"]
    assert code == seat.code and co_key != seat.key
    assert any(c.value.endswith(f"&teacher={co_key}") for c in teacher.code)
    co = open_app({"room": seat.code, "teacher": co_key})
    s = co.session_state["live_seat"]
    assert (s.role, s.co) == ("teacher", True)
    assert not any(bt.key in ("live_end", "live_co_make") for bt in co.button)
    P.click(co, "btn_propose")  # the co-teacher's click moves the room
    student.run()
    P.same_moment(co, student)
    P.click(co, "live_ask")
    assert store.view(seat.code).question is not None
    P.click(co, "live_leave")
    assert store.view(seat.code).question is not None  # the class runs on
    assert "live_seat" not in co.session_state
    wrong = open_app({"room": seat.code, "teacher": co_key + "x"})
    assert "live_seat" not in wrong.session_state and len(wrong.error) == 1


def _spent_rate(monkeypatch, student) -> list[float]:
    """The answer rate of ``student``'s seat on a clock the test moves (``now[0]``, s),
    its burst spent: its next answer waits 2 s."""
    from specdec_core.server import room_limits
    from specdec_core.ui.live import answer

    now = [0.0]
    buckets = room_limits.Buckets(clock=lambda: now[0])
    monkeypatch.setattr(answer, "BUCKETS", buckets)
    sid = student.session_state["live_seat"].student
    while not buckets.take("answer", sid):
        pass
    return now


def test_an_answer_held_by_the_rate_goes_before_the_countdown_ends(
    embedded_pair, store, monkeypatch
):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    _ask(teacher, 30)
    q = store.view(seat.code).question
    student.run()
    _spent_rate(monkeypatch, student)
    key, asked, real = f"live_answer_{q.qid}", q.closes_at - 30, store.clock
    try:
        store.clock = lambda: asked + 10  # 20 s left: the answer waits for its token
        student.radio(key=key).set_value(0).run()
        assert store.view(seat.code).counts == (0, 0)
        assert student.session_state["live_pending"] == (q.qid, 0, 1)
        store.clock = lambda: asked + 29  # 1 s left: the token would come after the end
        student.run()
        assert store.view(seat.code).counts == (1, 0)  # sent in time, not refused as late
        assert "live_pending" not in student.session_state
        student.radio(key=key).set_value(1).run()  # the seat's last-call token is spent
        assert store.view(seat.code).counts == (1, 0)
        assert student.session_state["live_pending"] == (q.qid, 1, 1)
    finally:
        store.clock = real


def test_a_first_vote_answer_still_waiting_is_not_counted_in_the_revote(
    embedded_pair, store, monkeypatch
):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code)
    _ask(teacher)
    q = store.view(seat.code).question
    student.run()
    now = _spent_rate(monkeypatch, student)
    student.radio(key=f"live_answer_{q.qid}").set_value(1).run()
    assert student.session_state["live_pending"] == (q.qid, 1, 1)  # held by the rate
    P.click(teacher, "live_revote")
    now[0] = 60.0  # the seat's tokens are back
    student.run()
    view = store.view(seat.code)
    assert (view.question.vote, view.counts, view.first) == (2, (0, 0), (0, 0))
    assert "live_pending" not in student.session_state
    assert student.radio(key=f"live_answer_{q.qid}_2").value is None


def test_two_drivers_converge_and_a_stale_click_does_not_pull_the_class_back(embedded_pair, store):
    teacher, seat = P.teacher_app()
    P.click(teacher, "live_co_make")
    co = open_app({"room": seat.code, "teacher": teacher.session_state["live_co_key"][1]})
    student = P.student_app(seat.code)
    P.click(co, "btn_propose")
    P.click(co, "btn_verify")  # the co-teacher moves the class on
    moved = dict(store.view(seat.code).state)
    P.click(teacher, "btn_propose")  # a click on the teacher's screen from the older moment
    assert dict(store.view(seat.code).state) == moved  # the class was not pulled back
    P.same_moment(co, teacher)  # the teacher's screen went to the class's moment
    assert [i for i in teacher.info if i.value == tr("live_moved_on", "en")]
    teacher.run()
    assert not [i for i in teacher.info if i.value == tr("live_moved_on", "en")]  # said once
    P.click(teacher, "btn_commit")  # now the teacher's click moves the class
    assert dict(store.view(seat.code).state) != moved
    co.run()  # and the co-teacher's screen follows it
    P.same_moment(teacher, co)
    student.run()
    P.same_moment(teacher, student)


def test_a_click_racing_the_other_drivers_is_refused_by_the_store(
    embedded_pair, store, monkeypatch
):
    """The two drivers click within one store round trip: the co-teacher's publish lands
    between the teacher screen's own check (no move seen) and its publish. The store's
    compare-and-set refuses the later one; that screen says so once and goes to the
    winner's moment."""
    teacher, seat = P.teacher_app()
    P.click(teacher, "live_co_make")
    co = open_app({"room": seat.code, "teacher": teacher.session_state["live_co_key"][1]})
    co_key = teacher.session_state["live_co_key"][1]
    P.click(co, "btn_propose")
    shown = store.view(seat.code)
    P.click(co, "btn_verify")
    P.click(co, "btn_commit")
    won = dict(store.view(seat.code).state)  # the co-teacher's clicks, replayed in the race
    store.publish(seat.code, co_key, shown.page, shown.state)  # back to the proposed moment
    teacher.run()  # the teacher's screen agrees with the proposed moment
    real, raced = frames.publish_frame, []

    def racing(*args) -> None:  # the other driver's publish lands in the window
        real(*args)
        if not raced:
            raced.append(store.publish(seat.code, co_key, "step", won))

    monkeypatch.setattr(frames, "publish_frame", racing)
    said = tr("live_moved_on", "en")
    P.click(teacher, "btn_verify")  # the teacher's click, a moment after the co-teacher's
    assert raced
    assert dict(store.view(seat.code).state) == won  # refused: the class was not pulled back
    told = [i.value for i in teacher.info].count(said)
    teacher.run()
    told += [i.value for i in teacher.info].count(said)
    P.same_moment(co, teacher)  # the teacher's screen shows the winner's moment
    assert told == 1 and not teacher.error  # said once
    teacher.run()
    assert said not in [i.value for i in teacher.info]


def test_pause_holds_the_question_its_countdown_and_reveal_for_followers(embedded_pair, store):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code, "zh")
    _ask(teacher, 30)
    q = store.view(seat.code).question
    key, asked, real = f"live_answer_{q.qid}", q.closes_at - 30, store.clock
    said = tr("live_outcome", "zh").split("**")[0]  # "真实结果："

    def outcome_shown() -> bool:
        return any(said in m.value for m in [*student.success, *student.error])

    try:
        store.clock = lambda: asked + 10
        student.run()
        student.radio(key=key).set_value(0).run()
        P.click(teacher, "live_pause")
        student.run()
        P.click(teacher, "live_reveal")  # the teacher reveals while the class is paused
        store.clock = lambda: asked + 25
        student.run()
        radio = student.radio(key=key)
        assert radio.disabled and radio.label == tr("live_your_answer_paused", "zh")
        assert tr("live_time_left", "zh").format(s=20) in _texts(student)  # held at 20 s
        assert tr("live_time_left", "zh").format(s=5) not in _texts(student)
        assert tr("live_paused", "zh") in _texts(student) and not outcome_shown()
        late = P.student_app(seat.code, "zh")  # a reload: a new session, while paused
        assert tr("live_time_left", "zh").format(s=20) in _texts(late)  # the store's hold
        assert late.radio(key=key).disabled and tr("live_paused", "zh") in _texts(late)
        assert not [m for m in [*late.success, *late.error] if said in m.value]
        P.click(teacher, "live_resume")
        student.run()
        assert outcome_shown() and tr("live_paused", "zh") not in _texts(student)
        assert student.radio(key=key).label == tr("live_your_answer_revealed", "zh")
    finally:
        store.clock = real


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_first_vote_without_a_revote_is_told_it_missed_the_revote(embedded_pair, store, lang):
    """Voted in the first vote, not in the revote: the reveal says the revote (which the
    chart counts) was missed, not that the student never answered."""
    teacher, seat = P.teacher_app()
    a, b = P.student_app(seat.code, lang), P.student_app(seat.code, lang)
    _ask(teacher)
    q = store.view(seat.code).question
    a.run()
    a.radio(key=f"live_answer_{q.qid}").set_value(0).run()
    P.click(teacher, "live_revote")
    b.run()
    b.radio(key=f"live_answer_{q.qid}_2").set_value(1).run()
    P.click(teacher, "live_reveal")
    a.run()
    missed = {"en": "you did not answer the revote", "zh": "你没有参加重新投票"}[lang]
    never = {"en": "(you did not answer)", "zh": "（你没有作答）"}[lang]
    assert missed in _texts(a) and never not in _texts(a)
