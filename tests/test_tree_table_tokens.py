"""Token cells that markdown or the eye would lose: the tree KV tables (HTML, every cell
escaped) show the token "-" as "-" and "<b>" as text, and a token that draws nothing (a
zero-width joiner) as ⟨U+200D⟩, not a blank; the chain's tables too."""

from __future__ import annotations

import html
import re

from specdec_core.core.trace import TokenInfo
from specdec_core.engine.tree.views import CompactionView, KVSlot
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.step.tree_tables import compaction_html, compaction_tables

TOKENS = ["-", "\u200d", "* ", "1.", "#", "+", "\u00ad", "<b>"]
SHOWN = ["-", "⟨U+200D⟩", "*␣", "1.", "#", "+", "⟨U+00AD⟩", "<b>"]


def test_invisible_characters_get_a_visible_name():
    assert [visible_token(t) for t in TOKENS] == SHOWN
    assert visible_token("\u200dx\u200b") == "⟨U+200D⟩x⟨U+200B⟩"
    assert visible_token(" a\n") == "␣a↵"  # whitespace keeps its own signs


def test_tree_kv_cells_show_the_token_as_text():
    slots = tuple(
        KVSlot(i, TokenInfo(100 + i, text, text), i, "accepted", "kept", i)
        for i, text in enumerate(TOKENS)
    )
    plan = CompactionView(slots, len(slots), len(slots), False)
    for table in compaction_tables(plan):
        assert list(table.values())[1] == SHOWN  # the token column
    page = compaction_html(plan)
    tables = [
        re.findall(r"<tr[^>]*>(?:<td[^>]*>[^<]*</td>){1}<td[^>]*>([^<]*)</td>", body)
        for body in page.split("</table>")[:2]
    ]
    assert [[html.unescape(c) for c in cells] for cells in tables] == [SHOWN, SHOWN]
