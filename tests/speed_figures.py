"""Every Plotly chart of the speed and drafters pages, built by the pages' own figure
functions with their own label strings (en or zh) on made-up figures, and a probe that
draws one in Chromium with plotly.js at a given width and returns the boxes of its title,
legend, axis titles and plot area (px). Used by ``test_browser_speed_figures.py`` and by
hand for screenshots (``python tests/speed_figures.py OUT_DIR``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import plotly
from plotly.graph_objects import Figure

from specdec_core.bench.results import (
    BatchPoint,
    Breakdown,
    GammaPoint,
    RoundParts,
    TargetOnlyParts,
)
from specdec_core.core.timeline import RoundSpan, Span, Timeline
from specdec_core.ui.figures import drafters as FD
from specdec_core.ui.figures import speed as FS
from specdec_core.ui.figures import speed_timing as FT
from specdec_core.ui.i18n import in_language, t

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
#: the chart's width on the page: a half column at 1024 px (two charts side by side with
#: the sidebar open), the main column at 1024 px and at 1600 px, a 390 px phone
WIDTHS = {"half_1024": 300, "main_1024": 650, "main_1600": 1150, "phone_390": 340}


def _timeline(mode: str, n: int, step: float) -> Timeline:
    kind = "target" if mode == "autoregressive" else "verify"
    spans, t0 = [], 0.0
    for i in range(n):
        if mode == "speculative":
            spans.append(Span("draft", t0, t0 + 1.0, i))
            t0 += 1.2
        spans.append(Span(kind, t0, t0 + step, i))
        t0 += step + 0.3
    rounds = tuple(RoundSpan(0.0, t0, 1, 2) for _ in range(n))
    return Timeline(mode, t0, tuple(spans), rounds)


def figures(lang: str) -> dict[str, Figure]:
    """Each chart by its page key, labels in ``lang`` as the page passes them."""
    with in_language(lang):
        keys = ("title", "x", "ar", "sp", "target", "draft", "verify", "done")
        cost = {k: t(f"sp_cost_fig_{k}") for k in ("title", "x", "y", "target", "chosen")}
        curve = {
            "title": t("sp_curve_fig_title", alpha=0.8, c=0.05),
            "x": t("sp_curve_fig_x"),
            "tokens": t("sp_curve_tokens"),
            "improvement": t("sp_curve_improvement"),
            "best": t("sp_curve_best"),
            "breakeven": t("sp_breakeven"),
        }
        bd_labels = {
            **{k: t(f"sp_part_{k}") for k in ("draft", "verify", "overhead", "target")},
            "round": t("sp_breakdown_round", k=2.5),
            "target_only": t("sp_breakdown_target", k=2.5),
            "title": t("sp_breakdown_fig_title"),
            "x": "ms",
        }
        pos = {k: t(f"sp_pos_{k}") for k in ("title", "x", "y", "measured", "model", "conditional")}
        vc = {k: t(f"sp_vc_{k}") for k in ("title", "x", "y", "measured", "flat", "serial")}
        vc |= {"verify": t("sp_vc_verify"), "draft": t("sp_vc_draft")}
        gamma = {
            "title": t("sp_gamma_fig_title"),
            "x": t("sp_curve_fig_x"),
            "y": t("sp_gamma_fig_y"),
            **{k: t(f"sp_gamma_{k}") for k in ("measured", "forward", "leviathan")},
            "breakeven": t("sp_breakeven"),
        }
        batch = {k: t(f"sp_batch_fig_{k}") for k in ("title", "x", "y")}
        batch |= {k: t(f"sp_batch_{k}") for k in ("batched", "speculative", "sequential")}
        src = {k: t("src_fig_" + k) for k in ("measured", "predicted", "y", "breakeven")}
        dr = {k: t(f"dr_fig_{k}") for k in ("draft", "verify", "other", "ms")}
        g_points = [
            GammaPoint(g, 30.0, 20.0, 1.5 - g / 20, 0.7, 2.0, 0.3, 1.4, 1.3, 1.2, True)
            for g in range(1, 7)
        ]
        b_points = [BatchPoint(b, 30.0 * b**0.7, 35.0, 22.0) for b in (1, 2, 4, 8)]
        bd = Breakdown(
            2.5, RoundParts(8.0, 25.0, 2.0), TargetOnlyParts(50.0, 1.0), RoundParts(20, 70, 10)
        )
        sources = ["draft model", "prompt lookup", "early exit", "EAGLE head", "MTP heads"]
        return {
            "sp_cost_fig": FS.speed_cost_figure([1, 2, 3, 4, 5], [33, 16, 11, 8, 6], 20.0, cost, 3),
            "sp_curve_fig": FS.speed_gamma_curve_figure(
                [(g, 1 + 0.8 * g / (1 + g / 4), 1.2 + 0.1 * g) for g in range(1, 17)], 8, curve
            ),
            "sp_breakdown_fig": FS.speed_breakdown_figure(bd, bd_labels),
            "sp_hist_fig": FS.speed_histogram_figure(
                [22, 2, 4, 3, 6], {"title": t("sp_hist_title"), "x": t("sp_hist_x"), "y": "n"}
            ),
            "sp_pos_fig": FS.speed_position_figure(
                [0.4, 0.35, 0.25, 0.17], 0.6, pos, [0.6, 0.7, 0.6, 0.7]
            ),
            "sp_vc_fig": FT.speed_verify_curve_figure([10.0 + k for k in range(9)], 4.0, 4, vc),
            "sp_tl_fig": FT.speed_timeline_figure(
                _timeline("autoregressive", 20, 9.0),
                _timeline("speculative", 8, 12.0),
                {k: t("sp_tl_" + k) for k in keys},
            ),
            "sp_gamma_fig": FS.speed_gamma_sweep_figure(g_points, gamma),
            "sp_batch_fig": FS.speed_batch_figure(b_points, batch),
            "sp_src_fig": FD.sources_figure(
                sources,
                [t("src_prompt_repetitive"), t("src_prompt_novel")],
                [[(1.2, 1.1, 1.3)] * 5, [(0.9, 0.8, 1.0)] * 5],
                [[1.25] * 5, [0.95] * 5],
                src,
                t("src_fig_title", temp="T = 0"),
            ),
            "dr_time_fig": FD.drafter_time_figure(
                [t("dr_label_target"), *sources],
                [0, 2, 0, 1, 0.5, 0.4],
                [10, 6, 7, 6, 6, 6],
                [0, 1, 1, 1, 1, 1],
                dr,
                t("dr_fig_title"),
            ),
        }


#: a page with plotly.js that draws window.FIG at window.W px and reports the boxes
_PAGE = """<html><head><meta charset="utf-8"><style>body{margin:0;font-family:
"Source Sans Pro",sans-serif}</style><script>%s</script></head><body><div id="g"></div>
</body></html>"""

_BOXES = """async ([fig, w]) => {
  const g = document.getElementById('g');
  g.style.width = w + 'px';
  await Plotly.newPlot(g, fig.data, {...fig.layout, width: w, autosize: false});
  const box = (sel) => [...g.querySelectorAll(sel)].map(e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 ? [r.left, r.top, r.right, r.bottom] : null;
  }).filter(b => b);
  return {title: box('.g-gtitle .gtitle'), legend: box('.legend .bg'),
          xtitle: box('.g-xtitle .xtitle'), ytitle: box('.g-ytitle .ytitle'),
          plot: box('.draglayer .nsewdrag'), xticks: box('.xaxislayer-above .xtick text'),
          figure: box('.main-svg')};
}"""


def page_html() -> str:
    return _PAGE % PLOTLY_JS.read_text()


def boxes(page, fig: Figure, width: int) -> dict[str, list[list[float]]]:
    """Draw ``fig`` at ``width`` px on ``page`` (opened on :func:`page_html`) and return
    each part's boxes ``[left, top, right, bottom]`` in px."""
    return page.evaluate(_BOXES, [json.loads(fig.to_json()), width])


def overlap(a: list[float], b: list[float]) -> float:
    """The area (px²) two boxes share."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


if __name__ == "__main__":  # screenshots of every chart at every width, en and zh
    from playwright.sync_api import sync_playwright

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.set_content(page_html())
        for lang in ("en", "zh"):
            for name, fig in figures(lang).items():
                for where, w in WIDTHS.items():
                    b = boxes(page, fig, w)
                    hit = [
                        f"{x}"
                        for x in ("title", "xtitle", "plot")
                        if any(overlap(lb, o) > 0 for lb in b["legend"] for o in b[x])
                    ]
                    print(lang, name, where, "legend overlaps:", hit or "-")
                    page.locator("#g").screenshot(path=str(out / f"{lang}_{name}_{where}.png"))
        browser.close()
