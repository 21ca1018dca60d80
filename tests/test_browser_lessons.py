"""Real browser: chapter 3 of the lessons page opened by its link (``/lessons?chapter=3``)
in a fresh browser context and completed — each KV checkpoint answered, the verdicts and
the engine's KV lengths shown, the chapter kept in the URL."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from specdec_core.lessons.replay import replay
from specdec_core.lessons.scenarios import find_scenarios

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py


def test_chapter_3_by_its_link_in_a_fresh_context(server, new_page, embedded_pair, tmp_path):
    state = next(f.state for f in find_scenarios(embedded_pair) if f.key == "first_error_3")
    session = replay(embedded_pair, state).session
    session.commit()
    kv = session.history[-1].commit.kv_after
    page = new_page(1400, 2400)  # a fresh context
    page.goto(server + "/lessons?chapter=3")
    page.get_by_text("Chapter 3 · The caches").first.wait_for(timeout=180_000)
    answers = (
        ("c3_committed", kv.committed_len),
        ("c3_target", kv.target_kv_len),
        ("c3_draft", kv.draft_kv_len),
    )
    for done, (cid, value) in enumerate(answers, 1):
        box = page.locator(f".st-key-ls_in_{cid}_en input")
        box.wait_for(timeout=120_000)
        box.fill(str(value))
        box.press("Enter")
        page.locator(f".st-key-ls_btn_{cid} button").click()
        page.get_by_text(f"Checkpoints answered: {done} of 3").first.wait_for(timeout=60_000)
    reveal = (
        f"The engine's counters after the commit: committed {kv.committed_len}, "
        f"target KV {kv.target_kv_len}, draft KV {kv.draft_kv_len}"
    )
    page.get_by_text(reveal).wait_for(timeout=30_000)
    page.get_by_text("✓ Right.").nth(2).wait_for(timeout=30_000)
    assert page.get_by_text("✗ Not quite").count() == 0
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)  # the KV table
    assert "chapter=3" in page.url
    shot = tmp_path / "lessons_chapter3.png"
    page.screenshot(path=str(shot), full_page=True)
    keep = os.environ.get("SPECDEC_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
