"""How running text names a token: :func:`token_in_sentence`, the one helper behind every
sentence that names one (the step page's messages and chart titles, the lessons, the rule
lab, a live class's frames). The token is written as the strip writes it
(:func:`~specdec_core.ui.figures.common.visible_token`: ``␣`` for a space, bytes of a
partial character in hex) between quotation marks, as inline code where the text is
markdown or HTML: a one-character token such as ``一`` or ``.`` otherwise reads as a dash
or as the sentence's own punctuation ("修正 token 一 是…"), and inside a coloured message
box the code background alone hardly shows."""

from __future__ import annotations

import html
from typing import Literal

from specdec_core.core.trace import TokenInfo
from specdec_core.ui.errors import code_span
from specdec_core.ui.figures.common import visible_token

__all__ = ["OPEN", "CLOSE", "token_in_sentence"]

OPEN, CLOSE = "“", "”"  # both languages (the zh strings quote with “ ” too)
Markup = Literal["markdown", "html", "text"]


def token_in_sentence(token: TokenInfo | str, markup: Markup = "markdown") -> str:
    """``token`` as a sentence names it: ``“`␣the`”`` (markdown: a code span Streamlit
    shows literally, whatever the token holds), ``“<code>␣the</code>”`` (HTML, escaped) or
    ``“␣the”`` (plain text: a chart or table title)."""
    text = visible_token(token)
    if markup == "markdown":
        text = code_span(text)
    elif markup == "html":
        text = f"<code>{html.escape(text)}</code>"
    return f"{OPEN}{text}{CLOSE}"
