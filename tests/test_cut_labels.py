"""Labels a fresh user found cut or covering other controls, in both languages: the CSV
download button's label fits its half of the Export tab at 1024 px (the detail is its
help), the ↶ Step back tooltip is one short line (the detail is the notice after the
click), and on a 390 px phone the live class's chart-rows table wraps its headers
("min(p, q) — accept path" ran off the screen) -- the last in Chromium."""

from __future__ import annotations

import pytest

from specdec_core.ui.i18n import tr
from specdec_core.ui.render import header_width, html_table

LANGS = ["en", "zh"]


@pytest.mark.parametrize("lang", LANGS)
def test_the_csv_button_label_fits_half_the_export_tab_and_its_help_has_the_detail(lang):
    label = tr("lt_download_csv", lang)
    # 1024 px with the sidebar open: two columns of ≈ 274 px, ≈ 248 px inside the button
    # (the old label, ≈ 100 characters, was cut with "…" at ≈ 720 px)
    assert header_width(label) <= 200, label
    assert "CSV" in label
    assert "committed = False" in tr("lt_download_csv_help", lang)


@pytest.mark.parametrize("lang", LANGS)
def test_the_step_back_tooltip_is_one_short_line_and_the_notice_has_the_detail(lang):
    help_text = tr("lt_step_back_help", lang)
    assert header_width(help_text) <= 240, help_text  # one line: it hid the step buttons
    notice = tr("lt_stepped_back", lang)
    seed, per_draft = {"en": ("same seed", "per changed draft"), "zh": ("同一种子", "各后退一步")}[
        lang
    ]
    assert seed in notice and per_draft in notice


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGS)
def test_chart_rows_headers_wrap_on_a_phone(new_page, lang):
    labels = [tr(k, lang) for k in ("col_token", "trace_p", "trace_q", "trace_min")]
    table = html_table(
        {
            h: ["␣my", "␣and", "␣the"] if i == 0 else ["1.0000", "0", "0.25"]
            for i, h in enumerate(labels)
        },
        name="chart-rows",
    )
    page = new_page(390, 844)
    font = "font-family:'Source Sans 3','Noto Sans CJK SC',sans-serif"  # the app's stack
    page.set_content(f'<body style="margin:0;padding:0 16px;{font}">{table}</body>')
    wrap = page.locator(".sd-wrap")
    width = wrap.evaluate("e => e.clientWidth")
    assert width == 390 - 32
    # the table fits: no header runs off the screen (the wrapper would scroll it)
    assert wrap.evaluate("e => e.scrollWidth") <= width
    heads = page.locator(".chart-rows th")
    assert heads.count() == 4
    for i in range(4):
        assert heads.nth(i).evaluate("e => e.scrollWidth <= e.clientWidth")
