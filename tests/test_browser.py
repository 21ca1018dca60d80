"""Real browser: start ``streamlit run app.py`` headless on a free local port, drive it
with Playwright + Debian's Chromium, click through one round, save screenshots."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run must install it")
        pytest.skip("Debian's chromium is not installed")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("streamlit did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def test_deep_link_runs_inside_the_app(server, browser):
    """Opening a lesson URL directly on a fresh server (this test runs first) still renders
    the sidebar and the page, no traceback."""
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(server + "/acceptance_lab")
    page.get_by_text("Decoding settings").wait_for(timeout=90_000)
    page.get_by_text("Acceptance-rule lab").first.wait_for(timeout=30_000)
    assert page.get_by_text("KeyError").count() == 0
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_click_through_one_round(server, browser, tmp_path, lang):
    names = {
        "en": ("① Propose", "② Verify", "③ Commit / reject", "accepted", "KV-cache state"),
        "zh": ("① 提议", "② 验证", "③ 提交 / 拒绝", "已接受", "KV 缓存状态"),
    }[lang]
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    page.goto(server)
    page.get_by_role("button", name="① Propose").wait_for(timeout=90_000)
    if lang == "zh":
        page.get_by_text("中文").first.click()
        page.get_by_role("button", name=names[0]).wait_for(timeout=30_000)
    for label in names[:3]:
        button = page.get_by_role("button", name=label)
        button.click()
        page.wait_for_function(
            "label => [...document.querySelectorAll('button')].some("
            "b => b.innerText.includes(label) && b.disabled)",
            arg=label, timeout=30_000,
        )  # fmt: skip
    page.get_by_text(names[4]).first.wait_for()
    strip = page.locator("span.tok")
    assert strip.count() > 10
    main_strip = page.locator("div.strip").first
    assert main_strip.locator("span.tok-correction, span.tok-bonus").count() == 1
    assert page.get_by_text(names[3]).count() >= 1
    shot = tmp_path / f"step_through_{lang}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    keep = os.environ.get("SPECDEC_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
    page.close()


def test_language_switch_on_drafters_page(server, browser):
    """Streamlit keeps a radio's value as its label in the browser: switching language
    must not break the preset radio (it raised KeyError when labels were translated)."""
    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    page.goto(server + "/drafters")
    page.get_by_text("Where drafts come from").first.wait_for(timeout=90_000)
    page.get_by_text("中文").first.click()
    page.get_by_text("草稿从哪里来").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="▶ 运行对比").click()
    page.get_by_text("草稿从哪里来").first.wait_for(timeout=30_000)
    page.wait_for_timeout(3000)
    assert page.get_by_text("KeyError").count() == 0
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scenario_link_opens_its_outcome_and_survives_a_reload(
    server, browser, embedded_pair, tmp_path, lang
):
    """A fresh browser context opens a scenario link (greedy, first error at position 3):
    two accepted drafts, the rejected one, its correction, one discarded — in one load;
    a reload keeps the language and the round."""
    from dataclasses import replace
    from urllib.parse import urlencode

    from specdec_core.lesson_link import encode
    from specdec_core.scenarios import find_scenarios

    state = next(f.state for f in find_scenarios(embedded_pair) if f.key == "first_error_3")
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.goto(server + "/?" + urlencode(encode(replace(state, lang=lang))))
    commit = {"en": "③ Commit / reject", "zh": "③ 提交 / 拒绝"}[lang]
    strip = page.locator("div.strip").first

    def outcome() -> list[int]:
        page.get_by_role("button", name=commit).wait_for(timeout=90_000)
        strip.locator("span.tok-correction").wait_for(timeout=30_000)
        kinds = ("accepted", "rejected", "correction", "discarded")
        return [strip.locator(f"span.tok-{k}").count() for k in kinds]

    assert outcome() == [2, 1, 1, 1]
    assert page.get_by_role("button", name=commit).is_enabled()
    page.wait_for_timeout(1500)  # the app writes the state into the URL
    assert "s=" in page.url
    page.reload()
    assert outcome() == [2, 1, 1, 1]
    shot = tmp_path / f"scenario_link_{lang}.png"
    page.screenshot(path=str(shot), full_page=False)
    keep = os.environ.get("SPECDEC_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
    context.close()
