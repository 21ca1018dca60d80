"""The live answers chart on the teacher's projector: one bar per choice (counts only, no
names), the right choice green after the reveal."""

from __future__ import annotations

import html

import plotly.graph_objects as go

BAR = "#1f77b4"
RIGHT = "#2ca02c"
DIM = "#b0b7c3"


def answers_figure(choices: list[str], counts: list[int], correct: int | None) -> go.Figure:
    """Bars of ``counts`` (answers per choice) labelled with ``choices`` (HTML-escaped:
    Plotly reads a few tags in labels); ``correct``: the revealed choice's index (green,
    the others dimmed) or ``None``."""
    labels = [f"{i + 1}. {html.escape(c)}" for i, c in enumerate(choices)]
    counts = [int(n) for n in counts] + [0] * (len(choices) - len(counts))
    if correct is None:
        colors = [BAR] * len(choices)
    else:
        colors = [RIGHT if i == correct else DIM for i in range(len(choices))]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=counts,
            marker_color=colors,
            text=[str(n) for n in counts],
            textposition="outside",
            cliponaxis=False,
            hoverinfo="skip",
        )
    )
    top = max(counts, default=0)
    fig.update_layout(
        height=260,
        margin=dict(l=10, r=10, t=24, b=10),
        yaxis=dict(range=[0, max(1, top) * 1.25], dtick=max(1, -(-top // 5)), title=None),
        xaxis=dict(type="category", tickfont=dict(size=16)),
        font=dict(size=15),
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig
