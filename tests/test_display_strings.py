"""Display text a fresh user reads: counts, escaping and labels in both languages."""

from __future__ import annotations

from specdec_core.ui.i18n import tr
from specdec_core.ui.lessons import CHAPTERS

NUMBER_WORDS = {"en": {6: "six"}, "zh": {6: "六个"}}


def test_welcome_counts_the_lessons_chapters():
    assert len(CHAPTERS) == 6
    for language, words in NUMBER_WORDS.items():
        text = tr("welcome_text", language)
        assert words[len(CHAPTERS)] in text, (language, text)
    assert "five" not in tr("welcome_text", "en")
    assert "五" not in tr("welcome_text", "zh")


def _rendered_code(markdown: str) -> list[str]:
    """The text of each inline code span CommonMark finds in ``markdown``."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parseInline(markdown)[0].children
    return [tok.content for tok in tokens if tok.type == "code_inline"]


def test_code_span_shows_a_special_token_without_backslashes():
    from specdec_core.ui.errors import code_span

    assert code_span("<|endoftext|>") == "`<|endoftext|>`"
    message = tr("tree_outcome_stopped", "en").format(
        reason="eos", n=2, kind="bonus token", tok=code_span("<|endoftext|>")
    )
    assert "\\" not in message
    assert _rendered_code(message) == ["<|endoftext|>"]
    for text in ("a`b", "`x", "x``", " lead", "back\\slash", "$1_a*"):
        assert _rendered_code(f"see {code_span(text)} here") == [text], text
