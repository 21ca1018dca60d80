"""Real browser: the speed page's sweep tables (the γ sweep's two, the batch sweep's) fit
a 390 × 844 phone, a 1024 × 768 projector and a 1920 × 1080 screen with nothing to scroll
sideways, in en and zh (``ui/speed/sweeps.py``: headers wrap, numbers do not; as
``st.dataframe`` the second γ table and the batch table scrolled on a phone, and the batch
table at 1024 px too). Screenshots under ``SPECDEC_SHOTS``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # the server and Chromium: conftest.py

SHOTS = Path(os.environ.get("SPECDEC_SHOTS", "/tmp/specdec-shots"))
TABLES = ("sp-gamma-speedups", "sp-gamma-runs", "sp-batch")
LABELS = {  # section ③'s budget sliders, then the two sweep buttons
    "en": (
        "New tokens per run",
        "Repeats (median)",
        "Sweep γ = 1…8",
        "Sweep batch size 1, 2, 4, 8",
    ),
    "zh": (
        "每次生成的新 token 数",
        "重复次数（取中位数）",
        "扫描 γ = 1…8",
        "扫描批大小 1、2、4、8",
    ),
}
FITS_JS = """(cls) => { const t = document.querySelector('table.' + cls);
  const w = t.closest('.sd-wrap');
  return {scroll: w.scrollWidth - w.clientWidth, right: t.getBoundingClientRect().right,
          view: document.documentElement.clientWidth, rows: t.querySelectorAll('tbody tr').length};
}"""


def _slider_to_min(page, label: str) -> None:
    slider = page.locator('[data-testid="stSlider"]').filter(has_text=label).first
    thumb = slider.get_by_role("slider")
    thumb.focus()
    thumb.press("Home")
    page.wait_for_timeout(800)


def _sweep(page, label: str, table: str) -> None:
    button = page.get_by_role("button", name=label, exact=True)
    button.scroll_into_view_if_needed()
    button.click()
    page.locator(f"table.{table}").first.wait_for(timeout=240_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stProgress\"]')", timeout=240_000
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_sweep_tables_fit_a_phone_and_a_projector(server, new_page, lang):
    page = new_page(1024, 768)
    page.goto(f"{server}/speed?lang={lang}")
    tokens, repeats, gamma, batch = LABELS[lang]
    page.get_by_role("button", name=gamma, exact=True).wait_for(timeout=90_000)
    _slider_to_min(page, tokens)  # the shortest runs: the layout is what is checked
    _slider_to_min(page, repeats)
    _sweep(page, gamma, "sp-gamma-runs")
    _sweep(page, batch, "sp-batch")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((390, 844), (1024, 768), (1920, 1080)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(1000)
        for name in TABLES:
            table = page.locator(f"table.{name}").first
            table.scroll_into_view_if_needed()
            fits = page.evaluate(FITS_JS, name)
            assert fits["scroll"] <= 1 and fits["right"] <= fits["view"], (width, name, fits)
            assert fits["rows"] == (4 if name == "sp-batch" else 8), (width, name, fits)
            table.screenshot(path=str(SHOTS / f"speed_{name}_{lang}_{width}.png"))
