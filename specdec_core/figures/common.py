"""What every figure shares: the colours of ``p``, ``q``, ``min(p, q)`` and ``[p − q]+``
and how a token is written on an axis (whitespace made visible, duplicates told apart)."""

from __future__ import annotations

from collections.abc import Sequence

from ..trace import TokenInfo

__all__ = ["COLORS", "visible_token", "token_labels", "horizontal_y_title"]

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


def horizontal_y_title(fig, text: str, yshift: int = 18):
    """Write the y-axis title horizontally above the axis, left-aligned (a rotated title
    reads badly in Chinese), and return the figure."""
    fig.update_yaxes(title=None)
    fig.add_annotation(
        x=0, xref="paper", xanchor="left", y=1.0, yref="paper", yanchor="bottom",
        yshift=yshift, text=text, showarrow=False, font=dict(size=12, color="#374151"),
    )  # fmt: skip
    return fig
