# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""The teacher's seat list matches the students' screens (AppTest): the rows stay in one
order (the seat ids') whatever heartbeats come in, every student's screen shows its own
seat id as the list does, in both languages, and each row's Remove removes that row's
seat."""

from __future__ import annotations

import pytest
from test_page_live import click, store, student_app, teacher_app  # noqa: F401

from specdec_core.ui.i18n import tr
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
