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
