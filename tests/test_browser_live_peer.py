"""Peer instruction in real browsers (Chromium, the session's ``streamlit run app.py``): a
teacher (English, 1024 × 768) starts a class and makes a co-teacher link; the co-teacher
(Chinese) opens it and drives: Propose moves both students (one on a 390 × 844 phone in
English, one in Chinese), then asks with a 90 s countdown the students see; the teacher
closes voting early, opens the revote (the projector shows the first vote beside the
revote), pauses (the co-teacher's reveal runs ② Verify, the students hold the paused
moment) and resumes (they reach ③ Commit); the shift of the share right is on the
projector; the co-teacher has no "End"; the teacher ends the class and downloads the
results' CSV. Screenshots of each piece go to ``SPECDEC_SHOTS`` when it is set."""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from test_page_live import where_said

from specdec_core.lessons.link import LessonState, encode
from specdec_core.ui.i18n import plural, tr

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

PROMPT = "ROMEO:\nBut soft, what light"
WAIT_MS = 90_000  # a loaded 2-core machine: three followers replaying each step


def _shot(page, name: str, key: str) -> None:
    """The viewport with the element of widget key ``key`` scrolled into view."""
    folder = os.environ.get("SPECDEC_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.locator(f".st-key-{key}").first.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def _idle(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=WAIT_MS
    )


def _wait_text(page, text: str) -> None:
    page.wait_for_function(
        "t => document.body.innerText.includes(t)", arg=text.replace("**", ""), timeout=WAIT_MS
    )


def _key(page, key: str, role: str = "button"):
    return page.locator(f".st-key-{key} {role}").first


def _status(lang: str, phase_key: str) -> str:
    where = where_said(lang, 1, phase_key)
    return tr("live_following", lang).format(where=where)


def _answer(page, label: str) -> None:
    page.locator("[class*='st-key-live_answer_']").last.get_by_text(label, exact=True).click()


def test_vote_revote_countdown_pause_results_and_a_co_teacher(server, new_page, tmp_path):
    teacher = new_page(1024, 768)
    teacher.goto(f"{server}/?{urlencode(encode(LessonState(prompt=PROMPT)))}")
    _key(teacher, "btn_propose").wait_for(timeout=120_000)
    _idle(teacher)
    teacher.get_by_text(tr("lt_title", "en")).click()
    teacher.get_by_role("tab", name=tr("live_tab", "en")).click()
    teacher.get_by_role("button", name=tr("live_start", "en")).click()
    code_box = teacher.locator(".st-key-live_code")
    code_box.wait_for(timeout=WAIT_MS)
    code = code_box.inner_text().strip()
    teacher.get_by_text(tr("live_co_link", "en")).click()
    _key(teacher, "live_co_make").click()
    co_url = teacher.locator(".st-key-live_co_url").inner_text(timeout=WAIT_MS).strip()
    assert re.search(rf"\?room={code}&teacher=[\w-]{{32}}$", co_url), co_url
    _shot(teacher, "co_link_en", "live_co_url")

    co = new_page(1024, 768)
    co.goto(co_url.replace("http://localhost", server) + "&lang=zh")
    _wait_text(co, tr("live_co_badge", "zh"))
    assert co.locator(".st-key-live_end").count() == 0  # drives, does not end
    _shot(co, "co_teacher_zh", "live_teacher")
    phone, zh = new_page(390, 844), new_page(1024, 768)
    phone.goto(f"{server}/?room={code}")
    zh.goto(f"{server}/?room={code}&lang=zh")
    _wait_text(phone, tr("live_following", "en").split("—")[0].strip())
    _wait_text(zh, tr("live_following", "zh")[:4])

    # -- the co-teacher's Propose moves the class; the co-teacher asks, 90 s to answer
    _idle(co)
    _key(co, "btn_propose").click()
    _wait_text(phone, _status("en", "st_verify"))
    _wait_text(zh, _status("zh", "st_verify"))
    _idle(co)
    option = co.get_by_role("option", name=tr("live_timer_s", "zh").format(s=90))
    for _ in range(3):  # a click during a poll's redraw can close the list
        _key(co, "live_timer", "input").click()
        try:
            option.wait_for(timeout=10_000)
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: open it again
            co.keyboard.press("Escape")
    option.click()
    _idle(co)
    _key(co, "live_ask").click()
    _wait_text(phone, tr("live_q_accept", "en").format(r=1, k=1))
    _wait_text(zh, tr("live_q_accept", "zh").format(r=1, k=1))
    _wait_text(phone, tr("live_time_left", "en").split("{")[0])
    _shot(phone, "countdown_phone_en", "live_status")
    _shot(zh, "countdown_zh", "live_status")
    _answer(phone, tr("live_yes", "en"))
    _answer(zh, tr("live_no", "zh"))
    _wait_text(teacher, plural(tr("live_answered", "en"), {"m": 2}).format(n=2, m=2))

    # -- close early, then the revote: both votes side by side on the projector
    _key(teacher, "live_close_vote").click()
    _wait_text(phone, tr("live_time_up", "en"))
    assert phone.locator("[class*='st-key-live_answer_'] input").first.is_disabled()
    _shot(phone, "closed_phone_en", "live_status")
    _idle(teacher)
    _key(teacher, "live_revote").click()
    _wait_text(phone, tr("live_revote_line", "en"))
    _wait_text(zh, tr("live_revote_line", "zh"))
    _answer(phone, tr("live_yes", "en"))
    _answer(zh, tr("live_yes", "zh"))
    _wait_text(teacher, tr("live_first_answered", "en").format(n=2, m=2, s=2))
    _wait_text(teacher, tr("live_vote_second", "en"))  # the chart's legend
    _shot(teacher, "revote_chart_en", "live_chart")
    _wait_text(co, tr("live_vote_second", "zh"))
    _shot(co, "revote_chart_zh", "live_chart")

    # -- pause: the co-teacher's reveal runs ② Verify; the students hold, then resume
    _idle(teacher)
    _key(teacher, "live_pause").click()
    _wait_text(phone, tr("live_paused", "en"))
    _wait_text(zh, tr("live_paused", "zh"))
    _idle(co)
    _key(co, "live_reveal").click()
    _wait_text(teacher, tr("live_outcome", "en").split("{")[0])
    _wait_text(zh, tr("live_paused", "zh"))
    assert _status("zh", "st_verify").replace("**", "") in zh.inner_text("body")
    _shot(zh, "paused_zh", "live_status")
    _shot(phone, "paused_phone_en", "live_status")
    _shot(teacher, "paused_teacher_en", "live_paused_line")
    _idle(teacher)
    _key(teacher, "live_resume").click()
    _wait_text(phone, _status("en", "st_commit"))
    _wait_text(zh, _status("zh", "st_commit"))
    shift = teacher.locator(".st-key-live_shift").inner_text(timeout=WAIT_MS)
    assert re.search(r"50 % → (100|0) %", shift), shift  # 1 of 2 right, then 2 or 0 of 2
    _shot(teacher, "shift_en", "live_shift")
    _wait_text(co, tr("live_shift", "zh").split("{")[0])
    _shot(co, "shift_zh", "live_shift")

    # -- the teacher ends the class: the results stay downloadable
    _idle(teacher)
    _key(teacher, "live_end").click()
    _wait_text(teacher, tr("live_results_ended", "en").format(code=code))
    _shot(teacher, "results_after_en", "live_after")
    with teacher.expect_download(timeout=WAIT_MS) as got:
        _key(teacher, "live_results_csv").click()
    text = Path(got.value.path()).read_text(encoding="utf-8-sig")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == tr("live_csv_header", "en").split("|")
    assert [r[5:7] for r in rows[1:]] == [["1", "2"], ["1", "0"]]  # first vote, revote
    _wait_text(co, tr("live_ended", "zh"))  # the co-teacher's screen: the class is over
    for page in (teacher, co, phone, zh):
        assert page.get_by_text("Traceback").count() == 0
