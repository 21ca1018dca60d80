"""Where lossless ends: each rule's exact final distribution against ``p``, the price of a
lossy rule over δ (TV lost, acceptance gained), the pair's speed/TV trade-off, first-token
distributions of two decoders, and verify-vs-decode logit differences per position.

Every visible word comes in through ``labels`` (zh or en)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from specdec_core.core.numfmt import fmt_prob, fmt_short
from specdec_core.ui.figures.common import COLORS, horizontal_y_title

__all__ = [
    "LOSSY_COLORS",
    "lossy_finals_figure",
    "lossy_price_figure",
    "tradeoff_figure",
    "two_dists_figure",
    "logit_gap_figure",
]

LOSSY_COLORS = {
    "p": COLORS["p"],
    "exact": "#2ca02c",
    "typical": "#d62728",
    "threshold": "#9467bd",
}
DASH = {"typical": "solid", "threshold": "dash"}
LABEL_AT = {"typical": "top center", "threshold": "bottom center"}  # two lines' labels apart
ZERO_AT = 1e-9  # where a difference of exactly 0 is drawn on a log axis


def _layout(fig: go.Figure, title: str, y_title: str, x_title: str, height: int = 400):
    """Title, legend below the plot in its own band, the y title horizontal above the axis
    (readable in Chinese), the white template."""
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=height,
        margin=dict(l=50, r=10, t=70, b=105),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0),
        xaxis=dict(title=dict(text=x_title, standoff=8)),
        template="plotly_white",
    )
    return horizontal_y_title(fig, y_title, yshift=6)


def lossy_finals_figure(
    names: Sequence[str],
    p: np.ndarray,
    finals: Mapping[str, np.ndarray],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars: ``p`` and each rule's exact final distribution (``[V]`` each).

    ``finals``: rule (a key of :data:`LOSSY_COLORS`) → ``[V]``. ``labels``: keys ``p``,
    ``probability``, ``token`` and every rule in ``finals``.
    """
    fig = go.Figure()
    top = 0.0
    for key, values in (("p", p), *finals.items()):
        y = np.asarray(values, dtype=float)
        top = max(top, float(y.max()))
        fig.add_bar(
            x=list(names),
            y=y,
            name=labels[key],
            marker_color=LOSSY_COLORS[key],
            text=[fmt_short(v) for v in y],
            textposition="outside",
            textfont=dict(size=11),
            cliponaxis=False,
            customdata=[fmt_prob(v) for v in y],
            hovertemplate="%{x}: %{customdata}<extra>" + labels[key] + "</extra>",
        )
    fig = _layout(fig, title, labels["probability"], labels["token"], height=420)
    fig.update_layout(barmode="group", bargap=0.2)
    fig.update_xaxes(type="category")
    return fig.update_yaxes(range=[0, max(top * 1.2, 0.05)])


def lossy_price_figure(
    deltas: np.ndarray,
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    exact_acceptance: float,
    chosen: float,
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Over δ: each lossy rule's TV to ``p`` (solid markers) and its acceptance (open
    markers), the exact rule's acceptance as a dotted line (its TV is 0), δ chosen marked.

    Args:
        deltas: ``[G]``; ``curves``: rule → (``tv [G]``, ``acceptance [G]``).
        labels: keys ``delta``, ``value``, ``exact_A`` and ``<rule>_tv``, ``<rule>_A``.
    """
    fig = go.Figure()
    x = np.asarray(deltas, dtype=float)
    for rule, (tv, acc) in curves.items():
        color, dash = LOSSY_COLORS[rule], DASH.get(rule, "solid")
        for key, y, sym in ((f"{rule}_tv", tv, "circle"), (f"{rule}_A", acc, "circle-open")):
            fig.add_scatter(
                x=x,
                y=np.asarray(y, dtype=float),
                name=labels[key],
                mode="lines+markers",
                line=dict(color=color, dash=dash, width=2 if key.endswith("_tv") else 1),
                marker=dict(size=5, symbol=sym),
                hovertemplate="δ = %{x:.3f}: %{y:.4f}<extra>" + labels[key] + "</extra>",
            )
    fig.add_hline(y=exact_acceptance, line=dict(color=LOSSY_COLORS["exact"], dash="dot"))
    fig.add_scatter(
        x=[x.min(), x.max()],
        y=[exact_acceptance] * 2,
        mode="lines",
        name=labels["exact_A"],
        line=dict(color=LOSSY_COLORS["exact"], dash="dot"),
        hoverinfo="skip",
    )
    fig.add_vline(x=chosen, line=dict(color="#6b7280", width=1, dash="dot"))
    fig = _layout(fig, title, labels["value"], labels["delta"], height=440)
    return fig.update_yaxes(range=[-0.02, 1.05])


def tradeoff_figure(
    points: Mapping[str, Sequence[tuple[float, float, float]]],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """The pair's trade-off: x = TV lost (to the exact rule's output), y = speed gained
    (ratio to the exact rule, 1 = the same speed), one line per lossy rule over δ, each
    point labelled by its δ; the exact rule is the point (0, 1).

    Args:
        points: rule → ``[(δ, tv, speed ratio), …]``.
        labels: keys ``tv``, ``speed``, ``exact`` and each rule.
    """
    fig = go.Figure()
    for rule, pts in points.items():
        d = [a for a, _, _ in pts]
        fig.add_scatter(
            x=[b for _, b, _ in pts],
            y=[c for _, _, c in pts],
            name=labels[rule],
            mode="lines+markers+text",
            text=[f"δ={v:g}" for v in d],
            textposition=LABEL_AT.get(rule, "top center"),
            textfont=dict(size=10, color=LOSSY_COLORS[rule]),
            line=dict(color=LOSSY_COLORS[rule], dash=DASH.get(rule, "solid")),
            marker=dict(size=8),
            cliponaxis=False,
            hovertemplate="TV %{x:.4f} · ×%{y:.3f}<extra>" + labels[rule] + "</extra>",
        )
    fig.add_scatter(
        x=[0.0],
        y=[1.0],
        name=labels["exact"],
        mode="markers",
        marker=dict(size=13, symbol="star", color=LOSSY_COLORS["exact"]),
        hovertemplate="TV 0 · ×1<extra>" + labels["exact"] + "</extra>",
    )
    fig.add_hline(y=1.0, line=dict(color="#9ca3af", width=1, dash="dot"))
    return _layout(fig, title, labels["speed"], labels["tv"], height=440)


def two_dists_figure(
    names: Sequence[str],
    rows: Mapping[str, np.ndarray],
    colors: Mapping[str, str],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Grouped bars of several empirical distributions over the same outcomes.

    ``rows``: legend name → ``[K]`` frequencies; ``colors``: legend name → colour;
    ``labels``: keys ``probability``, ``outcome``.
    """
    fig = go.Figure()
    top = 0.0
    for name, values in rows.items():
        y = np.asarray(values, dtype=float)
        top = max(top, float(y.max()) if y.size else 0.0)
        fig.add_bar(
            x=list(names),
            y=y,
            name=name,
            marker_color=colors[name],
            customdata=[fmt_prob(v) for v in y],
            hovertemplate="%{x}: %{customdata}<extra>" + name + "</extra>",
        )
    fig = _layout(fig, title, labels["probability"], labels["outcome"], height=400)
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(type="category", tickangle=-40)
    return fig.update_yaxes(range=[0, max(top * 1.15, 0.05)])


def logit_gap_figure(
    positions: Sequence[int],
    series: Mapping[str, np.ndarray],
    margins: np.ndarray | None,
    colors: Mapping[str, str],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Max ``|Δlogit|`` (verify forward vs one-token decode) per position, one line per
    dtype, on a log axis; the top-2 margin as bars behind them (where a bar is below a
    line, that dtype's noise can flip the argmax).

    Args:
        positions: ``[P]`` position numbers; ``series``: dtype label → ``[P]`` max |Δ|;
        margins: ``[P]`` top-2 margins (logit units) or ``None``.
        labels: keys ``position``, ``logit``, ``margin``, ``zero`` (added to the legend
            name of a series with a difference of exactly 0, drawn at :data:`ZERO_AT`).
    """
    fig = go.Figure()
    x = list(positions)
    if margins is not None:
        fig.add_bar(
            x=x,
            y=np.asarray(margins, dtype=float),
            name=labels["margin"],
            marker_color="#d1d5db",
            hovertemplate="%{x}: %{y:.3g}<extra>" + labels["margin"] + "</extra>",
        )
    for name, values in series.items():
        raw = np.asarray(values, dtype=float)
        y = np.maximum(raw, ZERO_AT)  # a log axis has no 0
        fig.add_scatter(
            x=x,
            y=y,
            name=f"{name} ({labels['zero']})" if (raw <= 0).any() else name,
            customdata=raw,
            mode="lines+markers",
            line=dict(color=colors[name]),
            hovertemplate="%{x}: %{customdata:.3g}<extra>" + name + "</extra>",
        )
    fig = _layout(fig, title, labels["logit"], labels["position"], height=400)
    return fig.update_yaxes(type="log")
