"""ui/words.py: every engine word has its translation key, in English and Chinese, and
the page's word tables cover exactly the values of their ``Literal`` (a word added to
``core/words.py`` without a string fails here, not on a student's screen)."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from specdec_core.core import words as W
from specdec_core.ui import words as UW
from specdec_core.ui.i18n import strings

TABLES = {  # table name → the values it must cover
    "STOP_REASON": get_args(W.StopReason),
    "ROUND_KIND": tuple(itertools.product(get_args(UW.Mode), get_args(W.RoundKind))),
    "CHECK_STATUS": get_args(W.CheckStatus),
    "BLOCK_STATUS": get_args(W.CheckStatus),
    "STRIP_STATE": get_args(W.StripState),
    "KV_ROW_STATE": get_args(UW.KvRowState),
    "DRAFTERS_STRIP": ("accepted", "rejected", "discarded", "correction", "bonus", "committed"),
    "NODE_STATE": get_args(W.NodeViewState),
    "FIGURE_STATE": get_args(UW.FigureState),
    "SLOT_STATE": get_args(UW.SlotState),
    "PHASE": tuple(itertools.product(get_args(UW.Mode), get_args(W.Phase))),
    "NO_DRAFTS_PHASE": tuple(itertools.product(("verify", "commit"), get_args(UW.NoDraftsReason))),
    "NEXT_NO_DRAFTS": get_args(UW.NoDraftsReason),
    "STEP_BUTTON": tuple(itertools.product(get_args(UW.Mode), get_args(UW.Step))),
    "MODE": get_args(UW.Mode),
    "TREE_REFUSAL": get_args(UW.TreeRefusal),
}


def test_every_table_of_ui_words_is_checked_here():
    tables = {n for n, v in vars(UW).items() if n.isupper() and isinstance(v, dict)}
    assert tables == set(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_covers_exactly_its_words(name):
    assert set(getattr(UW, name)) == set(TABLES[name])


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_word_has_its_string_in_english_and_chinese(name):
    S = strings()
    for word, key in getattr(UW, name).items():
        assert key in S, (name, word, key)
        assert S[key].get("en", "").strip(), (name, word, key, "en")
        assert S[key].get("zh", "").strip(), (name, word, key, "zh")


def test_the_strip_states_are_the_render_styles_and_the_figure_states_the_tree_styles():
    from specdec_core.ui.figures.tree import STATE_STYLE
    from specdec_core.ui.render import STYLES

    assert set(get_args(W.StripState)) <= set(STYLES)
    assert set(UW.FIGURE_STATE) == set(STATE_STYLE)


def test_the_tree_refusals_are_the_engines():
    from specdec_core.engine.tree.generate import tree_refusal

    got = {tree_refusal("ngram", "probabilistic", 1.0), tree_refusal("model", "greedy", 1.0)}
    got.add(tree_refusal("block", "probabilistic", 0.0))
    got.add(tree_refusal("recurrent", "probabilistic", 0.0))
    assert got == set(UW.TREE_REFUSAL)
    assert tree_refusal("model", "greedy", 0.0) is None


def test_say_translates_and_refuses_a_made_up_word(monkeypatch):
    import streamlit as st

    monkeypatch.setattr(st, "session_state", {"lang": "zh"})
    assert UW.say(UW.STOP_REASON, "eos") == strings()["stop_eos"]["zh"]
    with pytest.raises(KeyError):
        UW.say(UW.STOP_REASON, "eos_typo")  # type: ignore[arg-type]
