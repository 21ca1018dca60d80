"""State beyond the KV cache: the exact laws of the first output tokens under a penalty —
the target alone against the per-prefix rule, the broadcast shortcut and ignored
penalties (one grouped bar chart)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from specdec_core.core.numfmt import fmt_prob
from specdec_core.ui.figures.common import horizontal_y_title

__all__ = ["STATE_COLORS", "penalty_laws_figure"]

STATE_COLORS = {
    "target": "#1f77b4",
    "per_prefix": "#2ca02c",
    "broadcast": "#d62728",
    "ignored": "#7f7f7f",
}


def penalty_laws_figure(
    labels: Sequence[str],
    laws: Mapping[str, Sequence[float]],
    names: Mapping[str, str],
    axis: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars: one group per outcome (``labels``, e.g. ``"A B"``), one bar per law
    (``laws``: key of :data:`STATE_COLORS` → ``[len(labels)]`` probabilities, named by
    ``names``); ``axis``: ``"outcome"`` and ``"probability"`` titles. Hover: 4 digits."""
    fig = go.Figure()
    top = 0.0
    for key, values in laws.items():
        values = [float(v) for v in values]
        top = max(top, *values)
        fig.add_bar(
            x=list(labels),
            y=values,
            name=names[key],
            marker_color=STATE_COLORS[key],
            customdata=[fmt_prob(v) for v in values],
            hovertemplate="%{x}: %{customdata}<extra>" + names[key] + "</extra>",
        )
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=400,
        margin=dict(l=50, r=10, t=70, b=110),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0),
        yaxis=dict(range=[0, max(top * 1.15, 0.05)]),
        xaxis=dict(title=dict(text=axis["outcome"], standoff=8), type="category"),
        barmode="group",
        bargap=0.25,
        template="plotly_white",
    )
    return horizontal_y_title(fig, axis["probability"], yshift=6)
