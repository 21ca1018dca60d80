"""Where the speed and drafters pages' charts put their legends (``ui/figures/speed.py``
``LEGEND``): never over a chart's title, its x axis's title or its plot, at the widths a
chart gets (half a column at 1024 px, the main column at 1024 and 1600 px, a 390 px
phone), en and zh. The figures are the pages' own, built in ``speed_figures.py``."""

from __future__ import annotations

import pytest
from speed_figures import WIDTHS, boxes, figures, overlap, page_html

from specdec_core.ui.figures.speed import LEGEND

#: the charts drawn by ``_speed_layout``: their legend is ``LEGEND`` as it is
SPEED_LAYOUT = (
    "sp_cost_fig",
    "sp_curve_fig",
    "sp_breakdown_fig",
    "sp_hist_fig",
    "sp_pos_fig",
    "sp_vc_fig",
    "sp_tl_fig",
    "sp_gamma_fig",
    "sp_batch_fig",
)


NO_LEGEND = ("sp_cost_fig", "sp_hist_fig")  # one series each, named by the axes


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_speed_chart_keeps_its_legend_at_the_bottom_edge(lang):
    """The legend of every speed chart is one horizontal row in the container's bottom
    edge (plotly.js reserves its height below the axes); the title keeps 50 px above."""
    figs = figures(lang)
    assert LEGEND == dict(
        orientation="h", xref="container", yref="container", yanchor="bottom", y=0, x=0
    )
    for name in SPEED_LAYOUT:
        legend, margin = figs[name].layout.legend, figs[name].layout.margin
        shown = (legend.orientation, legend.xref, legend.yref, legend.yanchor, legend.y)
        assert shown == ("h", "container", "container", "bottom", 0), name
        assert margin.t == 50, name
    assert figs["sp_vc_fig"].layout.margin.b == 50  # no more room for a legend under it
    assert figs["sp_breakdown_fig"].layout.height == 280  # 2 bars + a phone's legend rows


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_legend_overlaps_a_title_or_the_plot_in_chromium(lang):
    """Drawn by plotly.js in Chromium at each width: the legend's box shares no pixel with
    the chart title's, the x axis title's or the plot area's (before: the per-position
    chart's two entries wrapped up into its title in a half column at 1024 px)."""
    from conftest import CHROMIUM, _need_chromium
    from playwright.sync_api import sync_playwright

    _need_chromium()
    found = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.set_content(page_html())
        for name, fig in figures(lang).items():
            for where, width in WIDTHS.items():
                b = boxes(page, fig, width)
                assert b["title"] and b["plot"], (name, where, b)
                assert bool(b["legend"]) == (name not in NO_LEGEND), (name, where, b)
                for part in ("title", "xtitle", "plot"):
                    found[name, where, part] = max(
                        (overlap(lb, o) for lb in b["legend"] for o in b[part]), default=0.0
                    )
        browser.close()
    assert {k: v for k, v in found.items() if v > 0} == {}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_break_even_label_is_in_the_legend_not_on_a_point(lang):
    """The γ charts name their dotted 1× line in the legend: no annotation on the plot
    carries the label (written at the line's left end it hid the measured point at γ = 1,
    the 1.00× of "Best measured γ: 1 (1.00×)"), and the line is a trace at y = 1 over the
    chart's γ range whose legend entry reads the page's break-even string."""
    from specdec_core.ui.i18n import in_language, t

    figs = figures(lang)
    with in_language(lang):
        label = t("sp_breakeven")
    for name in ("sp_gamma_fig", "sp_curve_fig"):
        fig = figs[name]
        assert [a.text for a in fig.layout.annotations if a.text == label] == [], name
        assert [s for s in fig.layout.shapes if s.y0 == 1.0] == [], name
        (line,) = [d for d in fig.data if d.name == label]
        assert line.showlegend is not False and line.mode == "lines", name
        points = [x for d in fig.data if d.name != label for x in d.x]
        assert (list(line.x), list(line.y)) == ([min(points), max(points)], [1.0, 1.0]), name
