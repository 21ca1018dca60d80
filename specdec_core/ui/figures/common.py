"""What every figure shares: the colours of ``p``, ``q``, ``min(p, q)`` and ``[p − q]+``
and how a token is written on an axis (whitespace made visible, bytes of a partial UTF-8
character in hex, duplicates told apart)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from specdec_core.core.trace import TokenInfo, byte_segments

__all__ = ["COLORS", "visible_token", "token_labels", "horizontal_y_title"]

COLORS = {
    "p": "#1f77b4",
    "q": "#ff7f0e",
    "min": "#2ca02c",
    "excess": "#d62728",
}


NBSP = "\u00a0"  # between the hex bytes of one token: a cell never breaks inside it


#: Characters that draw nothing (format and control characters, other spaces and line
#: separators: a zero-width joiner, a soft hyphen, a no-break space): written ⟨U+200D⟩.
_INVISIBLE = ("Cf", "Cc", "Zs", "Zl", "Zp")


def _visible_text(text: str) -> str:
    text = text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")
    return "".join(
        f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c) in _INVISIBLE else c for c in text
    )


def visible_token(token: str | TokenInfo) -> str:
    """Make whitespace visible: ``␣`` for a space, ``↵`` for a newline, ``⇥`` for a tab,
    ``⟨U+200D⟩`` for a character that draws nothing (a zero-width joiner, a control).
    Given a :class:`TokenInfo` that holds part of a multi-byte UTF-8 character (byte-level
    BPE: "春" is three tokens), its bytes are written in hex between ``‹ ›`` (``‹E6›``,
    ``␣‹E6 98›``) instead of "�"."""
    if isinstance(token, TokenInfo):
        if not token.partial:
            return visible_token(token.text)
        raw = token.raw
        assert raw is not None  # partial implies byte-level
        return "".join(
            f"‹{part.replace(' ', NBSP)}›" if is_bytes else _visible_text(part)
            for part, is_bytes in byte_segments(raw)
        )
    return _visible_text(token) or "∅"


def token_labels(tokens: Sequence[TokenInfo]) -> list[str]:
    """Unique axis labels for tokens (Plotly merges equal categories): the visible text
    (bytes of a partial UTF-8 character in hex, :func:`visible_token`), plus ``#id`` when
    two tokens would look the same."""
    texts = [visible_token(t) for t in tokens]
    return [f"{x} #{t.id}" if texts.count(x) > 1 else x for x, t in zip(texts, tokens, strict=True)]


def horizontal_y_title(fig, text: str, yshift: int = 18):
    """Write the y-axis title horizontally above the axis, left-aligned (a rotated title
    reads badly in Chinese), and return the figure."""
    fig.update_yaxes(title=None)
    fig.add_annotation(
        x=0,
        xref="paper",
        xanchor="left",
        y=1.0,
        yref="paper",
        yanchor="bottom",
        yshift=yshift,
        text=text,
        showarrow=False,
        font=dict(size=12, color="#374151"),
    )
    return fig
