"""The round timeline figure (``ui/figures/speed_timing.speed_timeline_figure``)."""

from __future__ import annotations

from specdec_core.core.timeline import Span, Timeline
from specdec_core.ui.figures.speed_timing import speed_timeline_figure

LABELS = {k: k for k in ("title", "x", "ar", "sp", "target", "draft", "verify")} | {
    "done": "done {ms}"
}


def test_the_legend_sits_under_the_axis_not_against_the_title():
    """On a 390-px phone the three entries wrap to three rows; above the plot they ran
    into the title, so the legend lies in rows at the figure's bottom."""

    def spans(kinds):
        return tuple(Span(k, 2.0 * i, 2.0 * i + 1.5, i) for i, k in enumerate(kinds))

    ar = Timeline("autoregressive", 8.0, spans(["target"] * 4), ())
    sp = Timeline("speculative", 6.0, spans(["draft", "draft", "verify"]), ())
    fig = speed_timeline_figure(ar, sp, LABELS)
    legend = fig.layout.legend
    assert (legend.orientation, legend.xref, legend.yref, legend.yanchor, legend.y) == (
        "h",
        "container",
        "container",
        "bottom",
        0,
    )
    assert fig.layout.margin.b >= 90 and fig.layout.title.text == "title"
    assert [a.text for a in fig.layout.annotations] == ["done 8", "done 6"]
