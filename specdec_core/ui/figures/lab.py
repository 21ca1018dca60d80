"""Acceptance-rule lab: the two rows, the proof as a stacked picture, each rule's exact
final distribution, Monte Carlo histograms with error bars, acceptance against temperature."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from specdec_core.core.numfmt import fmt_prob, fmt_short
from specdec_core.ui.figures.common import COLORS, horizontal_y_title

__all__ = [
    "RULE_COLORS",
    "rule_rows_figure",
    "acceptance_stack_figure",
    "rule_finals_figure",
    "empirical_figure",
    "acceptance_temperature_figure",
]

RULE_COLORS = {
    "correct": "#2ca02c",
    "resample_p": "#9467bd",
    "one_hot": "#8c564b",
    "accepted_only": "#17becf",
}


def _lab_layout(fig: go.Figure, labels: Mapping[str, str], title: str, top: float) -> go.Figure:
    """Shared layout: the legend below the plot in its own band (it used to overlap the
    x-axis title), the y title written horizontally above the axis (readable in Chinese),
    room above the bars for their value labels."""
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=420,
        margin=dict(l=50, r=10, t=70, b=110),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0),
        yaxis=dict(range=[0, max(top * 1.2, 0.05)]),
        xaxis=dict(title=dict(text=labels["token"], standoff=8), type="category"),
        bargap=0.2,
        template="plotly_white",
    )
    return horizontal_y_title(fig, labels["probability"], yshift=6)


def _bar(fig: go.Figure, x, y, name: str, color: str, labelled: bool = True, **kw) -> None:
    """A bar trace whose values are also printed on the bars (the numbers a lesson hinges
    on are visible as text, not only on hover); probabilities written by ``fmt_prob``."""
    y = np.asarray(y, dtype=float)
    fig.add_bar(
        x=list(x),
        y=y,
        name=name,
        marker_color=color,
        customdata=[fmt_prob(v) for v in y],
        text=[fmt_short(v) for v in y] if labelled else None,
        textposition="outside",
        textfont=dict(size=11),
        cliponaxis=False,
        hovertemplate="%{x}: %{customdata}<extra>" + name + "</extra>",
        **kw,
    )


def rule_rows_figure(
    names: Sequence[str],
    p: np.ndarray,
    q: np.ndarray,
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars of two probability rows ``p`` and ``q`` (``[V]`` each) over ``names``.

    ``labels``: keys ``p``, ``q``, ``probability``, ``token``. Returns a ``go.Figure``.
    """
    fig = go.Figure()
    for key, values in (("p", p), ("q", q)):
        _bar(fig, names, values, labels[key], COLORS[key])
    top = float(max(np.max(p), np.max(q)))
    return _lab_layout(fig, labels, title, top).update_layout(barmode="group")


def acceptance_stack_figure(
    names: Sequence[str],
    min_pq: np.ndarray,
    excess: np.ndarray,
    p: np.ndarray,
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """The proof as a picture: per token, the accept path ``min(p, q)`` stacked under the
    reject path ``β·r = [p − q]+``, with a marker at ``p`` (the stack reaches it exactly).

    Args:
        names: ``[V]`` token labels; ``min_pq``, ``excess``, ``p``: ``[V]`` arrays.
        labels: keys ``min``, ``excess``, ``p``, ``probability``, ``token``.
    """
    x = list(names)
    fig = go.Figure()
    _bar(fig, x, min_pq, labels["min"], COLORS["min"], labelled=False)
    _bar(fig, x, excess, labels["excess"], COLORS["excess"], labelled=False)
    p = np.asarray(p, dtype=float)
    fig.add_scatter(
        x=x,
        y=p,
        name=labels["p"],
        mode="markers+text",
        text=[fmt_short(v, 3) for v in p],
        textposition="top center",
        marker=dict(symbol="line-ew", size=36, color="#111", line=dict(width=3, color="#111")),
        textfont=dict(color="#111"),
        customdata=[fmt_prob(v) for v in p],
        hovertemplate="%{x}: %{customdata}<extra></extra>",
    )
    return _lab_layout(fig, labels, title, float(p.max()) * 1.08).update_layout(barmode="stack")


def rule_finals_figure(
    names: Sequence[str],
    p: np.ndarray,
    finals: Mapping[str, np.ndarray],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars: the target ``p`` and each rule's exact final distribution.

    Args:
        finals: rule name (a key of ``RULE_COLORS``) → ``[V]`` final distribution.
        labels: keys ``p``, ``probability``, ``token`` and every rule name in ``finals``.
    """
    fig = go.Figure()
    _bar(fig, names, p, labels["p"], COLORS["p"])
    top = float(np.max(p))
    for rule, values in finals.items():
        values = np.asarray(values, dtype=float)
        top = max(top, float(values.max()))
        _bar(fig, names, values, labels[rule], RULE_COLORS[rule])
    return _lab_layout(fig, labels, title, top).update_layout(barmode="group")


def empirical_figure(
    names: Sequence[str],
    exact: Sequence[tuple[str, np.ndarray, str]],
    empirical: Sequence[tuple[str, np.ndarray, np.ndarray, str]],
    labels: Mapping[str, str],
    title: str,
    z: float = 1.96,
) -> go.Figure:
    """Monte Carlo histograms against exact laws, with error bars.

    Args:
        names: ``[V]`` token labels.
        exact: ``(legend name, [V] probabilities, colour)`` drawn as plain bars.
        empirical: ``(legend name, [V] frequencies, [V] standard errors, colour)`` drawn as
            bars with ``± z·SE`` error bars (``z = 1.96``: a 95 % interval).
        labels: keys ``probability``, ``token``.
    """
    fig = go.Figure()
    top = 0.0
    for name, values, color in exact:
        values = np.asarray(values, dtype=float)
        top = max(top, float(values.max()))
        _bar(fig, names, values, name, color)
    for name, freq, err, color in empirical:
        freq, err = np.asarray(freq, dtype=float), np.asarray(err, dtype=float)
        top = max(top, float((freq + z * err).max()))
        _bar(
            fig,
            names,
            freq,
            name,
            color,
            labelled=False,
            error_y=dict(type="data", array=z * err, visible=True, color="#333", thickness=1.5),
        )
    return _lab_layout(fig, labels, title, top).update_layout(barmode="group")


def acceptance_temperature_figure(
    temperatures: np.ndarray,
    acceptance: np.ndarray,
    chosen: tuple[float, float],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """``A(T) = Σ min(p_T, q_T)`` against temperature, with the chosen ``(T, A)`` marked.

    ``labels``: keys ``acceptance``, ``temperature``, ``chosen``.
    """
    fig = go.Figure()
    fig.add_scatter(
        x=np.asarray(temperatures, dtype=float),
        y=np.asarray(acceptance, dtype=float),
        mode="lines+markers",
        name=labels["acceptance"],
        line=dict(color=COLORS["min"]),
        marker=dict(size=4),
        customdata=[fmt_prob(v) for v in np.asarray(acceptance, float)],
        hovertemplate="T = %{x:.2f}: A = %{customdata}<extra></extra>",
    )
    fig.add_scatter(
        x=[chosen[0]],
        y=[chosen[1]],
        name=labels["chosen"],
        marker=dict(size=13, color=COLORS["excess"], symbol="diamond"),
        customdata=[fmt_prob(chosen[1])],
        text=[fmt_short(chosen[1], 3)],
        mode="markers+text",
        textposition="top center",
        hovertemplate="T = %{x:.2f}: A = %{customdata}<extra></extra>",
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=420,
        margin=dict(l=50, r=10, t=70, b=100),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0),
        yaxis=dict(range=[-0.02, 1.08]),
        xaxis=dict(title=dict(text=labels["temperature"], standoff=8)),
        template="plotly_white",
    )
    return horizontal_y_title(fig, labels["acceptance"], yshift=6)
