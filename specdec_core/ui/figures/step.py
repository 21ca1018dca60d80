"""Step-through lesson: one drafted position's distributions as grouped bars, an Apache
ECharts option (:func:`distribution_option`) for ``st.echarts_chart``; which tokens it
shows and the before/after-the-processors slice are :mod:`~specdec_core.ui.figures.step_slices`.

Why ECharts and not Plotly (which the other pages use): this chart is redrawn on every
step click. Measured in headless Chromium on a 2-core machine, a Streamlit fragment that
redraws a 4-series × 10-bar chart settles 102 ms after the click with Plotly and 31 ms
with ECharts (canvas, no animation), and the Plotly figure took 20–33 ms to build on the
server against < 1 ms for this plain dict."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from unicodedata import east_asian_width

import numpy as np

from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.trace import DistSlice
from specdec_core.ui.figures.common import COLORS, token_labels
from specdec_core.ui.figures.step_slices import TOP_TOKENS, shown_indices, with_context_tokens

__all__ = ["distribution_option"]

SHORT = {"p": "p", "q": "q", "min": "min(p, q)", "excess": "[p − q]+"}  # math: both languages
CONTEXT_FILL, CONTEXT_LINE = "rgba(31,119,180,0.22)", COLORS["p"]  # greedy: faint T = 1 bars
MARK_COLOR, NOTE_COLOR = "#9a3412", "#374151"  # "▼ drafted · ★ correction"; "other" line
BEFORE_FILL, BEFORE_LINE = "rgba(107,114,128,0.35)", "#6b7280"  # p before the processors
HEIGHT = 360  # px: pass it to st.echarts_chart (an ECharts option has no height)
MARKED_TICK = {"color": MARK_COLOR, "fontWeight": "bold"}
PRESENTER_SCALE = 4 / 3  # presenter mode: 12 px chart text → 16 px (read from a projector)


@dataclass(frozen=True)
class _Bars:
    """What the chart of one drafted position shows, in plain Python values (shared by
    :func:`distribution_figure` and :func:`distribution_option`)."""

    names: list[str]  # category per shown token (:func:`token_labels`)
    ticks: list[str]  # the same with "▼ " (drafted) / "★ " (correction) in front
    series: list[tuple[str, list[float]]]  # (labels key, one value per token), drawing order
    others: list[str]  # "p = 0.2939", one per drawn row of the slice (not the context)
    marks: list[str]  # "▼ drafted", "★ correction": what the tick signs mean
    peak: float  # largest value drawn (context included)
    low: float  # smallest positive value of p, q, min, excess (1.0 if none)


def _bars(
    dist: DistSlice,
    labels: Mapping[str, str],
    marked_id: int | None,
    correction_id: int | None,
    context: DistSlice | None,
    top: int,
    before_after: bool = False,
    keep_ids: tuple[int, ...] = (),
) -> _Bars:
    """The tokens, series and notes of the chart (arguments as in
    :func:`distribution_figure`). Series whose row is ``None`` are left out; the greedy
    ``context`` (T = 1 bars) comes first when given. ``before_after``: ``dist`` is a
    :func:`before_after_slice` (its ``q`` drawn as "before", its ``p`` as after)."""
    if context is not None and context.p is not None:
        dist = with_context_tokens(dist, context, top)
    else:
        context = None
    keep = shown_indices(dist, (marked_id, correction_id, *keep_ids), top)
    names = token_labels([dist.tokens[i] for i in keep])
    ids = [int(dist.token_ids[i]) for i in keep]
    series: list[tuple[str, list[float]]] = []
    others: list[str] = []
    peak, low = 0.0, 1.0
    if context is not None:
        ctx = dict(zip(context.token_ids.tolist(), context.p.astype(float).tolist(), strict=True))
        y = [ctx.get(tid, 0.0) for tid in ids]
        series.append(("context", y))
        peak = max(peak, max(y, default=0.0))
    rows = [
        ("p", dist.p, dist.p_other),
        ("q", dist.q, dist.q_other),
        ("min", dist.min_pq, dist.min_other),
        ("excess", dist.excess, dist.excess_other),
    ]
    if before_after:
        rows = [("before", dist.q, dist.q_other), ("p", dist.p, dist.p_other)]
    for key, values, other in rows:
        if values is None:
            continue
        y = values.astype(float)[keep]
        peak = max(peak, float(y.max(initial=0.0)))
        low = min(low, float(y[y > 0].min(initial=1.0)))
        name = labels.get(key + "_short", SHORT.get(key, key))  # e.g. "r": block residual
        others.append(f"{name} = {fmt_prob(other)}")
        series.append((key, y.tolist()))
    # the drafted (▼) and correction (★) tokens are marked in their axis labels: markers
    # above adjacent bars used to overlap
    ticks = list(names)
    marks = []
    for tid, sign, key in ((marked_id, "▼", "marked"), (correction_id, "★", "correction")):
        if tid is not None and tid in ids and key in labels:
            ticks[ids.index(tid)] = f"{sign} {ticks[ids.index(tid)]}"
            marks.append(f"{sign} {labels[key]}")
    return _Bars(names, ticks, series, others, marks, peak, low)


def _other_line(bars: _Bars, labels: Mapping[str, str]) -> str:
    """``other: p = 0.2939, q = 0.0412, …`` (the mass of the tokens not drawn)."""
    return f"{labels['other']}: " + ", ".join(bars.others)


def _linear_top(bars: _Bars) -> float:
    """Top of the linear axis: 10 % above the tallest bar, at least 0.05."""
    return max(bars.peak * 1.1, 0.05)


def _log_range(low: float) -> tuple[float, float]:
    """Log axis extent in decades (log10): half a decade under ``low``, the smallest
    positive value drawn (floored at 1e-12), up to 10^0.05 ≈ 1.12 (a bar of 1 fits)."""
    return float(np.log10(max(low, 1e-12)) - 0.5), 0.05


def distribution_option(
    dist: DistSlice,
    labels: Mapping[str, str],
    title: str,
    marked_id: int | None = None,
    correction_id: int | None = None,
    log_y: bool = False,
    context: DistSlice | None = None,
    top: int = TOP_TOKENS,
    presenter: bool = False,
    before_after: bool = False,
    keep_ids: tuple[int, ...] = (),
) -> dict:
    """An Apache ECharts option for ``st.echarts_chart``: grouped bars of ``p``, ``q``,
    ``min(p, q)`` and ``[p − q]+`` (the greedy T = 1 context faintly first) over the top
    tokens by ``max(p, q)`` plus the drafted and the correction token, the drafted token's
    tick marked ``▼`` and the correction's ``★``, the "other" mass under the title.
    A canvas chart with no animation: a step click shows the final bars at once, for a
    fraction of a Plotly redraw. The rest of each row's mass ("other") is written as
    numbers, not drawn as a bar (at T = 1 it would dwarf every token).

    The values sit in ``dataset.source`` (one row per token: tick, token, then per series
    its value and :func:`fmt_prob` text) and each series' tooltip template reads its text
    with ``{@dimension}`` placeholders (a Streamlit extension of ECharts' templates, see
    ``help(st.echarts_chart)``; no JavaScript callbacks). On a log axis a value ≤ 0 is
    ``None`` (no bar): the axis cannot show it.

    Args:
        dist, labels, title, marked_id, correction_id, log_y, context, top: as in
            :func:`distribution_figure`.
        presenter: projector-sized text (:data:`PRESENTER_SCALE` × every font size: axis
            ticks and legend 16 px instead of 12, the title 20 px instead of 15).
        before_after: ``dist`` is a :func:`before_after_slice`: two series, ``p`` before
            the processors (grey, label ``labels["before"]``) and after (``labels["p"]``);
            the "other" line names them ``labels["before_short"]`` / ``labels["p_short"]``.
        keep_ids: more token ids always shown when in the slice (the block residual's top).

    Returns:
        The option ``dict``, JSON-serialisable (plain ``str``/``float``/``None``; no NumPy
        values). Every value shown is in its bar's tooltip, written with :func:`fmt_prob`
        (never ``0.0000`` for a non-zero value).
    """
    bars = _bars(dist, labels, marked_id, correction_id, context, top, before_after, keep_ids)
    k = PRESENTER_SCALE if presenter else 1.0

    def px(size: float) -> int:
        return round(size * k)

    keys = [key for key, _ in bars.series]
    dimensions = ["tick", "token"] + [name for key in keys for name in (key, key + "_text")]
    source = [
        [tick, name]
        + [x for _, y in bars.series for x in (_bar_value(y[i], log_y), fmt_prob(y[i]))]
        for i, (tick, name) in enumerate(zip(bars.ticks, bars.names, strict=True))
    ]
    series = []
    for key in keys:
        style = {"color": COLORS.get(key)}
        if key == "context":
            style = {"color": CONTEXT_FILL, "borderColor": CONTEXT_LINE, "borderWidth": 1}
        elif key == "before":
            style = {"color": BEFORE_FILL, "borderColor": BEFORE_LINE, "borderWidth": 1}
        series.append(
            {
                "type": "bar",
                "name": labels[key],
                "encode": {"x": "tick", "y": key},
                "itemStyle": style,
                "barGap": "0%",
                "barCategoryGap": "18%",
                # {a}: series name, escaped by ECharts; {@…}: escaped by Streamlit
                "tooltip": {"formatter": "{a}<br/>{@token}: <b>{@" + key + "_text}</b>"},
            }
        )
    titles = [
        {
            "text": title,
            "left": 0,
            "top": 0,
            "textStyle": {"fontSize": px(15)},
            "subtext": _other_line(bars, labels) if bars.others else "",
            "subtextStyle": {"fontSize": px(12), "color": NOTE_COLOR},
            "itemGap": 6,
        }
    ]
    if bars.marks:
        titles.append(
            {
                "text": " · ".join(bars.marks),
                "right": 0,
                "top": px(52),
                "textStyle": {"fontSize": px(13), "color": MARK_COLOR, "fontWeight": "normal"},
            }
        )
    if log_y:
        # the rule of _log_range, rounded down to a whole decade (ECharts labels decades
        # only: the axis starts on a label), and counting the greedy T = 1 bars too (the
        # Plotly figure this replaced cut those under its bound); bars start at the
        # bottom (startValue: ECharts' default base on a log axis is 1, bars would hang)
        low = min(
            [bars.low] + [v for key, y in bars.series if key == "context" for v in y if v > 0]
        )
        lo, hi = _log_range(low)
        bottom = float(10 ** math.floor(lo))
        yaxis = {"type": "log", "logBase": 10, "min": bottom, "max": 10**hi, "startValue": bottom}
    else:
        yaxis = {"type": "value", "min": 0, "max": _linear_top(bars)}
    yaxis.update(
        {
            # the top of the range (1.1 · peak, 10^0.05) is not a round number: no label there
            "axisLabel": {"showMaxLabel": False, "fontSize": px(12)},
            "name": labels["probability"],
            "nameLocation": "end",
            "nameGap": 10,
            "nameTextStyle": {"align": "left", "fontSize": px(12), "color": NOTE_COLOR},
        }
    )
    legend = [labels[key] for key in keys]
    return {
        "animation": False,
        "title": titles,
        "legend": {
            "bottom": 0,
            "left": 0,
            "textStyle": {"fontSize": px(12)},
            "itemWidth": px(25),
            "itemHeight": px(14),
        },
        "tooltip": {"trigger": "item", "confine": True},
        # outerBoundsMode "same": the rotated tick labels stay inside the grid's box, above
        # the legend, whose height (rows) depends on the chart's width: see _legend_media
        "grid": {
            "left": 0,
            "right": 8,
            "top": px(52),
            "bottom": _legend_bottom(legend, 2000, k),
            "outerBoundsMode": "same",
        },
        "media": _legend_media(legend, k),
        "dataset": {"dimensions": dimensions, "source": source},
        "xAxis": {
            "type": "category",
            "axisTick": {"alignWithLabel": True},
            # the marked ticks in the colour of the line that names the marks
            "data": [
                tick if tick == name else {"value": tick, "textStyle": MARKED_TICK}
                for tick, name in zip(bars.ticks, bars.names, strict=True)
            ],
            "axisLabel": {"interval": 0, "rotate": 30, "hideOverlap": False, "fontSize": px(12)},
        },
        "yAxis": yaxis,
        "series": series,
    }


# Legend layout, estimated the way ECharts lays out a horizontal legend: per item a 25 px
# symbol, 5 px to the text and 10 px to the next item, rows 24 px apart (12 px text). A
# text's width is over-estimated (6 px a narrow character, 12 px a wide one: CJK, full-width
# punctuation) so that a row too many leaves space, never an overlap.
LEGEND_ROW, LEGEND_ITEM, LEGEND_GAP = 24, 30, 10


def _text_px(text: str) -> float:
    return sum(12.0 if east_asian_width(ch) in "WF" else 6.0 for ch in text)


def _legend_bottom(names: list[str], width: int, scale: float = 1.0) -> int:
    """Space under the grid (px) for the legend of ``names`` on a chart ``width`` px wide,
    its text and symbols ``scale`` × the default size (presenter mode)."""
    rows, x = 1, 0.0
    for name in names:
        item = (LEGEND_ITEM + _text_px(name)) * scale
        if x and x + item > width - 10:  # 5 px legend padding each side
            rows, x = rows + 1, 0.0
        x += item + LEGEND_GAP
    return round(rows * LEGEND_ROW * scale + 12 * scale)


def _legend_media(names: list[str], scale: float = 1.0) -> list[dict]:
    """ECharts media queries (``maxWidth``: the chart's width) that raise ``grid.bottom``
    as the legend wraps onto more rows on a narrower chart, plus the default (no query)
    that restores the wide layout when the chart grows again. Widths are checked every
    10 px down to 240 px; each query reaches 9 px above the width where its row was found,
    so between two checks the larger space wins."""
    media = [{"option": {"grid": {"bottom": _legend_bottom(names, 2000, scale)}}}]
    wider = media[0]["option"]["grid"]["bottom"]
    for width in range(1990, 230, -10):
        bottom = _legend_bottom(names, width, scale)
        if bottom != wider:
            media.append({"query": {"maxWidth": width + 9}, "option": {"grid": {"bottom": bottom}}})
            wider = bottom
    return media


def _bar_value(value: float, log_y: bool) -> float | None:
    """A bar's height in the option: ``None`` (no bar) for a value ≤ 0 on a log axis."""
    return None if log_y and value <= 0 else value
