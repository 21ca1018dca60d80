"""Where drafts come from: time per generated token, split into drafting, the target's
verification and the rest, one bar per drafter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from specdec_core.ui.figures.common import horizontal_y_title

__all__ = ["DRAFTER_TIME_COLORS", "SOURCE_COLORS", "drafter_time_figure", "sources_figure"]

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


SOURCE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")  # one per prompt / setting


def sources_figure(
    names: Sequence[str],
    groups: Sequence[str],
    measured: Sequence[Sequence[tuple[float, float, float]]],
    predicted: Sequence[Sequence[float]],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars, projector-sized: the measured speed-up of each draft source
    (``names``, the x axis) for each group (``groups``: e.g. the two prompts), as bars with
    the spread of the repeats (``measured[g][i] = (median, min, max)``) and the cost
    model's prediction (``predicted[g][i]``) as a diamond on its bar; a dashed line at 1×
    (the target alone). ``labels``: keys ``measured``, ``predicted``, ``y``, ``breakeven``.
    Returns a ``go.Figure``."""
    fig = go.Figure()
    # a long name breaks at its first space: six upright names fit a 1024 px screen
    x = [n.replace(" ", "<br>", 1) if len(n) > 9 else n for n in names]
    for g, group in enumerate(groups):
        color = SOURCE_COLORS[g % len(SOURCE_COLORS)]
        med = [float(m[0]) for m in measured[g]]
        fig.add_bar(
            x=x,
            y=med,
            name=f"{group} · {labels['measured']}",
            marker_color=color,
            offsetgroup=str(g),
            error_y=dict(
                type="data",
                symmetric=False,
                array=[float(m[2]) - float(m[0]) for m in measured[g]],
                arrayminus=[float(m[0]) - float(m[1]) for m in measured[g]],
                color="#374151",
                thickness=1.5,
            ),
            text=[f"{v:.2f}×" for v in med],
            textposition="inside",
            insidetextanchor="start",
            textangle=0,
            textfont=dict(size=14, color="white"),
            hovertemplate="%{x}: %{y:.2f}×<extra>" + f"{group} · {labels['measured']}</extra>",
        )
        fig.add_scatter(
            x=x,
            y=[float(v) for v in predicted[g]],
            mode="markers",
            name=f"{group} · {labels['predicted']}",
            marker=dict(symbol="diamond", size=14, color=color, line=dict(width=2, color="#111")),
            offsetgroup=str(g),
            hovertemplate="%{x}: %{y:.2f}×<extra>" + f"{group} · {labels['predicted']}</extra>",
        )
    tops = [float(m[2]) for ms in measured for m in ms] + [float(v) for p in predicted for v in p]
    fig.add_hline(
        y=1.0,
        line_dash="dash",
        line_color="#6b7280",
        annotation_text=labels["breakeven"],
        annotation_position="top left",
        annotation_font=dict(size=13, color="#374151"),
    )
    fig.update_layout(
        barmode="group",
        scattermode="group",
        title=dict(text=title, font=dict(size=18)),
        height=520,
        font=dict(size=15),
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.14, x=0, font=dict(size=14)),
        xaxis=dict(type="category", tickfont=dict(size=15), tickangle=0, automargin=True),
        uniformtext=dict(minsize=11, mode="hide"),  # a bar too narrow for its label hides it
        yaxis=dict(range=[0, max(tops + [1.2]) * 1.12], rangemode="tozero"),
        template="plotly_white",
    )
    fig.update_layout(margin=dict(t=90))
    return horizontal_y_title(fig, labels["y"])  # a rotated title reads badly in Chinese
