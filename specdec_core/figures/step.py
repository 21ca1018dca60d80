"""Step-through lesson: one drafted position's distributions as grouped bars."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from ..numfmt import fmt_prob
from ..trace import DistSlice
from .common import COLORS, horizontal_y_title, token_labels

__all__ = ["distribution_figure", "shown_indices"]

TOP_TOKENS = 8
SHORT = {"p": "p", "q": "q", "min": "min(p, q)", "excess": "[p − q]+"}  # math: both languages
# Loaded once at import (the first lookup parses the template, ≈ 0.1–0.2 s: at start-up,
# not in the first student's first click); an object is also cheaper to apply than a name.
TEMPLATE = pio.templates["plotly_white"]


def shown_indices(dist: DistSlice, keep: tuple[int | None, ...] = (), top: int = TOP_TOKENS):
    """Indices into the slice to draw: the ``top`` tokens by ``max(p, q)`` plus every id in
    ``keep`` (drafted, correction), in descending ``max(p, q)`` order."""
    rows = [r for r in (dist.p, dist.q) if r is not None]
    score = np.max(np.stack(rows), axis=0) if rows else np.zeros(len(dist.tokens))
    order = np.argsort(-score, kind="stable")
    ids = dist.token_ids.tolist()
    chosen = set(order[:top].tolist()) | {ids.index(k) for k in keep if k in ids}
    return [int(i) for i in order if int(i) in chosen]


def _with_context_tokens(dist: DistSlice, context: DistSlice, top: int) -> DistSlice:
    """Greedy: ``dist`` holds one-hot rows (one or two tokens). Add the context's top tokens
    with ``p = q = min = excess = 0`` (exact: a one-hot row is 0 off its argmax), so the
    faint T = 1 bars have tokens to stand on."""
    ids = dist.token_ids.tolist()
    extra = [i for i, tid in enumerate(context.token_ids.tolist()) if tid not in ids][:top]
    if not extra:
        return dist

    def grow(values):
        return None if values is None else np.append(values, np.zeros(len(extra), values.dtype))

    return replace(
        dist,
        token_ids=np.append(dist.token_ids, context.token_ids[extra]),
        tokens=dist.tokens + tuple(context.tokens[i] for i in extra),
        p=grow(dist.p), q=grow(dist.q), min_pq=grow(dist.min_pq), excess=grow(dist.excess),
    )  # fmt: skip


def distribution_figure(
    dist: DistSlice,
    labels: Mapping[str, str],
    title: str,
    marked_id: int | None = None,
    correction_id: int | None = None,
    log_y: bool = False,
    context: DistSlice | None = None,
    top: int = TOP_TOKENS,
) -> go.Figure:
    """Grouped bars of ``p``, ``q``, ``min(p, q)`` and ``[p − q]+`` over the top tokens by
    ``max(p, q)`` (plus the drafted and the correction token, always shown and marked).
    The rest of each row's mass ("other") is written as numbers above the plot, not drawn
    as a bar (at T = 1 it would dwarf every token).

    Args:
        dist: the position's :class:`DistSlice` (``q`` may be ``None``: bonus position;
            ``p`` may be ``None``: before verification).
        labels: keys ``p``, ``q``, ``min``, ``excess``, ``other``, ``probability``,
            ``token``, ``marked`` (over the drafted token), ``correction`` (over the
            correction token) and, when ``context`` is given, ``context`` (legend name of
            the faint T = 1 bars).
        title: figure title.
        marked_id: the drafted token's id. correction_id: the correction token's id.
        log_y: logarithmic probability axis.
        context: greedy mode only: the target's distribution at T = 1 over the same
            logits (context the greedy rule does not use), drawn faintly behind ``p``.

    Returns:
        ``go.Figure`` (barmode ``group``). Every value shown is also in the hover text,
        written with :func:`fmt_prob` (never ``0.0000`` for a non-zero value).
    """
    if context is not None and context.p is not None:
        dist = _with_context_tokens(dist, context, top)
    keep = shown_indices(dist, (marked_id, correction_id), top)
    names = token_labels([dist.tokens[i] for i in keep])
    series = [
        ("p", dist.p, dist.p_other),
        ("q", dist.q, dist.q_other),
        ("min", dist.min_pq, dist.min_other),
        ("excess", dist.excess, dist.excess_other),
    ]
    fig = go.Figure()
    peak, low = 0.0, 1.0
    others = []
    if context is not None and context.p is not None:
        ctx = dict(zip(context.token_ids.tolist(), context.p.astype(float).tolist(), strict=True))
        y = [ctx.get(int(dist.token_ids[i]), 0.0) for i in keep]
        fig.add_bar(
            x=names, y=y, name=labels["context"], marker=dict(color="rgba(31,119,180,0.22)",
            line=dict(color="#1f77b4", width=1)), customdata=[fmt_prob(v) for v in y],
            hovertemplate="%{x}: %{customdata}<extra>" + labels["context"] + "</extra>",
        )  # fmt: skip
        peak = max(peak, max(y, default=0.0))
    for key, values, other in series:
        if values is None:
            continue
        y = values.astype(float)[keep]
        peak = max(peak, float(y.max(initial=0.0)))
        low = min(low, float(y[y > 0].min(initial=1.0)))
        others.append(f"{SHORT[key]} = {fmt_prob(other)}")
        fig.add_bar(
            x=names,
            y=y,
            name=labels[key],
            marker_color=COLORS[key],
            customdata=[fmt_prob(v) for v in y],
            hovertemplate="%{x}: %{customdata}<extra>" + labels[key] + "</extra>",
        )
    ids = [int(dist.token_ids[i]) for i in keep]
    # the drafted (▼) and correction (★) tokens are marked in their axis labels: markers
    # above adjacent bars used to overlap
    ticks = list(names)
    legend_marks = []
    for tid, sign, key in ((marked_id, "▼", "marked"), (correction_id, "★", "correction")):
        if tid is not None and tid in ids and key in labels:
            ticks[ids.index(tid)] = f"{sign} {ticks[ids.index(tid)]}"
            legend_marks.append(f"{sign} {labels[key]}")
    if legend_marks:
        fig.add_annotation(
            x=0, xref="paper", xanchor="left", y=1.0, yref="paper", yanchor="bottom",
            text=" · ".join(legend_marks), showarrow=False, font=dict(size=13, color="#9a3412"),
        )  # fmt: skip
    fig.update_xaxes(tickmode="array", tickvals=names, ticktext=ticks)
    if others:
        fig.add_annotation(
            x=1.0, xref="paper", xanchor="right", y=1.0, yref="paper", yanchor="bottom",
            yshift=18, text=f"{labels['other']}: " + ", ".join(others), showarrow=False,
            font=dict(size=12, color="#374151"),
        )  # fmt: skip
    if log_y:
        lo = max(low, 1e-12)
        yaxis = dict(type="log", range=[np.log10(lo) - 0.5, 0.05])
    else:
        yaxis = dict(range=[0, max(peak * 1.1, 0.05)])
    fig.update_layout(
        title=dict(text=title, font=dict(size=15), y=0.98, yanchor="top"),
        barmode="group",
        height=360,
        margin=dict(l=40, r=10, t=100, b=70),
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
        yaxis=yaxis,
        xaxis=dict(type="category", tickangle=-30),
        bargap=0.18,
        template=TEMPLATE,
    )
    return horizontal_y_title(fig, labels["probability"])
