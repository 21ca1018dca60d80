# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""A live class that ended, on a follower's screen (AppTest): every way a tab learns of it
(its poll, a heartbeat, a reload of the join link) says "The live class has ended" in the
student's language, never "no live class has this code"; a following student keeps the
class's text (the teacher's last moment replayed, not the app's default prompt); a
reload of an ended class's join link costs the address no guess."""

from __future__ import annotations

import pytest
from conftest import open_app
from test_page_live import PROMPT, click, session, store, student_app, teacher_app  # noqa: F401

from specdec_core.ui.i18n import tr
from specdec_core.ui.live import room


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_ended_class_keeps_its_text_and_says_it_ended(embedded_pair, store, lang):
    teacher, seat = teacher_app()
    student = student_app(seat.code, lang)
    click(teacher, "btn_propose")
    click(teacher, "btn_verify")
    student.run()
    assert student.session_state["live_page_hidden"]  # the teacher's frame, no replay
    click(teacher, "live_end")
    student.run()
    ended = tr("live_ended", lang)
    assert [i.value for i in student.info].count(ended) == 1
    assert not student.error
    # the class's last moment replayed here, not the default prompt
    assert student.session_state["st_prompt"] == PROMPT and session(student).phase == "commit"
    student.run()
    assert [i.value for i in student.info].count(ended) == 1
    assert student.session_state["st_prompt"] == PROMPT


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_heartbeat_into_an_ended_class_says_it_ended(embedded_pair, store, lang, monkeypatch):
    teacher, seat = teacher_app()
    student = student_app(seat.code, lang)
    seen = student.session_state["live_seen"]
    click(teacher, "live_end")
    # the poll read the version just before the end, the seat's heartbeat comes just after
    monkeypatch.setattr(type(store), "_version", lambda self, code, now: seen)
    student.session_state["live_beat_at"] = -1e9
    student.run()
    assert [i.value for i in student.info].count(tr("live_ended", lang)) == 1
    assert not student.error


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_reopening_an_ended_class_costs_no_guess(embedded_pair, store, lang, monkeypatch):
    teacher, seat = teacher_app()
    click(teacher, "live_end")
    taken = []
    monkeypatch.setattr(room.BUCKETS, "take", lambda kind, who: taken.append(kind) or 0.0)
    stale = open_app({"room": seat.code, "lang": lang})
    assert [i.value for i in stale.info].count(tr("live_ended", lang)) == 1
    assert not stale.error and "live_seat" not in stale.session_state
    assert taken == ["join"]  # not a guess
    wrong = open_app({"room": "ZZZZZZ", "lang": lang})
    assert wrong.error and taken == ["join", "join", "guess"]
