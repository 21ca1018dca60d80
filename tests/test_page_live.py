"""A live class in the app (AppTest; teacher and student sessions in one process, one
SQLite room store in ``tmp_path``): the teacher starts a room (code, join link without the
key, QR code), students follow the teacher's round (its frame, drawn without a replay),
explore (the teacher's state replayed in their own session) and follow again,
answer a question (counts on the teacher's chart, an answer changed), the reveal shows the
real outcome; a bad code gets one message; a forged publish fails; both languages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import open_app

from specdec_core.lessons.replay import timeless_json
from specdec_core.server import room_store
from specdec_core.ui.i18n import plural, tr
from specdec_core.ui.live import follow, identity, seat_hold
from specdec_core.ui.live.questions import label
from specdec_core.ui.live.room import Seat

PROMPT = "ROMEO:\nBut soft, what light"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite room store in ``tmp_path`` for this test (the process's store is
    made again from ``SPECDEC_ROOM_DB``)."""
    monkeypatch.setenv("SPECDEC_ROOM_DB", str(tmp_path / "rooms.sqlite3"))
    monkeypatch.delenv("SPECDEC_REDIS_URL", raising=False)
    monkeypatch.setattr(room_store, "_store", None)
    yield room_store.make_store()
    monkeypatch.setattr(room_store, "_store", None)


def xsrf_cookie(token: bytes) -> str:
    """A Streamlit XSRF cookie holding ``token`` under a fresh random mask (as every page
    load writes it: the mask changes, the token does not)."""
    import os

    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(token))
    return f"2|{mask.hex()}|{masked.hex()}|1700000000"


#: tab id → the address of the browser it was opened in (``in_browser``): an AppTest
#: session has no address of its own, a real browser's tabs share one
ADDRESS: dict[str, str] = {}
_OPENING: dict[str, str] = {}


def _address() -> str:
    tab = identity.tab_id()
    return ADDRESS.setdefault(tab, _OPENING.get("address", f"session:{tab}"))


def in_browser(monkeypatch, token: bytes, fn, *args, address: str | None = None, **kwargs):
    """``fn(*args, **kwargs)`` (an app opened) as the browser whose XSRF cookie holds
    ``token``: the cookie is read when the student joins, on the first run; the tab's
    address (its seat holder) is ``address``, else the browser's own (one per token)."""
    monkeypatch.setattr(identity, "cookies", lambda: {"_streamlit_xsrf": xsrf_cookie(token)})
    monkeypatch.setattr(seat_hold, "client", _address)
    _OPENING["address"] = address or f"addr:browser-{token.hex()[:12]}"
    try:
        return fn(*args, **kwargs)
    finally:
        monkeypatch.setattr(identity, "cookies", dict)
        _OPENING.clear()


def button(at, key: str):
    return next(b for b in at.button if b.key == key)


def click(at, key: str) -> None:
    b = button(at, key)
    assert not b.disabled, key
    b.click().run()
    assert not at.exception, at.exception


def session(at):
    return at.session_state["lesson"].session


def teacher_app(lang: str = "en"):
    """A teacher on the step page who started a room from the Lesson panel."""
    at = open_app(lang=lang, prompt=PROMPT, state={"lt_open": True})
    click(at, "live_start_step")
    seat = at.session_state["live_seat"]
    assert seat.role == "teacher" and len(seat.code) == 6
    return at, seat


def student_app(code: str, lang: str | None = None):
    params = {"room": code} | ({"lang": lang} if lang else {})
    at = open_app(params)
    assert at.session_state["live_seat"].role == "student"
    return at


def param(at, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def where_said(lang: str, r: int, phase_key: str) -> str:
    """The status line's "round r: … done — next: …" for the teacher standing before
    ``phase_key`` (``st_propose`` / ``st_verify`` / ``st_commit``) of round ``r`` (from 1)."""
    step = tr(phase_key, lang)
    if phase_key == "st_propose" and r == 1:
        return tr("live_at_start_round", lang).format(r=1, next=step)
    if phase_key == "st_propose":
        done = tr("st_commit", lang)
        return tr("live_at_new_round", lang).format(p=r - 1, done=done, r=r, next=step)
    done = tr({"st_verify": "st_propose", "st_commit": "st_verify"}[phase_key], lang)
    return tr("live_at_step", lang).format(r=r, done=done, next=step)


def status(at) -> str:
    return " ".join(m.value for m in at.markdown if "**" in m.value and "—" in m.value)


#: the token strip, the checks table and the KV table, wherever an element holds them (the
#: step page draws the strip and the checks as one element, a follower's screen apart)
SHOWN = re.compile(
    r'<div class="strip".*?</div>|<table class="sd-table (?:checks|kv)-table">.*?</table>', re.S
)


def shown(at) -> list[str]:
    """What a screen shows of the step state: the token strip (with every token's state),
    the checks table (p, q, a, u, verdicts at the shown precision) and the KV table, as
    the HTML the browser gets, in page order."""
    html = [h.value for h in at.get("html") if "history-round" not in h.value]  # not history
    return [piece for h in html for piece in SHOWN.findall(h)]


def following_frame(at) -> bool:
    """The screen draws the teacher's frame instead of its own step panel."""
    return "live_page_hidden" in at.session_state and bool(at.session_state["live_page_hidden"])


def same_moment(a, b) -> None:
    """``b`` shows ``a``'s moment: a follower that draws the teacher's frame shows the
    teacher's strip, checks and KV table exactly; a session that replayed stands at the
    same moment (same committed ids, phase, drafts, rounds with timings left out, pending
    verification)."""
    if following_frame(b):
        assert shown(b) and shown(b) == shown(a)
        return
    sa, sb = session(a), session(b)
    assert (sa.ids, sa.phase, sa.steps.drafts) == (sb.ids, sb.phase, sb.steps.drafts)
    assert timeless_json(sa.history) == timeless_json(sb.history)
    assert timeless_json(sa.steps.current_verify) == timeless_json(sb.steps.current_verify)


def frame(at) -> dict:
    return at.session_state["live_frame"]


def test_teacher_starts_students_follow_explore_and_follow_again(embedded_pair, store, monkeypatch):
    teacher, seat = teacher_app()
    html = " ".join(h.value for h in teacher.get("html"))
    assert seat.code in html and "data:image/svg+xml" in html  # the code, the QR code
    codes = [c.value for c in teacher.code]
    join = next(c for c in codes if c.endswith(f"?room={seat.code}"))
    assert seat.key not in join and "teacher=" not in join
    assert any(c.endswith(f"?room={seat.code}&teacher={seat.key}") for c in codes)
    assert "room" not in teacher.query_params and "teacher" not in teacher.query_params

    browser = b"browser-one-secret"
    student = in_browser(monkeypatch, browser, student_app, seat.code)
    assert param(student, "room") == seat.code  # a reload rejoins
    assert param(student, "sid") is None  # no seat credential in any URL
    assert "Following the teacher" in status(student)
    same_moment(teacher, student)

    click(teacher, "btn_propose")
    student.run()
    same_moment(teacher, student)
    assert "round 1: ① Propose done — next: ② Verify" in status(student)
    click(teacher, "btn_verify")
    student.run()
    same_moment(teacher, student)
    assert following_frame(student) and frame(student)["phase"] == "commit"
    assert "lesson" not in student.session_state  # never replayed: no engine in this session
    assert [c["status"] for c in frame(student)["checks"]] == [
        c.status for c in session(teacher).steps.current_verify.checks
    ]

    click(student, "live_explore")  # the teacher's moment replayed here, the student's own
    click(teacher, "btn_commit")
    student.run()
    assert session(student).phase == "commit" and session(teacher).phase == "propose"
    assert not following_frame(student) and shown(student)  # the page's own step panel
    said = "the teacher is at round 1: ③ Commit / reject done — next: round 2, ① Propose"
    assert said in status(student)
    click(student, "live_follow")
    same_moment(teacher, student)
    assert following_frame(student) and frame(student)["round"] == 1

    view = store.view(seat.code)
    assert view.students == 1 and view.page == "step"
    sid = student.session_state["live_seat"].student
    # a reload (a new mask on the same cookie), even with a made-up sid: the same seat
    reloaded = in_browser(monkeypatch, browser, open_app, {"room": seat.code, "sid": "f" * 16})
    assert reloaded.session_state["live_seat"].student == sid
    assert store.view(seat.code).students == 1
    same_moment(teacher, reloaded)
    other = in_browser(monkeypatch, b"another-browser!", open_app, {"room": seat.code})
    assert other.session_state["live_seat"].student != sid  # another browser, another seat
    assert store.view(seat.code).students == 2


def test_question_counts_change_and_reveal_shows_the_real_outcome(embedded_pair, store):
    teacher, seat = teacher_app()
    click(teacher, "btn_propose")
    a, b = student_app(seat.code), student_app(seat.code)
    teacher.selectbox(key="live_kind").set_value("accept").run()
    teacher.number_input(key="live_k").set_value(2).run()
    click(teacher, "live_ask")
    q = store.view(seat.code).question
    asked = dict(q.params)
    assert re.fullmatch(r"[0-9a-f]{16}", asked.pop("run"))  # the run it was asked in
    assert q.kind == "accept" and asked == {"r": "0", "k": "2"}
    for s in (a, b):
        s.run()
    key = f"live_answer_{q.qid}"
    assert a.radio(key=key).options == ["Yes", "No"]
    a.radio(key=key).set_value(0).run()
    b.radio(key=key).set_value(1).run()
    teacher.run()
    assert store.view(seat.code).counts == (1, 1)
    [chart] = [c for c in teacher.get("plotly_chart") if c.proto.id.endswith("live_chart")] or [
        c for c in teacher.get("plotly_chart")
    ]
    bars = json.loads(chart.proto.spec)["data"][0]
    assert bars["y"] == [1, 1] and len(bars["x"]) == 2
    assert any("2 of 2" in m.value for m in teacher.markdown)
    b.radio(key=key).set_value(0).run()  # changed before the reveal
    assert store.view(seat.code).counts == (2, 0)

    click(teacher, "live_reveal")  # runs ② Verify, then reveals the real outcome
    s = session(teacher)
    assert s.phase == "commit"
    status_2 = s.current_record.statuses[1]
    expected = {"accepted": 0, "rejected": 1, "discarded": 1}[status_2]
    q = store.view(seat.code).question
    assert q.revealed and q.correct == expected
    for st_ in (a, b):
        st_.run()
        same_moment(teacher, st_)  # the verified round replayed on the student's screen
        word = ["Yes", "No"][expected]
        shown = [m.value for m in (st_.success if expected == 0 else st_.error)]
        assert any(f"The real outcome: **{word}**" in m for m in shown), shown
        assert st_.radio(key=key).disabled


def test_correction_and_commit_count_questions_come_from_the_round(embedded_pair, store):
    teacher, seat = teacher_app()
    click(teacher, "btn_propose")
    s = session(teacher)
    gamma = len(s.steps.drafts)
    teacher.selectbox(key="live_kind").set_value("commit_count").run()
    click(teacher, "live_ask")
    q = store.view(seat.code).question
    assert q.choices == tuple(str(n) for n in range(1, gamma + 2))
    click(teacher, "live_reveal")
    appended = session(teacher).current_record.appended
    assert store.view(seat.code).question.correct == len(appended) - 1

    click(teacher, "btn_commit")
    click(teacher, "btn_propose")
    s = session(teacher)
    top = [row[0].id for row in s.steps.target_preview(top_n=3)]
    teacher.selectbox(key="live_kind").set_value("correction").run()
    click(teacher, "live_ask")
    q = store.view(seat.code).question
    ids = [int(i) for i in dict(q.params)["ids"].split(",")]
    assert ids[: len(set(top))] == list(dict.fromkeys(top)) and len(q.choices) == len(ids) + 1
    assert all(len(c) <= 40 for c in q.choices) and q.choices[-1] == "another token"
    click(teacher, "live_reveal")
    record = session(teacher).current_record
    last = record.appended[-1]
    correct = store.view(seat.code).question.correct
    assert correct == (ids.index(last) if last in ids else len(ids))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bad_code_gets_one_message(embedded_pair, store, lang):
    at = open_app({"room": "ZZ-ZZ!", "lang": lang})
    assert "live_seat" not in at.session_state
    [box] = at.error
    assert tr("err_room_unknown", lang).split("{")[0][:12] in box.value
    assert "room" not in at.query_params
    other = open_app({"room": "ZZZZZZ", "lang": lang})  # a well-formed code of no room
    assert [e.value for e in other.error] == [box.value]
    code, key = store.create()  # a class that ended says so (its tabs reconnect to it)
    store.close(code, key)
    ended = open_app({"room": code, "lang": lang})
    assert not ended.error and tr("live_ended", lang) in [i.value for i in ended.info]


def test_a_forged_publish_and_a_wrong_teacher_key_fail(embedded_pair, store):
    teacher, seat = teacher_app()
    click(teacher, "btn_propose")
    before = store.view(seat.code)
    forger = student_app(seat.code)  # a student who forges a teacher seat with a guess
    click(forger, "live_explore")  # the step panel of its own
    forger.session_state["live_seat"] = Seat("teacher", seat.code, key="guessed-key")
    click(forger, "btn_verify")  # its own lesson changes: the publish is refused
    assert "live_seat" not in forger.session_state
    assert any(tr("err_room_key", "en")[:20] in e.value for e in forger.error)
    after = store.view(seat.code)
    assert (after.page, after.state) == (before.page, before.state)

    wrong = open_app({"room": seat.code, "teacher": "not-the-key"})
    assert "live_seat" not in wrong.session_state and len(wrong.error) == 1
    assert "teacher" not in wrong.query_params


def test_the_teacher_link_gets_the_room_back(embedded_pair, store):
    teacher, seat = teacher_app()
    click(teacher, "btn_propose")
    again = open_app({"room": seat.code, "teacher": seat.key})  # a reload / second device
    assert again.session_state["live_seat"] == seat
    assert "teacher" not in again.query_params and "room" not in again.query_params
    same_moment(teacher, again)
    assert any(seat.code in h.value for h in again.get("html"))


def test_both_languages_render(embedded_pair, store):
    teacher, seat = teacher_app("zh")
    assert any(tr("live_room_code", "zh") == c.value for c in teacher.caption)
    join = next(c.value for c in teacher.code if f"room={seat.code}" in c.value)
    assert join.endswith("&lang=zh") and seat.key not in join
    student = student_app(seat.code, "zh")
    assert "正在跟随老师" in status(student) and "第 1 轮" in status(student)
    assert button(student, "live_explore").label == "自己探索"
    click(student, "live_explore")
    assert button(student, "live_follow").label == "重新跟随"


def test_a_chapter_question_on_the_lessons_page(embedded_pair, store):
    """The teacher on the Lessons page (chapter 4) asks a checkpoint's own question; a
    student who joins is taken to the same page and chapter, answers, and sees the reveal
    (the checkpoint's answer)."""
    teacher = open_app()
    teacher.switch_page("pages/lessons.py")
    teacher.session_state["ls_chapter"] = 4
    teacher.run()
    click(teacher, "live_start_lessons")
    seat = teacher.session_state["live_seat"]
    assert teacher.selectbox(key="live_check").value == "c4_same_text"
    click(teacher, "live_ask")
    q = store.view(seat.code).question
    assert q.kind == "chapter" and dict(q.params) == {"cid": "c4_same_text", "chapter": "4"}
    options = ("same_text", "same_dist", "worse")
    assert q.choices == tuple(label(tr(f"ls_c4_text_{o}", "en")) for o in options)  # ≤ 40
    assert store.view(seat.code).page == "lessons"

    student = student_app(seat.code, "zh")  # opens the step page, follows to the Lessons
    assert student.session_state["link_page"] == "lessons"
    assert student.session_state["ls_chapter"] == 4
    key = f"live_answer_{q.qid}"
    zh = [tr(f"ls_c4_text_{o}", "zh") for o in options]
    assert student.radio(key=key).options == [label(c) for c in q.choices]  # until drawn
    student.run()  # the next poll: the page has drawn its own checkpoint
    assert student.radio(key=key).options == zh  # in the student's language
    student.radio(key=key).set_value(2).run()
    teacher.run()
    assert store.view(seat.code).counts == (0, 0, 1)
    click(teacher, "live_reveal")
    assert store.view(seat.code).question.correct == 1  # "same_dist", the chapter's answer
    student.run()
    assert any(zh[1] in e.value for e in student.error)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_after_a_switch_to_the_tree_every_screen_counts_the_new_run_alike(
    embedded_pair, store, lang
):
    """Two chain rounds, then the tree: the teacher's step page counts its rounds from the
    switch (the tree session's round 1), and the teacher's "The class sees" line, a
    following student's line and an exploring student's line all say round 1 of a new run
    with the tokens kept, in the tree buttons' words: one number, one explanation, on
    every screen."""
    teacher, seat = teacher_app()  # English (AppTest keeps a select box's first labels)
    student = student_app(seat.code, lang)
    for _ in range(2):
        for step in ("btn_propose", "btn_verify", "btn_commit"):
            click(teacher, step)
    teacher.segmented_control(key="step_mode_en").set_value("tree").run()
    click(teacher, "btn_tree_propose")
    tree = teacher.session_state["tree_lesson"].session
    kept = tree.start_len - tree.prompt_len  # the two chain rounds' committed tokens
    assert tree.round_index == 0 and kept >= 2

    def where(lang: str) -> str:  # in the tree's button words
        done, next_ = tr("tree_propose", lang), tr("tree_verify", lang)
        said = tr("live_at_step", lang).format(r=1, done=done, next=next_)
        return said + plural(tr("live_carried", lang), {"n": kept}).format(n=kept)

    teacher.run()
    sees = tr("live_class_sees", "en").format(where=where("en"))
    assert sees in [c.value for c in teacher.caption]
    student.run()
    assert tr("live_following", lang).format(where=where(lang)) in status(student)
    click(student, "live_explore")
    assert tr("live_exploring", lang).format(where=where(lang)) in status(student)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_student_who_reads_ahead_on_the_lessons_page_gets_back_in_one_click(
    embedded_pair, store, lang
):
    """The teacher on chapter 2; a following student picks chapter 5 (reads ahead): the
    line says they explore (the teacher's chapter named) and offers Follow again, even when
    the teacher publishes nothing new; one click shows the teacher's chapter again."""
    teacher = open_app()
    teacher.switch_page("pages/lessons.py")
    teacher.session_state["ls_chapter"] = 2
    teacher.run()
    click(teacher, "live_start_lessons")
    seat = teacher.session_state["live_seat"]
    student = student_app(seat.code, lang)
    at = tr("live_at_lessons", lang).format(n=2)
    assert student.session_state["ls_chapter"] == 2
    assert tr("live_following", lang).format(where=at) in status(student)
    student.radio(key=f"ls_pick_{lang}").set_value(5).run()
    assert student.session_state["ls_chapter"] == 5
    student.run()  # the follower's next poll: nothing new from the teacher
    assert tr("live_exploring", lang).format(where=at) in status(student)
    assert student.session_state["ls_chapter"] == 5  # their own chapter, not pulled back
    click(student, "live_follow")
    assert student.session_state["ls_chapter"] == 2
    assert tr("live_following", lang).format(where=at) in status(student)


def test_a_student_follows_the_tree_mode(embedded_pair, store):
    """The teacher's tree lesson (phase, strip, drafted nodes) is on the student's screen
    as the teacher's frame; exploring replays it (mode, shape, phase) in the student's own
    session."""
    teacher, seat = teacher_app()
    teacher.segmented_control(key="step_mode_en").set_value("tree").run()
    assert not teacher.exception, teacher.exception
    student = student_app(seat.code)
    click(teacher, "btn_tree_propose")
    student.run()
    theirs = teacher.session_state["tree_lesson"].session
    got = frame(student)
    assert following_frame(student) and "tree_lesson" not in student.session_state
    assert (got["shape"], got["phase"]) == ("tree", "verify") == ("tree", theirs.phase)
    assert [n[0] for n in got["nodes"]] == [n.token.id for n in theirs.steps.tree_view().nodes]
    assert [n[5] for n in got["nodes"]] == [n.state for n in theirs.steps.tree_view().nodes]
    assert shown(student)[0] == shown(teacher)[0]  # the committed text, as the teacher's
    click(student, "live_explore")
    mine = student.session_state["tree_lesson"].session
    assert student.session_state["step_mode_kept"] == "tree"
    assert (
        (mine.phase, mine.steps.shape)
        == (theirs.phase, theirs.steps.shape)
        == ("verify", theirs.steps.shape)
    )
    assert [n.token.id for n in mine.steps.tree_view().nodes] == [
        n.token.id for n in theirs.steps.tree_view().nodes
    ]


def _ask_accept(teacher, seat, store, k: int = 1):
    click(teacher, "btn_propose")
    teacher.selectbox(key="live_kind").set_value("accept").run()
    teacher.number_input(key="live_k").set_value(k).run()
    click(teacher, "live_ask")
    return store.view(seat.code).question


def _outcome_lines(at) -> list[str]:
    return [m.value for m in (*at.success, *at.error, *at.info)]


def test_a_reload_keeps_the_students_answer_on_screen_and_at_the_reveal(
    embedded_pair, store, monkeypatch
):
    teacher, seat = teacher_app()
    q = _ask_accept(teacher, seat, store)
    browser = b"the-students-own-browser"
    student = in_browser(monkeypatch, browser, student_app, seat.code)
    key = f"live_answer_{q.qid}"
    wrong = 1 - (0 if session(teacher).steps.drafts else 1)  # any choice: the outcome decides
    student.radio(key=key).set_value(wrong).run()
    sid = student.session_state["live_seat"].student
    assert store.answer_of(seat.code, sid, q.qid) == wrong
    # F5: a new browser session of the same browser
    reloaded = in_browser(monkeypatch, browser, open_app, {"room": seat.code})
    assert reloaded.radio(key=key).value == wrong  # the radio shows the counted answer
    assert any(tr("live_answer_sent", "en") in c.value for c in reloaded.caption)
    click(teacher, "live_reveal")
    correct = store.view(seat.code).question.correct
    assert store.view(seat.code).counts[wrong] == 1
    reloaded.run()
    word = ["Yes", "No"]
    lines = _outcome_lines(reloaded)
    assert not any("did not answer" in m for m in lines), lines
    if correct == wrong:
        assert any(f"**{word[correct]}**. You were right!" in m for m in lines), lines
    else:
        assert any(f"You answered {word[wrong]}" in m for m in lines), lines
    assert reloaded.radio(key=key).value == wrong and reloaded.radio(key=key).disabled
    again = in_browser(monkeypatch, browser, open_app, {"room": seat.code})  # after the reveal
    assert again.radio(key=key).value == wrong
    assert not any("did not answer" in m for m in _outcome_lines(again))


def test_a_step_click_while_following_switches_to_exploring(embedded_pair, store, monkeypatch):
    teacher, seat = teacher_app()
    student = student_app(seat.code)
    assert "Following the teacher" in status(student)
    assert following_frame(student) and not any(b.key == "btn_propose" for b in student.button)
    monkeypatch.setattr(follow, "room_frame", lambda store, view: None)  # no frame: replayed
    student.run()
    assert not following_frame(student) and session(student).phase == "propose"
    click(student, "btn_propose")  # the student's own click
    assert student.session_state["live_follow_on"] is False
    line = status(student)
    assert "Exploring on my own" in line and "Following" not in line
    assert "the teacher is at round 1 — next: ① Propose" in line
    assert session(student).phase == "verify" and session(teacher).phase == "propose"
    click(teacher, "btn_propose")
    click(teacher, "btn_verify")
    student.run()  # the teacher's clicks no longer move the exploring student
    assert session(student).phase == "verify" and session(teacher).phase == "commit"
    assert "the teacher is at round 1: ② Verify done — next: ③ Commit" in status(student)
    click(student, "live_follow")
    same_moment(teacher, student)
    assert "Following the teacher" in status(student)


def functions_in(at) -> list[str]:
    """The session-state keys whose value is a function (a hook kept where the import
    check cannot see it)."""
    return sorted(k for k, v in at.session_state.items() if callable(v))


def test_no_function_is_kept_in_session_state(embedded_pair, store):
    """The hooks are passed as arguments (the teacher's publish to ``write_url``, the Lesson
    panel's "Live class" tab), and an own click is a flag: none of them in session state,
    for the teacher with the Lesson panel open, nor for a student who clicked."""
    teacher, seat = teacher_app()
    assert "Live class" in [t.label for t in teacher.tabs]  # the tab the page passed in
    click(teacher, "btn_propose")
    student = student_app(seat.code)
    same_moment(teacher, student)  # the publish hook ran on the teacher's click
    click(student, "live_explore")
    click(student, "btn_verify")
    assert student.session_state["live_follow_on"] is False  # the own-action flag
    assert "step_own_action" not in student.session_state  # read once, then gone
    assert functions_in(teacher) == [] and functions_in(student) == []


def test_no_page_keeps_a_function_in_session_state(embedded_pair, store):
    """A teacher in a room visits every page: none leaves a function in session state."""
    teacher, _ = teacher_app()
    pages = sorted(p.name for p in (Path(__file__).parents[1] / "pages").glob("*.py"))
    assert len(pages) >= 6
    for name in pages:
        teacher.switch_page(f"pages/{name}").run()
        assert not teacher.exception, (name, teacher.exception)
        assert functions_in(teacher) == [], name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_fixed_choices_show_in_the_readers_language(embedded_pair, store, lang):
    teacher, seat = teacher_app()  # the teacher asks in English
    q = _ask_accept(teacher, seat, store)
    assert q.choices == ("Yes", "No")  # the store's copy, in the asker's language
    student = student_app(seat.code, lang)
    key = f"live_answer_{q.qid}"
    yes, no = tr("live_yes", lang), tr("live_no", lang)
    assert student.radio(key=key).options == [yes, no]
    assert (yes, no) == (("Yes", "No") if lang == "en" else ("是", "否"))
    student.radio(key=key).set_value(1).run()
    click(teacher, "live_reveal")
    correct = store.view(seat.code).question.correct
    student.run()
    lines = " ".join(_outcome_lines(student))
    want = tr("live_outcome_right" if correct == 1 else "live_outcome_wrong", lang)
    assert want.format(answer=[yes, no][correct], yours=no) in lines, lines
    if lang == "zh":
        assert "Yes" not in lines and "No" not in lines

    click(teacher, "btn_commit")  # a correction question: the last choice is "another token"
    click(teacher, "btn_propose")
    teacher.selectbox(key="live_kind").set_value("correction").run()
    click(teacher, "live_ask")
    q = store.view(seat.code).question
    assert q.choices[-1] == "another token"
    student.run()
    options = student.radio(key=f"live_answer_{q.qid}").options
    assert options[-1] == tr("live_other", lang) and options[:-1] == [
        # token pieces stay as stored (the radio shows them markdown-escaped)
        o
        for o in options[:-1]
    ]
    assert len(options) == len(q.choices)
    if lang == "zh":
        assert options[-1] == "其他 token"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_end_the_class_tells_the_students_and_stops_polling(embedded_pair, store, lang):
    teacher, seat = teacher_app()
    student = student_app(seat.code, lang)
    assert status(student)
    click(teacher, "live_end")
    student.run()
    assert "live_seat" not in student.session_state
    assert [i.value for i in student.info if i.value == tr("live_ended", lang)] == [
        tr("live_ended", lang)
    ]
    assert not student.error and not status(student)
    assert "room" not in student.query_params and "sid" not in student.query_params
    student.run()  # it stays said, once; no follower fragment any more
    assert [i.value for i in student.info].count(tr("live_ended", lang)) == 1
    assert not any(c.key == "live_status" for c in student.get("flex_container"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_room_error_reads_as_the_live_class_not_nothing_changed(embedded_pair, store, lang):
    at = open_app({"room": "ZZZZZZ", "lang": lang})
    [box] = at.error
    prefix = tr("err_room_prefix", lang)
    assert box.value.startswith(prefix) and tr("error_prefix", lang) not in box.value
    if lang == "zh":
        assert box.value.startswith("课堂直播：没有") and "： " not in box.value
    else:
        assert box.value.startswith("Live class: no live class has this code")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_card_says_to_keep_the_teacher_link(embedded_pair, store, lang):
    teacher, seat = teacher_app(lang)
    [big] = [h.value for h in teacher.get("html") if f">{seat.code}</div>" in h.value]
    # the code scales with its column (checked by screenshots at 1024 px with the sidebar
    # open and at 1600 px): never a fixed size that runs under the QR code
    assert "container-type:inline-size" in big and "font-size:min(4.2rem,15cqi)" in big
    assert "white-space:nowrap" in big
    captions = [c.value for c in teacher.caption]
    assert tr("live_keep_teacher_link", lang) in captions
    assert ("Keep the teacher link" if lang == "en" else "请保存教师链接") in captions[
        captions.index(tr("live_keep_teacher_link", lang))
    ]


# ---------------------------------------------------------------- hostile students, faults
def _fail_store(monkeypatch, store, *names):
    """Make the store's ``names`` raise what a backend fault becomes (``room_store``)."""
    from specdec_core.server.room_types import RoomError

    def down(*args, **kwargs):
        raise RoomError("room_store")

    for name in names:
        monkeypatch.setattr(store, name, down)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_store_fault_is_one_translated_line_and_the_answer_is_kept(
    embedded_pair, store, monkeypatch, lang
):
    teacher, seat = teacher_app()
    q = _ask_accept(teacher, seat, store)
    student = student_app(seat.code, lang)
    key = f"live_answer_{q.qid}"
    with monkeypatch.context() as m:
        _fail_store(m, store, "version", "view", "answer", "join", "publish", "seats")
        student.radio(key=key).set_value(1).run()  # sent while the store is down
        assert not student.exception and not student.error
        line = tr("err_room_prefix", lang) + (" " if lang == "en" else "")
        line += tr("err_room_store", lang)
        assert [w.value for w in student.warning] == [line]  # one line, translated
        assert student.session_state["live_seat"].code == seat.code  # the seat is kept
        captions = [c.value for c in student.caption]
        assert tr("live_answer_pending", lang) in captions  # not "sent": not confirmed
        teacher.run()  # the teacher's screen says it too, no error box
        assert not teacher.exception
        assert any(tr("err_room_store", "en") in w.value for w in teacher.warning)
    assert store.view(seat.code).counts == (0, 0)  # nothing was stored meanwhile
    student.session_state["live_fault"] = (0.0, 1.0)  # the back-off has passed
    student.run()  # the next poll sends the answer that waited
    assert store.view(seat.code).counts == (0, 1)
    assert not student.warning
    assert tr("live_answer_sent", lang) in [c.value for c in student.caption]


def test_the_teacher_removes_a_seat_and_the_student_is_told(embedded_pair, store, monkeypatch):
    clock = [store.clock()]  # the store's clock is the test's: "seen 7 s ago" on any load
    monkeypatch.setattr(store, "clock", lambda: clock[0])
    teacher, seat = teacher_app()
    q = _ask_accept(teacher, seat, store)
    a, b = student_app(seat.code), student_app(seat.code)
    a.radio(key=f"live_answer_{q.qid}").set_value(0).run()
    clock[0] += 7.0
    teacher.run()
    teacher.toggle(key="live_seats_on").set_value(True).run()
    sid = a.session_state["live_seat"].student
    assert tr("live_seat_row", "en").format(seat=sid[:6].upper(), s=7) + " ✓" in [
        m.value for m in teacher.markdown
    ]
    click(teacher, f"live_remove_{sid}")
    view = store.view(seat.code)
    assert (view.students, view.counts) == (1, (0, 0))  # the seat and its answer are gone
    assert not any(b.key == f"live_remove_{sid}" for b in teacher.button)
    a.session_state["live_beat_at"] = 0.0  # its next heartbeat is due
    a.run()
    assert "live_seat" not in a.session_state
    assert any(tr("err_room_removed", "en") in e.value for e in a.error)
    again = open_app({"room": seat.code})  # a new browser session gets a new seat...
    assert again.session_state["live_seat"].student != sid
    assert b.session_state["live_seat"].student in {
        s.student for s in store.seats(seat.code, seat.key)
    }


def test_tabs_of_one_browser_are_one_seat_one_vote_and_one_fast_follower(
    embedded_pair, store, monkeypatch
):
    from specdec_core.server import room_limits

    monkeypatch.setattr(room_limits, "QUIET_S", 1e6)  # AppTest runs are seconds apart
    teacher, seat = teacher_app()
    q = _ask_accept(teacher, seat, store)
    key = f"live_answer_{q.qid}"
    tabs = [in_browser(monkeypatch, b"one-browser-12345", student_app, seat.code) for _ in range(4)]
    assert len({t.session_state["live_seat"].student for t in tabs}) == 1
    for i, tab in enumerate(tabs):
        tab.radio(key=key).set_value(i % 2).run()
    view = store.view(seat.code)
    assert (view.students, view.answered) == (1, 1)  # four tabs: one seat, one vote
    assert view.counts == (0, 1)  # the last choice counts
    for tab in tabs:
        tab.run()
    slow = [t for t in tabs if any(b.key == "live_this_tab" for b in t.button)]
    assert len(slow) == 3  # one tab polls every second, the others every 10 s
    click(slow[0], "live_this_tab")  # this tab follows fast now
    assert not any(b.key == "live_this_tab" for b in slow[0].button)


def test_code_guesses_from_one_address_are_slowed(embedded_pair, store, monkeypatch):
    from specdec_core.server import room_limits
    from specdec_core.ui.live import room

    monkeypatch.setattr(room, "client", lambda: "addr:10.1.2.3")
    frozen = room_limits.Buckets(clock=lambda: 0.0)  # AppTest runs are seconds apart
    monkeypatch.setattr(room_limits, "BUCKETS", frozen)
    monkeypatch.setattr(room, "BUCKETS", room_limits.BUCKETS)
    for _ in range(10):
        at = open_app({"room": "ZZZZZZ"})
        assert tr("err_room_unknown", "en") in at.error[0].value
    teacher, seat = teacher_app()  # the teacher's own address is another client
    at = open_app({"room": seat.code})  # the 11th try, with the right code: wait
    assert "live_seat" not in at.session_state
    [box] = at.error
    assert box.value.endswith("too many tries from this address: wait 5 s and try again.")


def test_a_join_while_the_store_is_down_waits_and_goes_through(embedded_pair, store, monkeypatch):
    teacher, seat = teacher_app()
    with monkeypatch.context() as m:
        _fail_store(m, store, "join", "version", "view")
        student = student_app(seat.code)
        assert student.session_state["live_seat"].joined is False
        assert not student.exception
        assert tr("live_join_pending", "en") in [c.value for c in student.caption]
        assert store.seats(seat.code, seat.key) == []  # not stored, and not said to be
    student.session_state["live_fault"] = (0.0, 1.0)  # the back-off has passed
    student.run()
    assert student.session_state["live_seat"].joined is True
    assert [s.student for s in store.seats(seat.code, seat.key)] == [
        student.session_state["live_seat"].student
    ]
    assert "Following the teacher" in status(student)
