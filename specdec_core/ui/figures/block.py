"""Block verification's key step as a picture: for one drafted block, at each prefix
``i = 0..γ`` the scaled target row ``p'_i · p`` against the draft row ``q`` (nothing after
the block), with the excess ``[p'_i · p − q]+`` that resampling after ``i`` kept drafts
supplies (``rules/lab/block.py``'s :class:`~specdec_core.rules.lab.block.BlockStep`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec_core.core.numfmt import fmt_prob, fmt_short
from specdec_core.ui.figures.common import COLORS, horizontal_y_title

__all__ = ["block_steps_figure"]


def block_steps_figure(
    names: Sequence[str],
    steps: Sequence,
    titles: Sequence[str],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """One panel per prefix ``i``: grouped bars ``p'_i · p`` and ``q`` over ``names`` and
    the excess as a third bar. ``steps``: ``BlockStep`` ``[γ + 1]``; ``titles``: a panel
    title each; ``labels``: keys ``scaled_p``, ``q``, ``excess``, ``probability``."""
    fig = make_subplots(rows=1, cols=len(steps), subplot_titles=list(titles), shared_yaxes=True)
    top = max(max(max(s.scaled_p), max(s.q)) for s in steps)
    for col, step in enumerate(steps, start=1):
        for key, values in (("scaled_p", step.scaled_p), ("q", step.q), ("excess", step.excess)):
            color = {"scaled_p": COLORS["p"], "q": COLORS["q"], "excess": COLORS["excess"]}[key]
            fig.add_bar(
                x=list(names),
                y=list(values),
                name=labels[key],
                marker_color=color,
                showlegend=col == 1,
                legendgroup=key,
                customdata=[fmt_prob(v) for v in values],
                text=[fmt_short(v) if v > 0 else "" for v in values],
                textposition="outside",
                textfont=dict(size=10),
                cliponaxis=False,
                hovertemplate="%{x}: %{customdata}<extra>" + labels[key] + "</extra>",
                row=1,
                col=col,
            )
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=400,
        margin=dict(l=50, r=10, t=120, b=90),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0),
        barmode="group",
        bargap=0.15,
        template="plotly_white",
    )
    fig.update_yaxes(range=[0, max(top * 1.25, 0.05)])
    fig.update_xaxes(type="category")
    fig.update_annotations(font=dict(size=12))  # the panel titles
    return horizontal_y_title(fig, labels["probability"], yshift=30)
