"""Speed lesson: per-token cost of a round, expected tokens and improvement against γ,
time breakdowns, accepted-length histogram, per-position acceptance, γ and batch sweeps."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:
    from specdec_core.bench.results import BatchPoint, Breakdown, GammaPoint

__all__ = [
    "LEGEND",
    "SPEED_COLORS",
    "speed_cost_figure",
    "speed_gamma_curve_figure",
    "speed_breakdown_figure",
    "speed_histogram_figure",
    "speed_position_figure",
    "speed_gamma_sweep_figure",
    "speed_batch_figure",
]

SPEED_COLORS = {
    "draft": "#ff7f0e",
    "verify": "#1f77b4",
    "overhead": "#9ca3af",
    "target": "#6b7280",
    "measured": "#111827",
    "forward": "#2ca02c",
    "leviathan": "#9467bd",
    "faster": "#16a34a",
    "slower": "#dc2626",
}


def _line_figure(
    points: Sequence[object],
    x_field: str,
    lines: Sequence[tuple[str, str, str, str, int]],
    labels: Mapping[str, str],
    hover: str,
) -> go.Figure:
    """A figure of one line with markers per ``(field, label, colour, dash, width)``
    over ``x_field`` of each point: the y values are ``field`` of each point, named
    ``labels[label]``, coloured ``SPEED_COLORS[colour]``; ``hover``: the hover text before
    the line's name."""
    fig = go.Figure()
    x = [getattr(p, x_field) for p in points]
    for field, label, colour, dash, width in lines:
        name = labels[label]
        fig.add_scatter(
            x=x,
            y=[getattr(p, field) for p in points],
            name=name,
            mode="lines+markers",
            line=dict(color=SPEED_COLORS[colour], dash=dash, width=width),
            hovertemplate=f"{hover}<extra>{name}</extra>",
        )
    return fig


#: Every speed chart's legend: one wrapping row at the figure's bottom edge, below the x
#: axis's title. Positioned in the container (``yref``), plotly.js reserves the legend's
#: height under the axes' own margin, however many rows it wraps into; above the plot
#: (``y=1`` on the paper) it grew upwards into the title once it wrapped (a half column at
#: 1024 px, a phone).
LEGEND = dict(orientation="h", xref="container", yref="container", yanchor="bottom", y=0, x=0)


def _add_breakeven(fig: go.Figure, xs: Sequence[float], label: str, **where: bool) -> None:
    """The dotted 1× line over ``xs`` as a trace named ``label``, so the label stands in
    the legend: written on the plot (an annotation at either end of the line) it covered
    the measured point at γ = 1 or γ = 8 whenever that point lay near 1×. ``where``:
    ``secondary_y=True`` on a figure with a second y axis."""
    fig.add_scatter(
        x=[min(xs), max(xs)] if xs else [],
        y=[1.0, 1.0] if xs else [],
        name=label,
        mode="lines",
        line=dict(color=SPEED_COLORS["slower"], dash="dot", width=2),
        hoverinfo="skip",
        **where,
    )


def _speed_layout(fig: go.Figure, title: str, x: str, y: str, height: int = 340) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=height,
        margin=dict(l=55, r=20, t=50, b=50),
        legend=LEGEND,
        xaxis=dict(title=x),
        yaxis=dict(title=y, rangemode="tozero"),
        template="plotly_white",
    )
    return fig


def speed_cost_figure(
    advanced: Sequence[int],
    costs_ms: Sequence[float],
    target_step_ms: float,
    labels: Mapping[str, str],
    chosen: int | None = None,
) -> go.Figure:
    """Per-token cost of a round (ms) for each possible number of tokens advanced, green
    where it beats one target step and red where it does not, with the target step as a
    dashed line. ``labels``: ``title``, ``x``, ``y``, ``target`` (line), ``chosen``
    (marker text)."""
    colors = [
        SPEED_COLORS["faster"] if c < target_step_ms else SPEED_COLORS["slower"] for c in costs_ms
    ]
    fig = go.Figure(
        go.Bar(
            x=list(advanced),
            y=list(costs_ms),
            marker_color=colors,
            showlegend=False,
            text=[f"{c:.1f}" for c in costs_ms],
            textposition="outside",
            hovertemplate="%{x}: %{y:.2f} ms<extra></extra>",
        )
    )
    fig.add_hline(
        y=target_step_ms,
        line_dash="dash",
        line_color=SPEED_COLORS["target"],
        annotation_text=f"{labels['target']} {target_step_ms:g} ms",
        annotation_position="top right",
    )
    if chosen is not None and chosen in list(advanced):
        i = list(advanced).index(chosen)
        fig.add_annotation(
            x=chosen, y=costs_ms[i], text=f"▼ {labels['chosen']}", yshift=28, showarrow=False
        )
    _speed_layout(fig, labels["title"], labels["x"], labels["y"])
    fig.update_xaxes(dtick=1)
    top = max(max(costs_ms, default=0.0), target_step_ms)
    fig.update_yaxes(range=[0, top * 1.3])
    return fig


def speed_gamma_curve_figure(
    curve: Sequence[tuple[int, float, float]],
    best_gamma: int,
    labels: Mapping[str, str],
) -> go.Figure:
    """Expected tokens per round (bars, left axis) and walltime improvement (line, right
    axis) against γ, the best γ marked (Leviathan et al. 2023, Eq. 1 / Thm 3.8).

    ``curve``: ``[(γ, E[tokens], improvement)]``. ``labels``: ``title``, ``x``,
    ``tokens``, ``improvement``, ``best``, ``breakeven``."""
    from plotly.subplots import make_subplots

    gammas = [g for g, _, _ in curve]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_bar(
        x=gammas,
        y=[e for _, e, _ in curve],
        name=labels["tokens"],
        marker_color="#bfdbfe",
        hovertemplate="γ=%{x}: %{y:.3f}<extra></extra>",
    )
    fig.add_scatter(
        x=gammas,
        y=[w for _, _, w in curve],
        name=labels["improvement"],
        mode="lines+markers",
        line=dict(color=SPEED_COLORS["leviathan"], width=3),
        secondary_y=True,
        hovertemplate="γ=%{x}: %{y:.3f}×<extra></extra>",
    )
    best = [w for g, _, w in curve if g == best_gamma]
    if best:
        fig.add_scatter(
            x=[best_gamma],
            y=best,
            mode="markers+text",
            name=labels["best"],
            marker=dict(symbol="star", size=18, color="#f59e0b"),
            text=[f"{labels['best']}: γ={best_gamma}, {best[0]:.2f}×"],
            textposition="top center",
            secondary_y=True,
            showlegend=False,
        )
    _add_breakeven(fig, gammas, labels["breakeven"], secondary_y=True)
    _speed_layout(fig, labels["title"], labels["x"], labels["tokens"], height=380)
    top = max([w for _, _, w in curve] + [1.0])
    fig.update_yaxes(
        title_text=labels["improvement"],
        secondary_y=True,
        range=[0, top * 1.25],
        showgrid=False,
        tickmode="linear",
        tick0=0,
        dtick=0.5 if top <= 4 else 1.0,
    )
    fig.update_yaxes(range=[0, max(e for _, e, _ in curve) * 1.25], secondary_y=False)
    fig.update_xaxes(dtick=1)
    return fig


def speed_breakdown_figure(breakdown: Breakdown, labels: Mapping[str, str]) -> go.Figure:
    """Horizontal stacked bars of time (ms): one speculative round (draft, verify,
    overhead) above target-only decoding of as many tokens (target, overhead).
    ``labels``: ``round`` and ``target_only`` (bar names), ``draft``, ``verify``,
    ``overhead``, ``target`` (parts), ``title``, ``x``."""
    r, a = breakdown.round, breakdown.target_only
    bars = [
        (labels["round"], {"draft": r.draft, "verify": r.verify, "overhead": r.overhead}),
        (labels["target_only"], {"target": a.target, "overhead": a.overhead}),
    ]
    fig = go.Figure()
    names = [name for name, _ in bars]
    for part in ("draft", "verify", "overhead", "target"):
        values = [parts.get(part, 0.0) for _, parts in bars]
        if not any(values):
            continue
        fig.add_bar(
            y=names,
            x=values,
            name=labels[part],
            orientation="h",
            marker_color=SPEED_COLORS[part],
            text=[f"{v:.2f}" if v else "" for v in values],
            textposition="inside",
            hovertemplate="%{x:.3f} ms<extra>" + labels[part] + "</extra>",
        )
    # + 40 px: on a phone the legend wraps to one entry a row below the long bar names
    _speed_layout(fig, labels["title"], labels["x"], "", height=160 + 60 * len(bars))
    fig.update_layout(barmode="stack", yaxis=dict(autorange="reversed", title=None))
    return fig


def speed_histogram_figure(histogram: Sequence[int], labels: Mapping[str, str]) -> go.Figure:
    """Rounds that accepted exactly ``n`` drafts, ``n = 0..γ``. ``labels``: ``title``, ``x``,
    ``y``."""
    fig = go.Figure(
        go.Bar(
            x=list(range(len(histogram))),
            y=list(histogram),
            marker_color=SPEED_COLORS["verify"],
            text=list(histogram),
            textposition="outside",
            showlegend=False,
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    _speed_layout(fig, labels["title"], labels["x"], labels["y"])
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, max(list(histogram) + [1]) * 1.2])
    return fig


def speed_position_figure(
    rates: Sequence[float],
    alpha: float,
    labels: Mapping[str, str],
    conditional: Sequence[float] = (),
) -> go.Figure:
    """Measured fraction of rounds whose draft ``i`` was accepted (bars) next to ``α^i``,
    what independent acceptances with rate α would give (line), and, given the
    conditional rates ``α_n`` (``records.conditional_acceptance``), ``Π_{j≤i} α_j``: the
    cost model's prediction of the bars (line). ``labels``: ``title``, ``x``, ``y``,
    ``measured``, ``model``, and ``conditional`` when ``conditional`` is not empty."""
    positions = list(range(1, len(rates) + 1))
    fig = go.Figure()
    fig.add_bar(
        x=positions,
        y=list(rates),
        name=labels["measured"],
        marker_color=SPEED_COLORS["forward"],
        hovertemplate="%{x}: %{y:.3f}<extra></extra>",
    )
    fig.add_scatter(
        x=positions,
        y=[alpha**i for i in positions],
        name=labels["model"],
        mode="lines+markers",
        line=dict(color=SPEED_COLORS["leviathan"], dash="dash"),
    )
    if conditional:
        fig.add_scatter(
            x=list(range(1, len(conditional) + 1)),
            y=list(itertools.accumulate(conditional, operator.mul)),
            name=labels["conditional"],
            mode="lines+markers",
            line=dict(color=SPEED_COLORS["measured"], dash="dot"),
            hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        )
    _speed_layout(fig, labels["title"], labels["x"], labels["y"])
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, 1.05])
    return fig


def speed_gamma_sweep_figure(points: Sequence[GammaPoint], labels: Mapping[str, str]) -> go.Figure:
    """Speed-up over target-only decoding against γ: measured, the cost model from
    measured forward times and α, and Leviathan's formula from α and ``c``; 1× dotted.

    ``labels``: ``title``, ``x``, ``y``, ``measured``, ``forward``, ``leviathan``,
    ``breakeven``."""
    lines = (  # (the point's field, its label, colour, dash, width)
        ("speedup", "measured", "measured", "solid", 3),
        ("forward_time_speedup", "forward", "forward", "dash", 2),
        ("leviathan_speedup", "leviathan", "leviathan", "dot", 2),
    )
    fig = _line_figure(points, "gamma", lines, labels, "γ=%{x}: %{y:.2f}×")
    _add_breakeven(fig, [p.gamma for p in points], labels["breakeven"])
    _speed_layout(fig, labels["title"], labels["x"], labels["y"], height=380)
    fig.update_xaxes(dtick=1)
    return fig


def speed_batch_figure(points: Sequence[BatchPoint], labels: Mapping[str, str]) -> go.Figure:
    """Throughput (tokens/s over all prompts) against batch size: batched target-only,
    sequential speculative, sequential target-only. ``points``: from
    ``bench.sweeps.batch_sweep_point``. ``labels``: ``title``, ``x``, ``y``, ``batched``,
    ``speculative``, ``sequential``."""
    sizes = [p.batch_size for p in points]
    lines = (  # (the point's field, its label, colour, dash, width)
        ("batched_autoregressive_tokens_per_s", "batched", "verify", "solid", 3),
        ("sequential_speculative_tokens_per_s", "speculative", "draft", "solid", 3),
        ("sequential_autoregressive_tokens_per_s", "sequential", "target", "dot", 3),
    )
    fig = _line_figure(points, "batch_size", lines, labels, "B=%{x}: %{y:.1f}")
    _speed_layout(fig, labels["title"], labels["x"], labels["y"], height=380)
    fig.update_xaxes(type="log", tickvals=sizes, ticktext=[str(s) for s in sizes])
    return fig
