"""Acceptance-rule lab: the two rows, the proof as a stacked picture, each rule's exact
final distribution, Monte Carlo histograms with error bars, acceptance against temperature."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .common import COLORS

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
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=400,
        margin=dict(l=50, r=10, t=50, b=40),
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0),
        yaxis=dict(title=labels["probability"], range=[0, max(top * 1.15, 0.05)]),
        xaxis=dict(title=labels["token"], type="category"),
        bargap=0.2,
        template="plotly_white",
    )
    return fig


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
        fig.add_bar(
            x=list(names), y=np.asarray(values, dtype=float), name=labels[key],
            marker_color=COLORS[key], hovertemplate="%{x}: %{y:.4f}<extra></extra>",
        )  # fmt: skip
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
    fig.add_bar(
        x=x, y=np.asarray(min_pq, dtype=float), name=labels["min"], marker_color=COLORS["min"],
        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    )  # fmt: skip
    fig.add_bar(
        x=x, y=np.asarray(excess, dtype=float), name=labels["excess"],
        marker_color=COLORS["excess"], hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    )  # fmt: skip
    p = np.asarray(p, dtype=float)
    fig.add_scatter(
        x=x, y=p, name=labels["p"], mode="markers+text", text=[f"{v:.3f}" for v in p],
        textposition="top center",
        marker=dict(symbol="line-ew", size=36, color="#111", line=dict(width=3, color="#111")),
        textfont=dict(color="#111"),
        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    )  # fmt: skip
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
    fig.add_bar(
        x=list(names), y=np.asarray(p, dtype=float), name=labels["p"], marker_color=COLORS["p"],
        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    )  # fmt: skip
    top = float(np.max(p))
    for rule, values in finals.items():
        values = np.asarray(values, dtype=float)
        top = max(top, float(values.max()))
        fig.add_bar(
            x=list(names), y=values, name=labels[rule], marker_color=RULE_COLORS[rule],
            hovertemplate="%{x}: %{y:.4f}<extra>" + labels[rule] + "</extra>",
        )  # fmt: skip
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
        fig.add_bar(x=list(names), y=values, name=name, marker_color=color,
                    hovertemplate="%{x}: %{y:.4f}<extra></extra>")  # fmt: skip
    for name, freq, err, color in empirical:
        freq, err = np.asarray(freq, dtype=float), np.asarray(err, dtype=float)
        top = max(top, float((freq + z * err).max()))
        fig.add_bar(
            x=list(names), y=freq, name=name, marker_color=color,
            error_y=dict(type="data", array=z * err, visible=True, color="#333", thickness=1.5),
            hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>",
        )  # fmt: skip
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
        x=np.asarray(temperatures, dtype=float), y=np.asarray(acceptance, dtype=float),
        mode="lines+markers", name=labels["acceptance"], line=dict(color=COLORS["min"]),
        marker=dict(size=4), hovertemplate="T = %{x:.2f}: A = %{y:.4f}<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(
        x=[chosen[0]], y=[chosen[1]], mode="markers", name=labels["chosen"],
        marker=dict(size=13, color=COLORS["excess"], symbol="diamond"),
        hovertemplate="T = %{x:.2f}: A = %{y:.4f}<extra></extra>",
    )  # fmt: skip
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=400,
        margin=dict(l=50, r=10, t=50, b=40),
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0),
        yaxis=dict(title=labels["acceptance"], range=[-0.02, 1.05]),
        xaxis=dict(title=labels["temperature"]),
        template="plotly_white",
    )
    return fig
