"""Option labels speak the screen's language only (no "constant · 固定"), a language
switch keeps every choice, and the rule lab's grammar presets show a name, never the key
``short_answer``. AppTest on the embedded pair."""

from __future__ import annotations

import re

import pytest
from conftest import open_app

from specdec_core.ui.i18n import LANG_KEYED, tr

CJK = re.compile(r"[\u4e00-\u9fff]")
# the field's English terms a Chinese label keeps (DESIGN.md: token, argmax, ...)
LATIN_WORD = re.compile(r"\b(?!JSON|EAGLE|MTP|argmax|transformers|schema|one|hot|token)[a-z]{3,}\b")


def shown_options(at) -> dict[str, list[str]]:
    """Widget key → the option labels the browser gets (the widgets registered as
    following the language: the one list a language switch puts back)."""
    out, keyed = {}, at.session_state[LANG_KEYED]
    for kind in ("selectbox", "radio"):
        for w in getattr(at, kind):
            if w.key in keyed:
                out[w.key] = list(w.options)
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sidebar_option_labels_are_in_one_language(embedded_pair, lang):
    at = open_app(lang=lang)
    shown = shown_options(at)
    assert {"cfg_drafter", "cfg_method", "cfg_gamma_schedule", "cfg_grammar"} <= set(shown)
    for key, labels in shown.items():
        for label in labels:
            assert " · " not in label or key == "pair_name", label
            if lang == "en":
                assert not CJK.search(label), label
            elif key != "pair_name":  # model names are the same in every language
                assert not LATIN_WORD.search(label), label
    assert tr("opt_schedule_constant", lang) in shown["cfg_gamma_schedule"]


def test_a_language_switch_keeps_every_choice(embedded_pair):
    at = open_app(lang="en")
    at.selectbox(key="cfg_drafter").set_value("ngram")
    at.selectbox(key="cfg_gamma_schedule").set_value("heuristic")
    at.selectbox(key="cfg_grammar").set_value("short_answer")
    at.radio(key="cfg_method").set_value("greedy").run()
    assert not at.exception
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception
    state = at.session_state
    assert (state["cfg_drafter"], state["cfg_gamma_schedule"]) == ("ngram", "heuristic")
    assert (state["cfg_grammar"], state["cfg_method"]) == ("short_answer", "greedy")
    assert at.selectbox(key="cfg_drafter").value == "ngram"
    assert tr("opt_drafter_ngram", "zh") in at.selectbox(key="cfg_drafter").options


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rule_lab_grammar_presets_show_a_name_not_a_key(embedded_pair, lang):
    at = open_app(lang=lang)
    at.switch_page("pages/acceptance_lab.py").run()
    assert not at.exception
    box = at.selectbox(key="rl_st_gr_preset")
    assert box.value == "short_answer"
    assert tr("opt_grammar_short_answer", lang) in box.options
    assert not any("_" in o for o in box.options), box.options
