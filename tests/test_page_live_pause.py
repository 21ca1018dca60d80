# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""Pause freezes a question's countdown on every screen (AppTest, the store's clock
injected): paused with 46 s left and held 50 s, the student's screen still says 46 s left
beside "paused" (never "voting is closed"), the teacher's too with Close voting still
offered; the resume opens the vote again with those 46 s. An answer that comes after the
teacher closed the vote by hand is told so (not "the time is up")."""

from __future__ import annotations

import pytest
import test_page_live as P
from test_page_live import store  # noqa: F401
from test_page_live_peer import _ask, _texts

from specdec_core.ui.i18n import tr


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pause_freezes_the_countdown_and_the_resume_gives_it_back(embedded_pair, store, lang):
    teacher, seat = P.teacher_app()  # the teacher in English, the student in ``lang``
    student = P.student_app(seat.code, lang)
    _ask(teacher, 60)
    q = store.view(seat.code).question
    key, asked, real = f"live_answer_{q.qid}", q.closes_at - 60, store.clock
    left, up = tr("live_time_left", lang).format(s=46), tr("live_time_up", lang)
    try:
        store.clock = lambda: asked + 14
        student.run()
        P.click(teacher, "live_pause")
        store.clock = lambda: asked + 64  # 50 s paused: past the countdown's first end
        student.run()
        teacher.run()
        radio = student.radio(key=key)
        assert radio.disabled and radio.label == tr("live_your_answer_paused", lang)
        assert left in _texts(student) and up not in _texts(student)
        held = tr("live_time_left", "en").format(s=46)
        assert held in _texts(teacher) and tr("live_time_up", "en") not in _texts(teacher)
        assert any(b.key == "live_close_vote" for b in teacher.button)
        P.click(teacher, "live_resume")
        student.run()
        radio = student.radio(key=key)
        assert not radio.disabled and radio.label == tr("live_your_answer", lang)
        assert left in _texts(student) and up not in _texts(student)
        radio.set_value(1).run()
        assert store.answer_of(seat.code, student.session_state["live_seat"].student, q.qid) == 1
    finally:
        store.clock = real


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_answer_after_the_teacher_closed_the_vote_says_so(embedded_pair, store, lang):
    teacher, seat = P.teacher_app()
    student = P.student_app(seat.code, lang)
    _ask(teacher)  # no countdown: only the teacher closes this vote
    q = store.view(seat.code).question
    student.run()
    P.click(teacher, "live_close_vote")
    student.radio(key=f"live_answer_{q.qid}").set_value(0).run()  # clicked before it knew
    said = [e.value for e in student.error]
    assert [m for m in said if tr("err_room_closed", lang) in m] and len(said) == 1
    assert not [m for m in said if tr("err_room_time_up", lang) in m]
    assert store.view(seat.code).counts == (0, 0)
