"""Real browser: the step-through page's tree mode — switch to "a tree", run
Propose tree → Verify → Commit & compact in English and Chinese at 1280×720; the tree
figure, the mask grid and the KV tables before/after the compaction are on the page, each
step reruns only the step panel (an st.fragment), screenshots of each language."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py

NAMES = {
    "en": {
        "tree": "a tree",
        "accepted": "accepted path",
        "mask": "Tree attention mask",
        "kv": "Target KV cache: before → after the compaction",
    },
    "zh": {
        "tree": "树",
        "accepted": "被接受的路径",
        "mask": "树形注意力掩码",
        "kv": "目标模型 KV 缓存：压缩前 → 压缩后",
    },
}


def _step(page, name: str) -> None:
    nxt = {"propose": "verify", "verify": "commit", "commit": "propose"}[name]
    page.locator(f".st-key-btn_tree_{name} button").click()
    page.wait_for_function(
        f"() => document.querySelector('.st-key-btn_tree_{nxt} button')?.disabled === false"
        f" && document.querySelector('.st-key-btn_tree_{name} button')?.disabled === true"
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=60_000,
    )
    # the buttons are drawn first: wait for the end of the rerun (no stale copy of the
    # figure left, the mask drawn) and let the figure paint
    page.wait_for_function(
        "() => document.querySelectorAll('.st-key-tree_chart .js-plotly-plot').length == 1"
        " && document.querySelectorAll('.tree-mask').length == 1"
        " && !document.querySelector('[data-stale=\"true\"]')",
        timeout=60_000,
    )
    page.wait_for_timeout(1500)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_tree_round_in_the_browser(server, new_page, tmp_path, lang):
    names = NAMES[lang]
    page = new_page(1280, 720)
    page.goto(server)
    page.locator(".st-key-btn_propose button").wait_for(timeout=90_000)
    if lang == "zh":
        page.get_by_text("中文").first.click()
        page.get_by_role("button", name="① 提议").wait_for(timeout=30_000)
    page.locator(".st-key-step_mode_row button").filter(has_text=names["tree"]).click()
    page.locator(".st-key-btn_tree_propose button").wait_for(timeout=60_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
    )
    _step(page, "propose")
    chart = page.locator(".st-key-tree_chart .js-plotly-plot")
    chart.wait_for(timeout=30_000)
    assert page.locator(".tree-mask td").filter(has_text="✓").count() >= 12  # 12 nodes
    _step(page, "verify")
    page.get_by_text(names["kv"]).first.wait_for(timeout=30_000)
    # the figure's node boxes (annotations) and legend name the accepted path
    assert chart.locator(".annotation").count() >= 14  # root + 12 nodes + ★
    assert chart.get_by_text(names["accepted"]).count() >= 1
    assert page.get_by_text(names["mask"]).count() >= 1
    tables = page.locator("table.tree-kv-before, table.tree-kv-after")  # one HTML element
    assert tables.count() == 2  # the target's cache before and after the compaction
    assert tables.first.get_by_text(names["accepted"]).count() >= 1
    shot = tmp_path / f"tree_{lang}_1280x720_verified.png"
    chart.evaluate("e => e.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(500)
    page.screenshot(path=str(shot))
    _step(page, "commit")
    strip = page.locator("div.strip").first
    assert strip.locator("span.tok-correction, span.tok-bonus").count() == 1
    assert page.get_by_text("KeyError").count() == 0 and page.get_by_text("Traceback").count() == 0
    keep = os.environ.get("SPECDEC_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
    assert shot.stat().st_size > 20_000
