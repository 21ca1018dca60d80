"""Chapter 6's recurrent-state section (``ui/lessons/ch_state_recurrent.py``): the draft's
wrong way with the model card's figures (restored vs not restored: both exact, fewer
accepted without the restore) and the hand-made target's wrong way (the outputs differ),
in both languages."""

from __future__ import annotations

import pytest
from conftest import html_tables
from test_page_lessons import LANGS, markdown, open_lessons, s, texts, wrong_then_right

from specdec_core.lessons.wrong_state import shipped_figures


@pytest.mark.parametrize("lang", LANGS)
def test_recurrent_state_section(embedded_pair, lang):
    fig = shipped_figures(embedded_pair)
    assert fig is not None and fig.gamma == 4
    ok, bad = fig.rows["restored"], fig.rows["not_restored"]
    assert ok.exact and bad.exact and ok.acceptance_rate > bad.acceptance_rate
    at = open_lessons(lang, "6")
    assert s("ls_c6_rec_title", lang) in [h.value for h in at.subheader]
    wrong_then_right(at, "c6_rec_draft", "not_exact", "exact_fewer", lang)
    [table] = html_tables(at, "ls-recurrent-table")
    assert list(table[table.columns[0]]) == [
        s(f"ls_c6_rec_row_{name}", lang) for name in ("restored", "not_restored", "draft_model")
    ]
    shown = [float(x) for x in table[table.columns[2]]]
    assert shown == [round(fig.rows[n].mean_accepted, 2) for n in fig.rows] and shown[0] > shown[1]
    assert s("ls_c6_rec_figures_note", lang, n=fig.prompts, tokens=fig.tokens, g=4) in texts(
        at, "caption"
    )
    wrong_then_right(at, "c6_rec_target", "yes", "no", lang)
    [toy] = html_tables(at, "ls-toy-table")
    assert list(toy[toy.columns[1]]) == ["a a b (2)"] * 4 + ["—"] * 2  # the target's own
    assert list(toy[toy.columns[2]])[:3] == ["a a b (0)", "a b (1)", "b (2)"]  # drifts
    reveal = s(
        "ls_c6_rec_toy_reveal",
        lang,
        ok="a a b a a b a a b a a b",
        bad="a a b a b b a a b a b b",
        alone="a a b a a b a a b a a b",
    )
    assert reveal in markdown(at)
