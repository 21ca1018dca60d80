"""Real browser details: on a 390 × 844 phone the KV table's state column is on screen
(en and zh; screenshots under the temp folder), and a language switch keeps the sidebar's
choices while their labels change language."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py

IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
SHOTS = Path(os.environ.get("SPECDEC_SHOTS", "/tmp/specdec-shots"))
FITS_JS = """() => { const t = document.querySelector('table.kv-table');
  const w = t.parentElement, r = t.getBoundingClientRect();
  const last = [...t.querySelectorAll('tr')].map(tr => tr.lastElementChild.getBoundingClientRect());
  return {scroll: w.scrollWidth - w.clientWidth, right: Math.max(...last.map(c => c.right)),
          view: window.innerWidth, left: r.left}; }"""


def _round_to_commit(page) -> None:
    for name, nxt in (("propose", "verify"), ("verify", "commit")):
        page.locator(f".st-key-btn_{name} button").click()
        page.wait_for_function(
            f"() => document.querySelector('.st-key-btn_{nxt} button')?.disabled === false"
            " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
            timeout=60_000,
        )
    page.wait_for_timeout(1000)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_phone_kv_table_shows_the_state_column(server, new_page, lang):
    page = new_page(390, 844)
    page.goto(f"{server}/?lang={lang}")
    page.locator(".st-key-btn_propose button").wait_for(timeout=90_000)
    _round_to_commit(page)
    table = page.locator("table.kv-table").first
    table.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    fits = page.evaluate(FITS_JS)
    assert fits["scroll"] <= 1, fits  # nothing scrolled off to the right
    assert fits["right"] <= fits["view"], fits  # each row's state cell ends on screen
    rejected = {"en": "rejected", "zh": "被拒绝"}[lang]
    assert table.locator("td").filter(has_text=rejected).count() >= 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    box = table.bounding_box()
    page.screenshot(
        path=str(SHOTS / f"phone_kv_{lang}.png"),
        clip={"x": 0, "y": max(0, box["y"] - 60), "width": 390, "height": box["height"] + 120},
    )


def test_a_language_switch_keeps_the_drafter_and_relabels_it(server, new_page):
    page = new_page(1400, 1000)
    page.goto(server)
    page.locator(".st-key-btn_propose button").wait_for(timeout=90_000)
    box = page.locator(".st-key-cfg_drafter input")  # a combo box: the value is its text
    page.wait_for_function(IDLE, timeout=60_000)
    option = page.get_by_role("option", name="prompt lookup")
    for _ in range(3):  # a click during the first run's last redraw can close the list
        box.click()
        try:
            option.wait_for(timeout=10_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            page.wait_for_timeout(1000)
    option.click()
    page.wait_for_function(
        "() => document.querySelector('.st-key-cfg_drafter input')?.value == 'prompt lookup'"
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=60_000,
    )
    page.wait_for_timeout(1000)
    page.wait_for_function(IDLE, timeout=60_000)
    page.get_by_text("中文").first.click()
    page.get_by_role("button", name="① 提议").wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    assert box.input_value() == "提示词查找"  # the same choice, in the screen's language
    method = page.locator(".st-key-cfg_method").inner_text()
    assert "概率采样" in method and "probabilistic" not in method, method


def test_the_drafters_preset_keeps_its_choice_across_a_language_switch(server, new_page):
    page = new_page(1400, 1400)
    page.goto(server + "/drafters")
    presets = page.locator(".st-key-dr_preset")
    presets.get_by_text("Novel", exact=False).first.wait_for(timeout=90_000)
    page.wait_for_function(IDLE, timeout=60_000)
    presets.get_by_text("Novel", exact=False).first.click()
    box = page.locator(".st-key-dr_prompt textarea")
    page.wait_for_function(  # the rerun filled in the novel preset's prompt
        "() => (document.querySelector('.st-key-dr_prompt textarea')?.value ?? '')"
        ".includes('ROMEO')",
        timeout=60_000,
    )
    page.wait_for_function(IDLE, timeout=60_000)
    page.get_by_text("中文").first.click()
    page.get_by_text("草稿从哪里来").first.wait_for(timeout=60_000)
    page.wait_for_function(IDLE, timeout=60_000)
    page.wait_for_timeout(1000)
    text = presets.inner_text()
    assert "新颖型" in text and "Novel" not in text and "·" not in text, text
    checked = presets.locator("label:has(input:checked)").inner_text()
    assert "新颖型" in checked, checked
    assert "ROMEO" in box.input_value()  # the choice and its prompt kept
    assert page.get_by_text("KeyError").count() == 0
