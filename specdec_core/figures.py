"""Plotly figure builders: trace in, ``go.Figure`` out (pure; the only module that imports
plotly). Every visible word comes in through ``labels`` so pages can pass zh or en."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .trace import DistSlice, TokenInfo

COLORS = {
    "p": "#1f77b4",
    "q": "#ff7f0e",
    "min": "#2ca02c",
    "excess": "#d62728",
}


def visible_token(text: str) -> str:
    """Make whitespace visible: ``␣`` for a space, ``↵`` for a newline, ``⇥`` for a tab."""
    return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def token_labels(tokens: Sequence[TokenInfo]) -> list[str]:
    """Unique axis labels for tokens (Plotly merges equal categories): the visible text,
    plus ``#id`` when two tokens would look the same."""
    texts = [visible_token(t.text) for t in tokens]
    return [f"{x} #{t.id}" if texts.count(x) > 1 else x for x, t in zip(texts, tokens, strict=True)]


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


# ---------------------------------------------------------------- acceptance-rule lab

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


# ---------------------------------------------------------------- where drafts come from

DRAFTER_TIME_COLORS = {"draft": "#ff7f0e", "verify": "#1f77b4", "other": "#9ca3af"}


def drafter_time_figure(
    names: Sequence[str],
    draft_ms: Sequence[float],
    verify_ms: Sequence[float],
    other_ms: Sequence[float],
    labels: Mapping[str, str],
    title: str,
) -> go.Figure:
    """Horizontal stacked bars: milliseconds per generated token spent drafting, in the
    target's verification forward and elsewhere, one bar per run (``names``; put the
    target-only baseline first, its time under ``verify``). Shorter bar = faster.

    ``labels``: keys ``draft``, ``verify``, ``other``, ``ms``. Returns a ``go.Figure``.
    """
    fig = go.Figure()
    y = list(names)
    for key, values in (("draft", draft_ms), ("verify", verify_ms), ("other", other_ms)):
        fig.add_bar(
            y=y, x=[float(v) for v in values], name=labels[key], orientation="h",
            marker_color=DRAFTER_TIME_COLORS[key],
            hovertemplate="%{y}: %{x:.2f} ms<extra>" + labels[key] + "</extra>",
        )  # fmt: skip
    totals = [float(a + b + c) for a, b, c in zip(draft_ms, verify_ms, other_ms, strict=True)]
    fig.add_scatter(
        y=y, x=totals, mode="text", text=[f"{v:.2f}" for v in totals],
        textposition="middle right", showlegend=False, hoverinfo="skip",
    )  # fmt: skip
    fig.update_layout(
        barmode="stack",
        title=dict(text=title, font=dict(size=15)),
        height=120 + 48 * len(y),
        margin=dict(l=10, r=40, t=70, b=45),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, traceorder="normal"),
        xaxis=dict(title=labels["ms"], range=[0, max(totals + [1e-3]) * 1.18]),
        yaxis=dict(autorange="reversed", type="category"),
        template="plotly_white",
    )
    return fig


# ---------------------------------------------------------------- speed page (issue 6)
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


def _speed_layout(fig: go.Figure, title: str, x: str, y: str, height: int = 340) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, font=dict(size=15)),
        height=height,
        margin=dict(l=55, r=20, t=60, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
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
    fig.add_hline(
        y=1.0,
        line_dash="dot",
        line_color=SPEED_COLORS["slower"],
        secondary_y=True,
        annotation_text=labels["breakeven"],
        annotation_position="bottom right",
    )
    _speed_layout(fig, labels["title"], labels["x"], labels["tokens"], height=380)
    top = max([w for _, _, w in curve] + [1.0])
    fig.update_yaxes(
        title_text=labels["improvement"], secondary_y=True, range=[0, top * 1.25], showgrid=False,
        tickmode="linear", tick0=0, dtick=0.5 if top <= 4 else 1.0,
    )  # fmt: skip
    fig.update_yaxes(range=[0, max(e for _, e, _ in curve) * 1.25], secondary_y=False)
    fig.update_xaxes(dtick=1)
    return fig


def speed_breakdown_figure(
    bars: Sequence[tuple[str, Mapping[str, float]]],
    labels: Mapping[str, str],
) -> go.Figure:
    """Horizontal stacked bars of time (ms). ``bars``: ``[(bar name, {part: ms})]`` with
    parts among ``draft``, ``verify``, ``overhead``, ``target``; ``labels`` names each part
    and gives ``title`` and ``x``."""
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
    _speed_layout(fig, labels["title"], labels["x"], "", height=120 + 60 * len(bars))
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
    rates: Sequence[float], alpha: float, labels: Mapping[str, str]
) -> go.Figure:
    """Measured fraction of rounds whose draft ``i`` was accepted (bars) next to ``α^i``,
    what independent acceptances with rate α would give (line). ``labels``: ``title``,
    ``x``, ``y``, ``measured``, ``model``."""
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
    _speed_layout(fig, labels["title"], labels["x"], labels["y"])
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, 1.05])
    return fig


def speed_gamma_sweep_figure(
    points: Sequence[Mapping[str, float]], labels: Mapping[str, str]
) -> go.Figure:
    """Speed-up over target-only decoding against γ: measured, the cost model from
    measured forward times and α, and Leviathan's formula from α and ``c``; 1× dotted.

    ``points``: dicts with ``gamma``, ``speedup``, ``forward_time_speedup``,
    ``leviathan_speedup``. ``labels``: ``title``, ``x``, ``y``, ``measured``, ``forward``,
    ``leviathan``, ``breakeven``."""
    gammas = [p["gamma"] for p in points]
    fig = go.Figure()
    for key, name, color, dash in (
        ("speedup", labels["measured"], SPEED_COLORS["measured"], "solid"),
        ("forward_time_speedup", labels["forward"], SPEED_COLORS["forward"], "dash"),
        ("leviathan_speedup", labels["leviathan"], SPEED_COLORS["leviathan"], "dot"),
    ):
        fig.add_scatter(
            x=gammas,
            y=[p[key] for p in points],
            name=name,
            mode="lines+markers",
            line=dict(color=color, dash=dash, width=3 if key == "speedup" else 2),
            hovertemplate="γ=%{x}: %{y:.2f}×<extra>" + name + "</extra>",
        )
    fig.add_hline(
        y=1.0,
        line_dash="dot",
        line_color=SPEED_COLORS["slower"],
        annotation_text=labels["breakeven"],
        annotation_position="bottom right",
    )
    _speed_layout(fig, labels["title"], labels["x"], labels["y"], height=380)
    fig.update_xaxes(dtick=1)
    return fig


def speed_batch_figure(
    points: Sequence[Mapping[str, float]], labels: Mapping[str, str]
) -> go.Figure:
    """Throughput (tokens/s over all prompts) against batch size: batched target-only,
    sequential speculative, sequential target-only. ``points``: dicts from
    ``bench.batch_sweep_point``. ``labels``: ``title``, ``x``, ``y``, ``batched``,
    ``speculative``, ``sequential``."""
    sizes = [p["batch_size"] for p in points]
    fig = go.Figure()
    for key, name, color, dash in (
        ("batched_autoregressive_tokens_per_s", labels["batched"], SPEED_COLORS["verify"], "solid"),
        (
            "sequential_speculative_tokens_per_s",
            labels["speculative"],
            SPEED_COLORS["draft"],
            "solid",
        ),
        (
            "sequential_autoregressive_tokens_per_s",
            labels["sequential"],
            SPEED_COLORS["target"],
            "dot",
        ),
    ):
        fig.add_scatter(
            x=sizes,
            y=[p[key] for p in points],
            name=name,
            mode="lines+markers",
            line=dict(color=color, dash=dash, width=3),
            hovertemplate="B=%{x}: %{y:.1f}<extra>" + name + "</extra>",
        )
    _speed_layout(fig, labels["title"], labels["x"], labels["y"], height=380)
    fig.update_xaxes(type="log", tickvals=sizes, ticktext=[str(s) for s in sizes])
    return fig
