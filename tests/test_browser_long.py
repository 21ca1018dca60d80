"""Real browser: long measurements do not freeze a page. "Compare every source" on the
drafters page shows its progress while the page stays usable and then its result (en,
zh); Lessons chapter 5's measurement runs while the chapter's other questions are answered,
the header and footer counts agree all along, and its table arrives by itself.
Screenshots go to ``SPECDEC_SCREENSHOT_DIR`` when set."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py

PROGRESS = {"en": "Comparing every source: step", "zh": "正在比较所有来源：第"}
NO_RANKING = {"en": "No speed-up chart and no ranking", "zh": "不显示加速比图表"}


def _keep(shot: Path) -> None:
    keep = os.environ.get("SPECDEC_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_every_source_shows_progress_then_its_result(server, new_page, tmp_path, lang):
    page = new_page(1440, 2600)
    page.goto(f"{server}/drafters?lang={lang}")
    run = page.locator(".st-key-dr_src_run button")
    run.wait_for(timeout=180_000)
    run.click()
    bar = page.get_by_text(PROGRESS[lang]).first
    bar.wait_for(timeout=60_000)  # the fragment's progress while the job runs
    page.locator(".st-key-dr_src_bg_cancel button").wait_for(timeout=10_000)
    page.screenshot(path=str(tmp_path / f"drafters_compare_running_{lang}.png"), full_page=True)
    _keep(tmp_path / f"drafters_compare_running_{lang}.png")
    # a click elsewhere reruns the page: the run goes on and its progress shows again
    novel = {"en": "Novel", "zh": "新颖型"}[lang]  # the preset's label is in one language
    page.locator(".st-key-dr_preset").get_by_text(novel, exact=False).first.click()
    box = page.locator(".st-key-dr_prompt textarea")
    novel_text = {"en": "ROMEO", "zh": "春眠不觉晓"}[lang]  # 中文 opens on embedded-zh
    for _ in range(150):  # the rerun filled in the novel preset's prompt
        if novel_text in box.input_value():
            break
        page.wait_for_timeout(200)
    assert novel_text in box.input_value()
    assert page.get_by_text(PROGRESS[lang]).count() + page.locator(".st-key-dr_src_temp").count()
    result = page.locator(".st-key-dr_src_temp")  # the result's temperature choice
    result.wait_for(timeout=120_000)  # the result arrives without a click
    chart = page.locator("[data-testid='stPlotlyChart']")  # the page's only chart: this one
    page.get_by_text(NO_RANKING[lang]).or_(chart).first.wait_for(timeout=60_000)
    assert page.get_by_text(PROGRESS[lang]).count() == 0
    shot = tmp_path / f"drafters_compare_{lang}.png"
    run.evaluate("e => e.scrollIntoView({block: 'start'})")  # the section, not the page top
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)


def test_chapter_5_questions_answer_while_it_measures(server, new_page, tmp_path):
    page = new_page(1400, 2400)
    page.goto(server + "/lessons?chapter=5")
    page.get_by_text("Chapter 5").first.wait_for(timeout=180_000)

    def choose(cid: str, label: str) -> None:
        page.locator(f".st-key-ls_in_{cid}_en").get_by_text(label, exact=True).click()
        page.locator(f".st-key-ls_btn_{cid} button").click()

    choose("c5_faster", "no")
    # the run's progress line, or its result when an idle server finished it between polls
    page.get_by_text(
        re.compile("Timing the three runs|Measured now on this server")
    ).first.wait_for(timeout=60_000)
    choose("c5_source", "prompt lookup (n-gram)")
    page.get_by_text("Checkpoints answered: 2 of 3").nth(1).wait_for(timeout=60_000)
    assert page.get_by_text("Checkpoints answered: 2 of 3").count() == 2  # header = footer
    assert page.get_by_text("Checkpoints answered: 0 of 3").count() == 0
    page.locator(".st-key-ls_box_c5_eval").wait_for(timeout=10_000)
    shot = tmp_path / "lessons_ch5_running.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    page.get_by_text("Measured now on this server").first.wait_for(timeout=120_000)
    assert page.get_by_text("Timing the three runs").count() == 0
    shot = tmp_path / "lessons_ch5_done.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
