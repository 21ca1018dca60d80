"""Token cells that markdown or the eye would lose: the tree KV tables (``st.table``
reads cells as markdown) show the token "-" as "-", not a bullet, and a token that draws
nothing (a zero-width joiner) as ⟨U+200D⟩, not a blank; the chain's tables too."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from specdec_core.core.trace import TokenInfo
from specdec_core.engine.tree.views import CompactionView, KVSlot
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.step.tree_tables import compaction_tables

TOKENS = ["-", "\u200d", "* ", "1.", "#", "+", "\u00ad"]
SHOWN = ["-", "⟨U+200D⟩", "*␣", "1.", "#", "+", "⟨U+00AD⟩"]


def rendered(cell: str) -> str:
    """What a markdown cell shows: the HTML markdown-it makes of it."""
    return MarkdownIt("commonmark").render(cell).strip()


def test_invisible_characters_get_a_visible_name():
    assert [visible_token(t) for t in TOKENS] == SHOWN
    assert visible_token("\u200dx\u200b") == "⟨U+200D⟩x⟨U+200B⟩"
    assert visible_token(" a\n") == "␣a↵"  # whitespace keeps its own signs


@pytest.mark.filterwarnings("ignore")
def test_tree_kv_cells_render_as_the_token_not_as_markdown():
    slots = tuple(
        KVSlot(i, TokenInfo(100 + i, text, text), i, "accepted", "kept", i)
        for i, text in enumerate(TOKENS)
    )
    before, after = compaction_tables(CompactionView(slots, len(slots), len(slots), False))
    for table in (before, after):
        cells = list(table[table.columns[1]])
        assert [rendered(c) for c in cells] == [f"<p>{s}</p>" for s in SHOWN]
