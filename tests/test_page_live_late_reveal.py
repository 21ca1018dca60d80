# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""A round question left unrevealed (AppTest): once the teacher is at another round, Ask
the class stays (with a line saying the old question is closed unrevealed by a new one),
and a late reveal after a switch to the tree and back (the chain rebuilt, its rounds
gone) reveals the real outcome of the round the question was asked in; the rebuilt chain's
frame carries the tokens kept across the switch (the followers' line says why the rounds
count again)."""

from __future__ import annotations

from test_page_live import _ask_accept, click, session, store, teacher_app  # noqa: F401

from specdec_core.ui.i18n import tr
from specdec_core.ui.live.frames import chain_frame


def test_a_late_reveal_after_a_mode_switch_reveals_its_own_rounds_outcome(embedded_pair, store):
    teacher, seat = teacher_app()
    click(teacher, "btn_propose")
    click(teacher, "btn_verify")
    click(teacher, "btn_commit")  # round 1 done: the question is about round 2
    q = _ask_accept(teacher, seat, store, k=1)
    assert dict(q.params)["r"] == "1"
    click(teacher, "live_close_vote")
    assert not any(b.key == "live_ask" for b in teacher.button)  # its round is on screen
    click(teacher, "btn_verify")
    status = session(teacher).steps.current_verify.checks[0].status
    want = {"accepted": 0, "rejected": 1}[status]
    click(teacher, "btn_commit")
    teacher.segmented_control(key="step_mode_en").set_value("tree").run()
    teacher.segmented_control(key="step_mode_en").set_value("chain").run()
    assert not teacher.exception, teacher.exception
    click(teacher, "btn_propose")
    rebuilt = session(teacher)
    assert rebuilt.round_index != 1  # the chain was rebuilt: round 2 is not in it
    carried = len(rebuilt.ids) - rebuilt.prompt_len  # no round of its own committed yet
    assert chain_frame(rebuilt)["carried"] == carried > 0  # followers are told why
    assert any(b.key == "live_ask" for b in teacher.button)  # Ask is not blocked
    assert tr("live_ask_replaces", "en") in [c.value for c in teacher.caption]
    click(teacher, "live_reveal")
    got = store.view(seat.code, every_run=True).question  # the teacher's read
    assert (got.qid, got.revealed, got.correct) == (q.qid, True, want)
    assert store.view(seat.code).question is None  # another run: off the followers' screens
