"""Real browser: after the pair is switched, one click opens the speed page's drafter
dropdown and the sidebar's draft-source dropdown (no second click needed), with the
dropdown already on screen as a person clicks it.

Streamlit 1.67 closes an open selectbox menu on any scroll of the page: a click that
lands while the page still scrolls (Playwright's ``locator.click()`` scrolls the element
into view in the same frame; a trackpad's inertia) opens the menu and the scroll closes it
at once, which reads as "the first click only focuses it". Hence the explicit scroll, a
pause, then a mouse click at the element's position."""

from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py

IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
# Every 25 ms: note whether a script run is showing; QUIET holds once none has shown
# for 1.5 s (a run that starts right after the load's first one, e.g. the URL-state
# write, would otherwise redraw the box under the click).
WATCH = """() => { if (window.__sdWatch) return; window.__sdBusy = performance.now();
  window.__sdWatch = setInterval(() => {
    if (document.querySelector('[data-testid="stStatusWidget"]')) {
      window.__sdBusy = performance.now(); } }, 25); }"""
QUIET = "() => performance.now() - window.__sdBusy > 1500"


def _open(page, locator, *, setup: bool = False) -> int:
    """Scroll ``locator`` into view, wait until no script run has shown for 1.5 s, click
    its input once; returns how many options the menu lists (0: it did not open). The
    menu is left open. ``setup`` (a step before the one under test): a click that did not
    open the menu is tried again, at most 3 times (a rerun after the page's load can
    redraw the box and close its menu); otherwise the one click must open it."""
    page.evaluate(WATCH)
    for _ in range(3 if setup else 1):
        locator.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        page.wait_for_function(QUIET, timeout=60_000, polling=100)
        box = locator.bounding_box()
        page.mouse.click(box["x"] + 60, box["y"] + box["height"] - 18)
        try:
            page.locator('[role="option"]').first.wait_for(timeout=5_000)
            return page.locator('[role="option"]').count()
        except PlaywrightTimeout:
            continue
    return 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_click_opens_the_drafter_dropdown_after_a_pair_switch(server, new_page, lang):
    page = new_page(1024, 768)
    page.goto(f"{server}/speed?lang={lang}")
    drafter = page.locator(".st-key-sp_drafter")  # the speed page's (key=)
    drafter.wait_for(timeout=90_000)
    page.wait_for_function(IDLE, timeout=60_000)
    assert _open(page, page.locator(".st-key-pair_name"), setup=True) == 2  # embedded, embedded-zh
    other = "embedded 4L" if lang == "zh" else "embedded-zh"
    page.locator('[role="option"]').filter(has_text=other).first.click()
    page.wait_for_timeout(1500)
    page.wait_for_function(IDLE, timeout=60_000)
    offered = {"en": 4, "zh": 7}[lang]  # the other pair's sources
    assert _open(page, drafter) == offered  # one click
    page.keyboard.press("Escape")
    assert _open(page, page.locator(".st-key-cfg_drafter")) == offered  # the sidebar's
