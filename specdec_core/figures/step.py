"""Step-through lesson: one drafted position's distributions as grouped bars."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from ..trace import DistSlice
from .common import COLORS, token_labels

__all__ = ["distribution_figure"]


def distribution_figure(
    dist: DistSlice,
    labels: Mapping[str, str],
    title: str,
    marked_id: int | None = None,
) -> go.Figure:
    """Grouped bars of ``p``, ``q``, ``min(p, q)`` and ``[p − q]+`` over the slice's tokens
    plus an "other" bucket (the rest of each row's mass).

    Args:
        dist: the position's :class:`DistSlice` (``q`` may be ``None``: bonus position;
            ``p`` may be ``None``: before verification).
        labels: keys ``p``, ``q``, ``min``, ``excess``, ``other``, ``probability``,
            ``token``, ``marked`` (annotation over the drafted token).
        title: figure title.
        marked_id: token id to mark (the drafted token).

    Returns:
        ``go.Figure`` (barmode ``group``; y is probability in [0, 1]).
    """
    names = token_labels(dist.tokens) + [labels["other"]]
    series = [
        ("p", dist.p, dist.p_other),
        ("q", dist.q, dist.q_other),
        ("min", dist.min_pq, dist.min_other),
        ("excess", dist.excess, dist.excess_other),
    ]
    fig = go.Figure()
    top = 0.0
    for key, values, other in series:
        if values is None:
            continue
        y = np.append(values.astype(float), other)
        top = max(top, float(y.max()))
        fig.add_bar(
            x=names,
            y=y,
            name=labels[key],
            marker_color=COLORS[key],
            hovertemplate="%{x}: %{y:.4f}<extra>" + labels[key] + "</extra>",
        )
    if marked_id is not None and marked_id in dist.token_ids.tolist():
        idx = dist.token_ids.tolist().index(marked_id)
        fig.add_annotation(
            x=names[idx], y=top * 1.08, text=f"▼ {labels['marked']}", showarrow=False,
            font=dict(size=13, color="#333"),
        )  # fmt: skip
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        barmode="group",
        height=330,
        margin=dict(l=50, r=10, t=60, b=60),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
        yaxis=dict(title=labels["probability"], range=[0, max(top * 1.18, 0.05)]),
        xaxis=dict(title=labels["token"], type="category", tickangle=-30),
        bargap=0.18,
        template="plotly_white",
    )
    return fig
