"""Speed lesson, why: the verify-cost curve ``t(k) / t(1)`` and a round timeline of two
lanes (target-only and speculative) on one time axis, drawn from real forwards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from specdec_core.ui.figures.speed import SPEED_COLORS, _speed_layout

if TYPE_CHECKING:
    from specdec_core.core.timeline import Timeline

__all__ = ["speed_verify_curve_figure", "speed_timeline_figure"]


def speed_verify_curve_figure(
    target_ms: Sequence[float],
    draft_step_ms: float,
    gamma: int,
    labels: Mapping[str, str],
) -> go.Figure:
    """``t(k) / t(1)`` for ``k = 1 … len(target_ms)`` (hover: ms), next to ``y = 1`` (a
    flat curve: verification as cheap as one step, Leviathan's Thm 3.8) and ``y = k``
    (``k`` single steps one after another); the verification of a full round, ``k = γ +
    1``, marked; the draft step as a dotted line. ``labels``: ``title``, ``x``, ``y``,
    ``measured``, ``flat``, ``serial``, ``verify`` (marker, may use ``{k}``), ``draft``."""
    ks = list(range(1, len(target_ms) + 1))
    t1 = target_ms[0] if target_ms and target_ms[0] > 0 else 1.0
    ratio = [ms / t1 for ms in target_ms]
    fig = go.Figure()
    for ys, name, color, dash in (
        (ks, "serial", "overhead", "dot"),
        ([1.0] * len(ks), "flat", "leviathan", "dash"),
    ):
        fig.add_scatter(
            x=ks,
            y=ys,
            mode="lines",
            name=labels[name],
            hoverinfo="skip",
            line=dict(color=SPEED_COLORS[color], dash=dash),
        )
    fig.add_scatter(
        x=ks,
        y=ratio,
        mode="lines+markers",
        name=labels["measured"],
        line=dict(color=SPEED_COLORS["verify"], width=3),
        customdata=list(target_ms),
        hovertemplate="k = %{x}: %{customdata:.2f} ms (%{y:.2f}×)<extra></extra>",
    )
    if draft_step_ms > 0:
        fig.add_scatter(
            x=ks,
            y=[draft_step_ms / t1] * len(ks),
            mode="lines",
            name=labels["draft"],
            line=dict(color=SPEED_COLORS["draft"], dash="dot"),
            hovertemplate=f"{draft_step_ms:.2f} ms (%{{y:.2f}}×)<extra></extra>",
        )
    k = gamma + 1
    if k <= len(ratio):
        fig.add_scatter(
            x=[k],
            y=[ratio[k - 1]],
            mode="markers+text",
            name=labels["verify"].format(k=k),
            marker=dict(size=14, color=SPEED_COLORS["draft"], symbol="diamond"),
            text=[f"{ratio[k - 1]:.2f}×"],
            textposition="top center",
            hoverinfo="skip",
        )
    top = max(ratio + [1.0])
    _speed_layout(fig, labels["title"], labels["x"], labels["y"], height=380)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, max(2.0, top * 1.25)])
    return fig


def _lane_bars(fig: go.Figure, lane: str, timeline: Timeline, kinds: Mapping[str, str]) -> None:
    """One trace per kind of forward on ``lane`` (bars from start to end, ms)."""
    for kind, name in kinds.items():
        spans = [s for s in timeline.forwards if s.kind == kind]
        if not spans:
            continue
        text = [""] * len(spans)
        if kind == "verify":  # tokens committed by the round, on its verify bar
            committed = {i: r.committed for i, r in enumerate(timeline.rounds)}
            text = [f"+{committed.get(s.round, 0)}" for s in spans]
        fig.add_bar(
            y=[lane] * len(spans),
            x=[s.ms for s in spans],
            base=[s.start_ms for s in spans],
            orientation="h",
            name=name,
            marker_color=SPEED_COLORS[kind],
            marker_line=dict(width=0.5, color="white"),
            text=text,
            textposition="inside",
            insidetextanchor="middle",
            textfont=dict(color="white"),
            customdata=[[s.round + 1, s.start_ms, s.end_ms] for s in spans],
            hovertemplate=name + " · #%{customdata[0]}: %{customdata[1]:.1f}–%{customdata[2]:.1f}"
            " ms (%{x:.2f} ms)<extra></extra>",
        )


def speed_timeline_figure(
    autoregressive: Timeline, speculative: Timeline, labels: Mapping[str, str]
) -> go.Figure:
    """Two lanes on one time axis (ms from the start of each run): target-only (each
    target forward a bar) and speculative (draft-forward bars, the verification bar with
    the tokens the round committed written on it). The gaps are the loop's overhead; a
    dotted line marks where each lane finished. Zoom by dragging; the range slider below
    pans. ``labels``: ``title``, ``x``, ``ar`` and ``sp`` (lanes), ``target``, ``draft``,
    ``verify`` (bar kinds), ``done`` (end marker, may use ``{ms}``)."""
    fig = go.Figure()
    sp_kinds = {"draft": labels["draft"], "verify": labels["verify"]}
    lanes = (
        (labels["ar"], autoregressive, {"target": labels["target"]}),
        (labels["sp"], speculative, sp_kinds),
    )
    for lane, timeline, kinds in lanes:
        _lane_bars(fig, lane, timeline, kinds)
    for i, (_, timeline, _) in enumerate(lanes):
        fig.add_shape(
            type="line",
            x0=timeline.total_ms,
            x1=timeline.total_ms,
            y0=i - 0.45,
            y1=i + 0.45,
            line=dict(color="#111827", width=2, dash="dot"),
        )
        fig.add_annotation(
            x=timeline.total_ms,
            y=i + 0.45,
            text=labels["done"].format(ms=f"{timeline.total_ms:.0f}"),
            showarrow=False,
            xanchor="right",
            yanchor="bottom",
            font=dict(size=11),
            bgcolor="rgba(255,255,255,0.8)",
        )
    _speed_layout(fig, labels["title"], labels["x"], "", height=390)
    end = max(autoregressive.total_ms, speculative.total_ms)
    fig.update_layout(
        barmode="overlay",
        bargap=0.35,
        dragmode="zoom",
        yaxis=dict(autorange="reversed", title=None, fixedrange=True),
        xaxis=dict(range=[0, end * 1.02], rangeslider=dict(visible=True, thickness=0.08)),
        margin=dict(b=95),  # the range slider; the legend below it (``speed.LEGEND``)
    )
    return fig
