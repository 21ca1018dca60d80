"""Display text a fresh user reads: counts, escaping and labels in both languages."""

from __future__ import annotations

import pytest

from specdec_core.ui.i18n import plural, tr
from specdec_core.ui.lessons import CHAPTERS

NUMBER_WORDS = {"en": {7: "seven"}, "zh": {7: "七个"}}


def test_welcome_counts_the_lessons_chapters():
    assert len(CHAPTERS) == 7
    for language, words in NUMBER_WORDS.items():
        text = tr("welcome_text", language)
        assert words[len(CHAPTERS)] in text, (language, text)
    assert "six" not in tr("welcome_text", "en")
    assert "六" not in tr("welcome_text", "zh")


def _rendered_code(markdown: str) -> list[str]:
    """The text of each inline code span CommonMark finds in ``markdown``."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parseInline(markdown)[0].children
    return [tok.content for tok in tokens if tok.type == "code_inline"]


def test_code_span_shows_a_special_token_without_backslashes():
    from specdec_core.ui.errors import code_span

    assert code_span("<|endoftext|>") == "`<|endoftext|>`"
    fields = {"reason": "eos", "n": 2, "kind": "bonus token", "tok": code_span("<|endoftext|>")}
    message = plural(tr("tree_outcome_stopped", "en"), fields).format(**fields)
    assert "\\" not in message
    assert _rendered_code(message) == ["<|endoftext|>"]
    for text in ("a`b", "`x", "x``", " lead", "back\\slash", "$1_a*"):
        assert _rendered_code(f"see {code_span(text)} here") == [text], text


def _link(fields: dict) -> dict[str, str]:
    """Query parameters of a version-2 link whose state holds ``fields`` as given."""
    import base64
    import json
    import zlib

    raw = json.dumps(fields, separators=(",", ":")).encode("utf-8")
    packed = base64.urlsafe_b64encode(zlib.compress(raw, 9)).rstrip(b"=").decode("ascii")
    return {"v": "2", "lang": "en", "s": packed}


def test_a_dropped_link_field_is_named_by_its_label_in_both_languages():
    from specdec_core.lessons.link import decode
    from specdec_core.ui.problems import message

    state, problems = decode(_link({"repetition_penalty": 99.0, "zz_made_up": 1}), ["embedded"])
    assert state.repetition_penalty == 1.0
    en, zh = message(problems, "en"), message(problems, "zh")
    assert "the value of “repetition penalty θ”" in en
    assert "“重复惩罚 θ” 的值" in zh
    assert "repetition_penalty" not in en + zh
    assert "“zz_made_up”" in en and "“zz_made_up”" in zh  # unknown: the raw (sanitized) name


def test_every_field_a_link_or_the_sidebar_can_drop_has_a_label():
    from dataclasses import fields

    from specdec_core.lessons.link import LessonState
    from specdec_core.ui.i18n import strings

    for f in fields(LessonState):
        entry = strings()[f"link_field_{f.name}"]
        assert entry["en"] and entry["zh"], f.name
        assert "_" not in entry["en"] and "_" not in entry["zh"], f.name


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_grammar_compile_error_marks_the_parsers_own_words(embedded_pair, language, monkeypatch):
    import streamlit as st

    from specdec_core.core.errors import ConfigError
    from specdec_core.core.grammar import GrammarSpec, compile_grammar
    from specdec_core.ui.errors import error_message

    monkeypatch.setitem(st.session_state, "lang", language)
    with pytest.raises(ConfigError) as bad:
        compile_grammar(embedded_pair.tokenizer, 4096, GrammarSpec("regex", "a("))
    with pytest.raises(ConfigError) as empty:
        compile_grammar(embedded_pair.tokenizer, 4096, GrammarSpec("regex", "   "))
    reason = bad.value.params["reason"]
    shown = error_message(bad.value).replace("\\", "")
    lead = {"en": "the parser's own message", "zh": "解析器的英文原始报错"}[language]
    assert lead in shown and reason.replace("\\", "") in shown
    assert shown.index(lead) < shown.index(reason.replace("\\", ""))
    said = error_message(empty.value)
    assert {"en": "the grammar is empty", "zh": "该语法为空"}[language] in said
    assert "empty" not in said.replace("the grammar is empty", "")


def test_numerics_flips_cell_and_summary_hold_when_nothing_differs():
    from specdec_core.ui.lossless.numerics import flips_cell

    assert flips_cell([]) == "0"
    assert flips_cell(["bf16"]) == "1 (bf16)"
    assert flips_cell(["f16", "bf16"]) == "2 (f16, bf16)"
    en, zh = tr("ll_numerics_levels", "en"), tr("ll_numerics_levels", "zh")
    assert "from exactly 0 up to about 1e-2 in bfloat16, depending on the prompt" in en
    assert "bfloat16 下从恰好为 0 到约 1e-2" in zh and "随提示词不同" in zh


def test_lossless_formula_and_chapter_6_grammar_render_cleanly():
    from specdec_core.core.grammar import GRAMMAR_PRESETS
    from specdec_core.ui.lessons.ch_state import STALE_GRAMMAR, grammar_shown

    for key in ("ll_rules_help", "ll_trade_help"):
        for language in ("en", "zh"):
            text = tr(key, language)
            assert "Σ_" not in text and "(1 − q(S))" in text, (key, language)
    shown = grammar_shown(GRAMMAR_PRESETS[STALE_GRAMMAR][1])
    assert shown == "␣(yes|no|perhaps)[.!]"
    for language in ("en", "zh"):
        text = tr("ls_c6_stale_setup", language).format(grammar=shown, drafts="x", k=2)
        assert "  " not in text and _rendered_code(text)[0] == shown


def test_no_bare_url_runs_into_the_text_after_it():
    """Markdown autolinks a bare ``http://…`` up to the next space, so a URL followed by
    full-width punctuation (``），``) swallows it into the link: every URL in a string is
    a code span or ends at a space or ASCII punctuation."""
    import json
    import re
    from pathlib import Path

    bare = re.compile(r"(?<!`)https?://[^\s`]*[^\x00-\x7f]")
    found = [
        (path.name, key, lang)
        for path in sorted(Path("assets/strings").glob("*.json"))
        for key, row in json.loads(path.read_text(encoding="utf-8")).items()
        if isinstance(row, dict)
        for lang, text in row.items()
        if isinstance(text, str) and bare.search(text)
    ]
    assert found == []
