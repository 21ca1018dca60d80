"""Step-through lesson, tree mode: the drafted token tree and "chain vs tree" bars.

Node colours are the token strip's (``ui/render.py`` ``STYLES``: fill, border, text), so
the tree's legend reads like the chain's: a node never looked at by the rule
(``unchecked``) wears the strip's ``discarded`` colours, the root (the last committed
token) the ``committed`` ones, the target's token after the path (★) ``correction`` or
``bonus`` -- or ``cut`` when a stop on the path came first and ★ was never appended
(``correction_cut`` / ``bonus_cut``: the rule's verdict is kept in the label).
``tests/test_tree_page.py`` checks the two tables agree.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from specdec_core.core.numfmt import fmt_prob
from specdec_core.ui.figures.common import visible_token

# Loaded once at import (the first lookup parses the template, ≈ 0.1–0.2 s: at start-up,
# not in a student's first click); an object is also cheaper to apply than a name.
TEMPLATE = pio.templates["plotly_white"]

__all__ = ["STATE_COLORS", "STATE_STYLE", "tree_layout", "tree_figure", "chain_tree_figure"]

#: node state → the token strip's style name (``ui/render.py`` ``STYLES``)
STATE_STYLE = {
    "root": "committed",
    "tentative": "tentative",
    "accepted": "accepted",
    "rejected": "rejected",
    "unchecked": "discarded",
    "cut": "cut",
    "correction": "correction",
    "bonus": "bonus",
    "correction_cut": "cut",  # ★ not appended: a stop on the path came first
    "bonus_cut": "cut",
}
#: style name → (fill, border, text) — the strip's colours
STATE_COLORS = {
    "committed": ("#dbeafe", "#1e3a8a", "#1e3a8a"),
    "tentative": ("#fef3c7", "#d97706", "#78350f"),
    "accepted": ("#bbf7d0", "#16a34a", "#14532d"),
    "rejected": ("#fecaca", "#dc2626", "#7f1d1d"),
    "discarded": ("#e5e7eb", "#6b7280", "#374151"),
    "cut": ("#f3f4f6", "#6b7280", "#4b5563"),
    "correction": ("#fed7aa", "#ea580c", "#7c2d12"),
    "bonus": ("#e9d5ff", "#9333ea", "#581c87"),
}
MAX_LABEL = 10  # characters of a token shown in its box (the hover has all of it)


def _short(token) -> str:
    shown = visible_token(token)
    if len(shown) > MAX_LABEL:
        shown = shown[: MAX_LABEL - 1] + "…"
    return html.escape(shown)  # Plotly reads <b>, <br>, … in text: a token is never markup


def tree_layout(parents: Sequence[int]) -> list[float]:
    """A y coordinate per node (breadth-first order, ``parents[i] = −1`` for the root's
    children): leaves on consecutive rows in depth-first order, a parent at the mean of
    its children. The root's row is the mean of its children's (``-1`` key not returned)."""
    n = len(parents)
    kids: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        kids.setdefault(parent, []).append(i)
    y = [0.0] * n
    row = 0

    def place(node: int) -> float:
        nonlocal row
        children = kids.get(node, [])
        if not children:
            y[node] = float(row)
            row += 1
            return y[node]
        ys = [place(c) for c in children]
        mean = sum(ys) / len(ys)
        if node >= 0:
            y[node] = mean
        return mean

    place(-1)
    return y


def _root_y(parents: Sequence[int], y: Sequence[float]) -> float:
    top = [y[i] for i, parent in enumerate(parents) if parent == -1]
    return sum(top) / len(top) if top else 0.0


def tree_figure(tree, root_token, labels: Mapping[str, str], presenter: bool = False) -> go.Figure:
    """The round's token tree (a ``engine.tree.views.TreeView``): the root (``root_token``, the
    last committed token) on the left, one column per depth (= position id), each node a
    box with its token coloured by its state, the committed path's edges thick and green
    (edges to ``cut`` nodes -- accepted by the rule but after a stop -- grey and dashed);
    after verify, the target's correction/bonus token marked ★ as one more child of the
    path's last node (its column is its position), joined by a dotted edge, drawn ``cut``
    (``correction_cut`` / ``bonus_cut``) when a stop kept it from being appended.
    Hover: node, token, position id, ``q``, ``p``, accept probability, ``u``.

    ``labels``: every state name of :data:`STATE_STYLE` (legend), ``root``, ``root_tick``
    (with ``{pos}``), ``depth`` (a format string with ``{d}`` and ``{pos}``), ``node``,
    ``position``, ``accept``, ``not_checked``, ``next_correction`` and ``next_bonus``
    (hover of the ★ node).

    Raises:
        KeyError: a label missing from ``labels``."""
    nodes = tree.nodes
    parents = [n.parent for n in nodes]
    end = tree.path[-1] if tree.path else -1  # the accepted path's last node (−1: the root)
    if tree.next_token is not None:  # ★ as one more child of the path's end, last in its row
        parents.append(end)
    y = tree_layout(parents)
    root_y = _root_y(parents, y)
    depth = max((n.depth for n in nodes), default=0)
    base = tree.committed_len - 1  # the root's position
    path = set(tree.path)
    fig = go.Figure()
    # edges: plain ones thin and grey, the committed path thick and green, the part of the
    # accepted path a stop cut off dashed grey (never drawn as the path: it was not kept)
    edge_style = {
        "plain": dict(color="#9ca3af", width=1.5),
        "path": dict(color="#16a34a", width=4),
        "cut": dict(color=STATE_COLORS["cut"][1], width=2.5, dash="dash"),
    }
    for group, style in edge_style.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for n in nodes:
            on = "plain" if n.index not in path else ("cut" if n.state == "cut" else "path")
            if on != group:
                continue
            px, py = (0.0, root_y) if n.parent < 0 else (float(nodes[n.parent].depth), y[n.parent])
            xs += [px, float(n.depth), None]
            ys += [py, y[n.index], None]
        if xs:
            fig.add_scatter(
                x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False, line=style
            )
    star = None
    # ★'s state: the rule's verdict (correction | bonus), "…_cut" when a stop came first
    verdict = tree.next_kind or (tree.kind if tree.kind in ("correction", "bonus") else None)
    verdict = verdict if verdict in ("correction", "bonus") else "correction"
    star_state = verdict if tree.next_appended else verdict + "_cut"
    if tree.next_token is not None:  # in the column of its position, under the path's end
        sx, sy = len(tree.path) + 1.0, y[-1]
        fx, fy = (float(nodes[end].depth), y[end]) if end >= 0 else (0.0, root_y)
        fig.add_scatter(
            x=[fx, sx],
            y=[fy, sy],
            mode="lines",
            hoverinfo="skip",
            showlegend=False,
            line=dict(color=STATE_COLORS[STATE_STYLE[star_state]][1], width=2.5, dash="dot"),
        )
        star = (sx, sy, base + len(tree.path) + 1)
    # boxes: one annotation per node (sized to its text), hover from a transparent marker
    font = 17 if presenter else 14
    hx, hy, htext = (
        [0.0],
        [root_y],
        [f"{labels['root']}: {_short(root_token)}<br>{labels['position']} {base}"],
    )
    boxes = [(0.0, root_y, _short(root_token), "root")]
    shown_states = ["root"]
    for n in nodes:
        state = n.state
        boxes.append((float(n.depth), y[n.index], _short(n.token), state))
        if state not in shown_states:
            shown_states.append(state)
        lines = [
            f"{labels['node']} #{n.index}: {_short(n.token)} (id {n.token.id})",
            f"{labels['position']} {n.position}",
            f"q = {fmt_prob(n.q)}",
            f"p = {fmt_prob(n.p)}",
            f"{labels['accept']} = {fmt_prob(n.accept_prob, missing=labels['not_checked'])}",
            f"u = {fmt_prob(n.u)}",
            labels[state],
        ]
        hx.append(float(n.depth))
        hy.append(y[n.index])
        htext.append("<br>".join(lines))
    if star is not None:
        boxes.append((star[0], star[1], "★ " + _short(tree.next_token), star_state))
        shown_states.append(star_state)
        hx.append(star[0])
        hy.append(star[1])
        hover = [
            f"★ {_short(tree.next_token)} (id {tree.next_token.id})",
            f"{labels['position']} {star[2]}",
            labels["next_" + verdict],
        ]
        if star_state != verdict:
            hover.append(labels[star_state])
        htext.append("<br>".join(hover))
    for x, yy, text, state in boxes:
        fill, border, color = STATE_COLORS[STATE_STYLE[state]]
        fig.add_annotation(
            x=x,
            y=yy,
            text=f"<b>{text}</b>" if state in ("correction", "bonus") else text,
            showarrow=False,
            bgcolor=fill,
            bordercolor=border,
            borderwidth=2,
            borderpad=4,
            font=dict(family="monospace", size=font, color=color),
        )
    fig.add_scatter(
        x=hx,
        y=hy,
        mode="markers",
        showlegend=False,
        hovertext=htext,
        hoverinfo="text",
        marker=dict(size=34, color="rgba(0,0,0,0)"),
    )
    for state in shown_states:  # legend: one swatch per state on the figure
        fill, border, _ = STATE_COLORS[STATE_STYLE[state]]
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=labels[state],
            marker=dict(symbol="square", size=14, color=fill, line=dict(color=border, width=2)),
        )
    columns = max(depth, int(star[0]) if star is not None else 0)
    ticks = list(range(columns + 1))
    text = [labels["root_tick"].format(pos=base)]
    text += [labels["depth"].format(d=d, pos=base + d) for d in range(1, columns + 1)]
    leaves = max(y, default=0.0) + 1
    height = int(max(230, 46 * leaves + 120))
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=10, b=10),
        template=TEMPLATE,
        showlegend=True,
        legend=dict(orientation="h", yanchor="top", y=-0.16, x=0, font=dict(size=font - 1)),
        hoverlabel=dict(font=dict(family="monospace")),
        xaxis=dict(
            tickmode="array",
            tickvals=ticks,
            ticktext=text,
            range=[-0.5, ticks[-1] + 0.5],
            showgrid=False,
            zeroline=False,
            side="top",
            fixedrange=True,
            tickfont=dict(size=font - 2),
        ),
        yaxis=dict(visible=False, autorange="reversed", fixedrange=True, range=None),
    )
    fig.update_yaxes(range=[leaves - 0.4, -0.6])
    return fig


def chain_tree_figure(rows: Sequence, labels: Mapping[str, str]) -> go.Figure:
    """Two panels of bars, one bar per method (``rows``: objects with ``label``,
    ``tokens_per_target_forward`` and ``ms_per_token``): accepted tokens per target
    forward and measured ms per generated token. ``labels``: ``per_forward``,
    ``ms_per_token``."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=(labels["per_forward"], labels["ms_per_token"])
    )
    colors = ["#1f77b4", "#2ca02c", "#9ca3af"]
    names = [r.label for r in rows]
    for col, (attr, fmt) in enumerate(
        (("tokens_per_target_forward", "{:.2f}"), ("ms_per_token", "{:.1f}")), start=1
    ):
        values = [float(getattr(r, attr)) for r in rows]
        fig.add_bar(
            x=names,
            y=values,
            marker_color=colors[: len(rows)],
            showlegend=False,
            text=[fmt.format(v) for v in values],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}: %{text}<extra></extra>",
            row=1,
            col=col,
        )
        fig.update_yaxes(range=[0, max(values, default=1.0) * 1.25 or 1.0], row=1, col=col)
    fig.update_layout(
        height=250, margin=dict(l=10, r=10, t=30, b=10), template=TEMPLATE, bargap=0.35
    )
    return fig
