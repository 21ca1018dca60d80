# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""The teacher's seat list matches the students' screens (AppTest): the rows stay in one
order (the seat ids') whatever heartbeats come in, every student's screen shows its own
seat id as the list does, in both languages, and each row's Remove removes that row's
seat; one address holds a seat at a time, and Release hands it over."""

from __future__ import annotations

import pytest
from test_page_live import (  # noqa: F401
    _ask_accept,
    click,
    in_browser,
    store,
    student_app,
    teacher_app,
)

from specdec_core.ui.i18n import tr
from specdec_core.ui.live.room import Seat
from specdec_core.ui.live.seats import label


def _rows(teacher) -> list[str]:
    """The seat ids of the list's Remove buttons, top to bottom."""
    return [
        b.key.removeprefix("live_remove_")
        for b in teacher.button
        if (b.key or "").startswith("live_remove_")
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_list_keeps_its_order_and_each_screen_shows_its_seat(
    embedded_pair, store, monkeypatch, lang
):
    clock = [store.clock()]
    monkeypatch.setattr(store, "clock", lambda: clock[0])
    teacher, seat = teacher_app()
    students = [student_app(seat.code, lang) for _ in range(3)]
    ids = [s.session_state["live_seat"].student for s in students]
    for at, sid in zip(students, ids, strict=True):
        mine = tr("live_your_seat", lang).format(seat=label(sid))
        assert mine in [c.value for c in at.caption]
        assert mine.replace("**", "").endswith(sid[:6].upper())
    teacher.toggle(key="live_seats_on").set_value(True).run()
    before = _rows(teacher)
    assert before == sorted(ids)
    for at in reversed(students):  # heartbeats in another order: the rows stay
        clock[0] += 3.0
        at.session_state["live_beat_at"] = -1e9
        at.run()
        teacher.run()
        assert _rows(teacher) == before
    victim = before[1]  # the middle row's Remove removes the middle row's seat
    click(teacher, f"live_remove_{victim}")
    left = {s.student for s in store.seats(seat.code, seat.key)}
    assert left == set(ids) - {victim} and _rows(teacher) == [before[0], before[2]]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_leaked_seat_cookie_from_another_address_is_held_off_until_released(
    embedded_pair, store, monkeypatch, lang
):
    """The student's browser (school address) holds its seat; the same cookie opened from
    another address joins nothing: its screen says the seat is in use (its id, the lease),
    its answer is not counted; a reload from the student's address keeps the seat and the
    vote; the teacher's Release hands the seat to whoever claims it next (a student whose
    address changed), and the old holder's next beat is refused in turn."""
    clock = [store.clock()]
    monkeypatch.setattr(store, "clock", lambda: clock[0])
    teacher, seat = teacher_app()
    q = _ask_accept(teacher, seat, store)
    key = f"live_answer_{q.qid}"
    cookie = b"student-cookie-0001"
    mine = in_browser(monkeypatch, cookie, student_app, seat.code, lang, address="addr:10.0.0.5")
    sid = mine.session_state["live_seat"].student
    mine.radio(key=key).set_value(1).run()
    leak = in_browser(monkeypatch, cookie, student_app, seat.code, lang, address="addr:203.0.113.7")
    assert leak.session_state["live_seat"] == Seat("student", seat.code, student=sid, joined=False)
    held = tr("live_seat_held", lang).format(seat=label(sid), s=45)
    assert [w.value for w in leak.warning] == [held]
    leak.radio(key=key).set_value(0).run()  # not counted: the seat is not this address's
    assert store.view(seat.code).counts == (0, 1)
    again = in_browser(monkeypatch, cookie, student_app, seat.code, lang, address="addr:10.0.0.5")
    assert again.session_state["live_seat"].joined and not again.warning  # a reload: kept
    teacher.toggle(key="live_seats_on").set_value(True).run()
    click(teacher, f"live_release_{sid}")
    clock[0] += 1.0
    leak.session_state["live_beat_at"] = -1e9  # its next beat claims the released seat
    leak.run()
    assert leak.session_state["live_seat"].joined and not leak.warning
    leak.radio(key=key).set_value(0).run()
    assert store.view(seat.code).counts == (1, 0)  # one seat, one vote: now this screen's
    again.session_state["live_beat_at"] = -1e9
    again.run()
    assert not again.session_state["live_seat"].joined
    assert [w.value for w in again.warning] == [
        tr("live_seat_held", lang).format(seat=label(sid), s=45)
    ]
