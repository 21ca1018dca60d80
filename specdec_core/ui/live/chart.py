"""The live answers chart on the teacher's projector: one bar per choice (counts only, no
names), the right choice green after the reveal; at a revote two bars per choice, the
first vote (light) beside the revote."""

from __future__ import annotations

import html

import plotly.graph_objects as go

BAR = "#1f77b4"
RIGHT = "#2ca02c"
DIM = "#b0b7c3"
FIRST = "#aec7e8"  # the first vote's bars at a revote
FIRST_RIGHT = "#98df8a"


def answers_figure(
    choices: list[str],
    counts: list[int],
    correct: int | None,
    first: list[int] | None = None,
    names: tuple[str, str] = ("", ""),
) -> go.Figure:
    """Bars of ``counts`` (answers per choice) labelled with ``choices`` (HTML-escaped:
    Plotly reads a few tags in labels); ``correct``: the revealed choice's index (green,
    the others dimmed) or ``None``; ``first``: the first vote's counts at a revote (drawn
    beside, lighter, with a legend of ``names``: first vote, revote)."""
    labels = [f"{i + 1}. {html.escape(c)}" for i, c in enumerate(choices)]
    fill = lambda ns: [int(n) for n in ns] + [0] * (len(choices) - len(ns))  # noqa: E731
    counts = fill(counts)
    if correct is None:
        colors = [BAR] * len(choices)
        light = [FIRST] * len(choices)
    else:
        colors = [RIGHT if i == correct else DIM for i in range(len(choices))]
        light = [FIRST_RIGHT if i == correct else DIM for i in range(len(choices))]
    bars = [] if first is None else [(fill(first), light, names[0], 0.55)]
    bars.append((counts, colors, names[1], 1.0))
    fig = go.Figure(
        [
            go.Bar(
                x=labels,
                y=ys,
                name=html.escape(name),
                marker_color=shade,
                opacity=opacity,
                text=[str(n) for n in ys],
                textposition="outside",
                cliponaxis=False,
                hoverinfo="skip",
            )
            for ys, shade, name, opacity in bars
        ]
    )
    top = max(counts + (fill(first) if first is not None else []), default=0)
    fig.update_layout(
        height=260,
        margin=dict(l=10, r=10, t=24, b=10),
        yaxis=dict(range=[0, max(1, top) * 1.25], dtick=max(1, -(-top // 5)), title=None),
        xaxis=dict(type="category", tickfont=dict(size=16)),
        font=dict(size=15),
        showlegend=first is not None,
        legend=dict(orientation="h", y=1.12, x=0),
        barmode="group",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig
