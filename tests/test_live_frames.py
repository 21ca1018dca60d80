# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""A live class's frames in the app (AppTest, one SQLite room store): a following
student's screen is the teacher's own strip, checks table (p, q, a, u and the verdicts at
the shown precision) and KV table, for a sampled chain round at every phase, with no model
forward in the student's session; the frame is read once per process and state, whatever
the number of followers; a stored frame that is not the followed state's, or not a frame,
is never drawn."""

from __future__ import annotations

import json

import pytest
from conftest import open_app
from test_page_live import (  # noqa: F401
    PROMPT,
    click,
    following_frame,
    frame,
    shown,
    store,
    student_app,
)

from specdec_core.core.numfmt import fmt_sig
from specdec_core.server.room_frames import state_digest
from specdec_core.ui.i18n import tr
from specdec_core.ui.live import frame_cache


@pytest.fixture
def forwards(embedded_pair):
    """Counts forwards of the pair's target and draft models (``calls[0]``) while on."""
    calls = [0]

    def hook(*_):
        calls[0] += 1

    handles = [m.register_forward_hook(hook) for m in (embedded_pair.target, embedded_pair.draft)]
    yield calls
    for h in handles:
        h.remove()


def sampled_teacher():
    """A teacher at T = 1 (the checks table shows p, q, a and u) who started a room."""
    at = open_app(prompt=PROMPT, state={"lt_open": True, "cfg_temperature": 1.0})
    click(at, "live_start_step")
    return at, at.session_state["live_seat"]


def test_a_follower_shows_the_teachers_sampled_round_without_a_forward(
    embedded_pair, store, forwards
):
    teacher, seat = sampled_teacher()
    students = [open_app({"room": seat.code}) for _ in range(2)]
    for step, phase in (
        ("btn_propose", "verify"),
        ("btn_verify", "commit"),
        ("btn_commit", "propose"),
    ):
        click(teacher, step)
        before = forwards[0]
        for s in students:
            s.run()
            assert following_frame(s) and frame(s)["phase"] == phase
            assert shown(s) == shown(teacher)  # the strip, checks and KV table, as drawn
            assert "lesson" not in s.session_state
        assert forwards[0] == before  # no model forward for the followers
    checks = shown(teacher)[1]
    assert "a = min(1, p/q)" in checks and "checks-table" in checks  # the sampled table
    got = frame(students[0])
    assert got["round"] == 1 and got["chart"]["kind"] in ("check", "bonus")
    assert all(c["u"] is not None for c in got["checks"] if c["status"] in ("accepted", "rejected"))


def test_a_frame_is_read_once_per_process_and_state(embedded_pair, store, monkeypatch):
    teacher, seat = sampled_teacher()
    students = [open_app({"room": seat.code}) for _ in range(3)]
    click(teacher, "btn_propose")
    frame_cache._CACHE.clear()  # as on another replica: nothing of the teacher's here
    reads = []
    real = type(store).frame
    monkeypatch.setattr(
        type(store), "frame", lambda self, code, d: reads.append(code) or real(self, code, d)
    )
    for s in students:
        s.run()
        assert frame(s)["phase"] == "verify"
    assert reads == [seat.code]  # three followers, one store read


def test_a_frame_of_another_state_or_no_frame_is_not_drawn(embedded_pair, store):
    code, key = store.create()
    state = {"lang": "en", "s": "x"}
    store.put_frame(code, key, state_digest("step", {"lang": "en", "s": "y"}), '{"v":1}')
    assert frame_cache.frame_for(store, code, "step", state) is None  # the teacher moved on
    good = {"v": 1, "shape": "chain", "strip": []}
    store.put_frame(code, key, state_digest("step", state), json.dumps(good))
    assert frame_cache.frame_for(store, code, "step", state) == good  # not cached as missing
    for junk in ("not json", "[1]", '{"v": 2, "shape": "chain", "strip": []}', '{"v": 1}'):
        assert frame_cache.decode(junk) is None


def test_a_pushed_follower_mounts_the_push_screen_and_polls_when_it_cannot(
    embedded_pair, store, monkeypatch
):
    """With the push route served (``live_push.ENABLED``) a following tab mounts the push
    screen (room, its language, what it shows) and draws nothing itself; the frame carries
    the teacher's drawing in both languages. A browser that cannot hold the socket
    (``nopush``) follows by the fragment's polls and draws the frame itself."""
    from specdec_core.server import live_push, live_push_seats
    from specdec_core.ui.live import push_view

    monkeypatch.setattr(live_push, "ENABLED", True)
    mounted = []
    monkeypatch.setattr(push_view, "pushed", lambda *a: mounted.append(a) or None)
    teacher, seat = sampled_teacher()
    student = open_app({"room": seat.code, "lang": "zh"})
    click(teacher, "btn_propose")
    student.run()
    assert mounted[-1][:3] == (seat.code, "zh", "step|")
    own = student.session_state["live_seat"].student  # the seat, signed for the push hub
    assert live_push_seats.read(mounted[-1][4], seat.code)[0] == own
    assert following_frame(student) and shown(student) == []  # the browser draws it
    html = frame(student)["html"]
    assert "第 1 轮" in html["zh"] and "round 1" in html["en"]
    assert shown(teacher)[0] in html["en"]  # the teacher's own strip, as drawn
    monkeypatch.setattr(push_view, "pushed", lambda *a: "nopush")
    student.run()
    assert student.session_state["live_no_push"] is True
    mine, theirs = shown(student), shown(teacher)  # drawn by the polling fragment, in zh
    assert len(mine) == len(theirs) and mine[0].split("</div>")[0] == theirs[0].split("</div>")[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_block_verification_recurrent_teachers_followers_see_its_columns_and_state(
    embedded_pair, store, lang
):
    """Under block verification with the recurrent drafter the follower's checks table is
    the teacher's (p′, h, token-wise's decision, the block verdicts) and its draft counter
    names the recurrent state, as the step page does; in both languages."""
    state = {"lt_open": True, "cfg_temperature": 1.0, "cfg_verification": "block"}
    teacher = open_app(prompt=PROMPT, state=state | {"cfg_drafter": "recurrent"})
    click(teacher, "live_start_step")
    seat = teacher.session_state["live_seat"]
    student = student_app(seat.code, lang)
    click(teacher, "btn_propose")
    click(teacher, "btn_verify")
    student.run()
    got = frame(student)
    assert following_frame(student) and got["block"]["kept"] >= 0 and got["kv"]["recurrent"]
    table = [h for h in shown(student) if "checks-table" in h][0]
    for key in ("st_bv_col_weight", "st_bv_col_h", "st_bv_col_token_wise"):
        assert tr(key, lang) in table, key
    weights = [fmt_sig(w) for w in got["block"]["weights"]]
    assert all(w in table for w in weights)
    counters = " ".join(m.value for m in student.markdown)
    assert tr("kv_draft_state_len", lang) in counters
    assert tr("kv_draft_len", lang) not in counters
    if lang == "en":  # the teacher's screen is in English: the same table, cell for cell
        assert table in shown(teacher)
