"""Where drafts come from: time per generated token, split into drafting, the target's
verification and the rest, one bar per drafter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

__all__ = ["DRAFTER_TIME_COLORS", "drafter_time_figure"]

DRAFTER_TIME_COLORS = {"draft": "#ff7f0e", "verify": "#1f77b4", "other": "#9ca3af"}
TOP_PX = 50  # the title's room above the plot area
LEGEND_GAP_PX = 50  # plot area's bottom to the legend's top: tick labels and the x title
BOTTOM_PX = LEGEND_GAP_PX + 55  # the legend below them, room for two rows


def drafter_time_figure(
    names: Sequence[str],
    draft_ms: Sequence[float],
    verify_ms: Sequence[float],
    other_ms: Sequence[float],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Horizontal stacked bars: milliseconds per generated token spent drafting, in the
    target's verification forward and elsewhere, one bar per run (``names``; put the
    target-only baseline first, its time under ``verify``). Shorter bar = faster.

    ``labels``: keys ``draft``, ``verify``, ``other``, ``ms``. Returns a ``go.Figure``.
    """
    fig = go.Figure()
    y = list(names)
    for key, values in (("draft", draft_ms), ("verify", verify_ms), ("other", other_ms)):
        fig.add_bar(
            y=y,
            x=[float(v) for v in values],
            name=labels[key],
            orientation="h",
            marker_color=DRAFTER_TIME_COLORS[key],
            hovertemplate="%{y}: %{x:.2f} ms<extra>" + labels[key] + "</extra>",
        )
    totals = [float(a + b + c) for a, b, c in zip(draft_ms, verify_ms, other_ms, strict=True)]
    fig.add_scatter(
        y=y,
        x=totals,
        mode="text",
        text=[f"{v:.2f}" for v in totals],
        textposition="middle right",
        showlegend=False,
        hoverinfo="skip",
    )
    # the legend goes below the x axis's title, so a long title (or a legend that wraps
    # into two rows in a narrow column) never runs through it: its top LEGEND_GAP_PX
    # under the plot area, in paper units of that area's height
    plot_px = 48 * len(y) + 30
    fig.update_layout(
        barmode="stack",
        title=dict(text=title, font=dict(size=15)),
        height=plot_px + TOP_PX + BOTTOM_PX,
        margin=dict(l=10, r=40, t=TOP_PX, b=BOTTOM_PX),
        legend=dict(
            orientation="h", yanchor="top", y=-LEGEND_GAP_PX / plot_px, x=0, traceorder="normal"
        ),
        xaxis=dict(title=labels["ms"], range=[0, max(totals + [1e-3]) * 1.18]),
        yaxis=dict(autorange="reversed", type="category"),
        template="plotly_white",
    )
    return fig
