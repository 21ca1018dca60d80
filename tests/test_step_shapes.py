"""ui/step/shapes.py: the step panel's one table of the two verification shapes -- a row
for every mode, the keys the pages and tests reach the panel by, every string a row names
in English and Chinese, and the tree figure's words."""

from __future__ import annotations

from typing import get_args

from specdec_core.ui.i18n import strings
from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import tree_view
from specdec_core.ui.step.shapes import SHAPES
from specdec_core.ui.step.tools import TAB_LABEL
from specdec_core.ui.words import Mode


def test_one_row_per_mode_each_naming_its_own_mode():
    assert set(SHAPES) == set(get_args(Mode))
    assert all(row.mode == mode for mode, row in SHAPES.items())


def test_the_keys_follow_one_prefix_rule():
    #                 mode      button keys  lesson key (session state)
    expected = {"chain": ("", "lesson"), "tree": ("tree_", "tree_lesson")}
    assert {m: (row.keys, L.key(m)) for m, row in SHAPES.items()} == expected


def test_the_chain_has_the_edit_box_run_n_and_no_tree():
    chain, tree = SHAPES["chain"], SHAPES["tree"]
    assert (chain.tree(), chain.run_n, chain.edits, chain.note) == ((), True, True, None)
    assert (tree.run_n, tree.edits) == (False, False)
    assert chain.tabs == ("scenarios", "link", "files")
    assert tree.tabs == ("link", "export")  # scenarios and opening a trace: the chain's


def test_every_string_a_row_names_is_in_both_languages():
    S = strings()
    for row in SHAPES.values():
        keys = [row.reset_help, row.title, *(TAB_LABEL[tab] for tab in row.tabs)]
        keys += [row.note] if row.note else []
        for key in keys:
            assert S[key]["en"].strip() and S[key]["zh"].strip(), key


def test_every_word_of_the_tree_figure_is_in_both_languages():
    S = strings()
    words = tree_view.FIGURE_WORDS.split()
    assert len(words) == 9 and "next_bonus" in words
    for word in words:
        key = f"tree_{word}"
        assert S[key]["en"].strip() and S[key]["zh"].strip(), key
