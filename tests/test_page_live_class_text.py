# ruff: noqa: F811  (the store fixture of test_page_live, imported by name)
"""What a live class's screens say (AppTest, both languages): a follower's sidebar names
and describes the class's pair (the teacher's), never its own first choice; every screen
says which step is done and which comes next in one wording; a question goes with the run
it was asked in (a chain → tree switch takes it off every screen, its result kept)."""

from __future__ import annotations

import pytest
from conftest import open_app
from test_page_live import (  # noqa: F401
    _ask_accept,
    click,
    status,
    store,
    student_app,
    teacher_app,
)

from specdec_core.ui.i18n import in_language, tr
from specdec_core.ui.live import frame_view


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_followers_sidebar_names_the_class_pair_before_and_after_the_end(
    embedded_pair, store, lang
):
    teacher, seat = teacher_app()  # an English teacher: the embedded pair
    student = student_app(seat.code, lang)
    click(teacher, "btn_propose")
    student.run()
    assert student.session_state["live_page_hidden"]  # the teacher's frame on screen
    named = {"en": "Loaded: **embedded** on", "zh": "已加载：**embedded**，"}[lang]
    why = {"en": "The live class's pair (the teacher's).", "zh": "课堂直播的模型对（老师的）。"}
    assert student.session_state["pair_name"] == "embedded"
    assert named in captions(student) and why[lang] in captions(student)
    assert tr("why_chinese_screen", lang) not in captions(student)
    assert "embedded-zh" not in captions(student)
    click(teacher, "live_end")
    student.run()  # the class's last moment replayed here, on its pair
    assert student.session_state["pair_name"] == "embedded"
    assert named in captions(student) and why[lang] in captions(student)
    assert tr("why_chinese_screen", lang) not in captions(student)


def test_a_chinese_screen_outside_a_class_still_says_why_its_pair_loaded(embedded_pair):
    at = open_app({"lang": "zh"})  # the shipped Chinese pair, opened by the screen
    assert at.session_state["pair_name"] == "embedded-zh"
    note = "应用以中文界面打开，因此加载了内置的中文模型对（唐诗语料，一个汉字一个词元）。"
    assert "已加载：**embedded-zh**，" in captions(at) and note in captions(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_screen_says_what_is_done_and_what_comes_next(embedded_pair, store, lang):
    teacher, seat = teacher_app()
    student = student_app(seat.code, lang)
    said = {
        "en": (
            "round 1 — next: ① Propose",
            "round 1: ① Propose done — next: ② Verify",
            "round 1: ② Verify done — next: ③ Commit / reject",
            "round 1: ③ Commit / reject done — next: round 2, ① Propose",
        ),
        "zh": (
            "第 1 轮 — 下一步：① 提议",
            "第 1 轮：① 提议完成 — 下一步：② 验证",
            "第 1 轮：② 验证完成 — 下一步：③ 提交 / 拒绝",
            "第 1 轮：③ 提交 / 拒绝完成 — 下一步：第 2 轮 ① 提议",
        ),
    }
    for i, step in enumerate((None, "btn_propose", "btn_verify", "btn_commit")):
        if step is not None:
            click(teacher, step)
        teacher.run()
        student.run()
        card = tr("live_class_sees", "en").format(where=said["en"][i])
        assert card in captions(teacher)  # the teacher card
        assert tr("live_following", lang).format(where=said[lang][i]) in status(student)
        with in_language(lang):  # what the push route sends a follower in this language
            pushed = frame_view.frame_html(student.session_state["live_frame"])
        assert said[lang][i] in pushed


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_question_goes_with_its_run_after_a_switch_to_the_tree(embedded_pair, store, lang):
    teacher, seat = teacher_app()
    student = student_app(seat.code, lang)
    q = _ask_accept(teacher, seat, store)
    click(teacher, "live_reveal")
    student.run()
    asked = {"en": "Question:", "zh": "提问："}[lang]
    assert any(asked in m.value for m in student.markdown)
    revealed = store.view(seat.code).question
    assert revealed.qid == q.qid and revealed.revealed
    teacher.segmented_control(key="step_mode_en").set_value("tree").run()
    click(teacher, "btn_tree_propose")
    student.run()
    assert store.view(seat.code).question is None  # a new run: the question is gone
    assert not any(asked in m.value for m in student.markdown)
    assert [m.value for m in (*student.success, *student.error)] == []  # nor its outcome
    assert store.view(seat.code, every_run=True).question.qid == q.qid  # the teacher's read
    [kept] = store.results(seat.code, seat.key)  # the results (CSV) keep it
    assert kept.question.qid == q.qid and kept.correct == revealed.correct
