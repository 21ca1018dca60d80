"""The drafters page names the token budget: both comparisons' headings/captions show it,
and when the side-by-side run and the every-source run used different budgets on the same
prompt, a note reads prompt lookup's place, tokens per round and α in each from the two
results (AppTest, embedded pair, en and zh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specdec_core.bench.compare import compare_drafters
from specdec_core.bench.source_compare import compare_sources
from specdec_core.bench.source_results import SOURCE_PROMPTS
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import default_knob, drafters_for

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
STRINGS = {
    k: v
    for f in ("drafters", "sources")
    for k, v in json.loads((REPO / f"assets/strings/{f}.json").read_text("utf-8")).items()
}


def s(key: str, lang: str, **fmt) -> str:
    return STRINGS[key][lang].format(**fmt)


@pytest.fixture(scope="module")
def two_runs(embedded_pair):
    """The side-by-side run with 24 tokens and the every-source run with 8, both greedy on
    the repetitive prompt, one pass each (what the page stores after its buttons)."""
    prompt = SOURCE_PROMPTS["repetitive"]
    names = drafters_for(embedded_pair)
    chosen = [(n, default_knob(embedded_pair, n)) for n in names]
    side_cfg = SessionConfig(gamma=4, max_new_tokens=24)
    side = compare_drafters(embedded_pair, prompt, side_cfg, chosen, 1)
    every = compare_sources(
        embedded_pair,
        SessionConfig(gamma=4, max_new_tokens=8),
        names,
        prompts={"repetitive": prompt},
        temperatures=(0.0,),
        repeats=1,
    )
    return (
        ((embedded_pair.name, side_cfg, prompt, tuple(chosen), 1), side),
        ((embedded_pair.name, every.gamma, names), every),
    )


def place(rows, name: str = "ngram") -> tuple[int, object]:
    mine = next(r for r in rows if r.name == name)
    return 1 + sum(1 for r in rows if r.tokens_per_round > mine.tokens_per_round), mine


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_budget_is_named_with_both_results(two_runs, lang):
    side, every = two_runs
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["lang"] = lang
    at.session_state["dr_results"] = side
    at.session_state["dr_sources"] = every
    at.run()
    at.switch_page("pages/drafters.py").run()
    assert not at.exception, at.exception
    # the budgets, visible: the side-by-side heading and the every-source caption
    assert s("dr_results", lang, tokens=24) in [h.value for h in at.subheader]
    info = s("src_run_info", lang, gamma=4, tokens=8, seed=0)
    assert any(info in c.value for c in at.caption)
    r1, a = place(side[1])
    r2, b = place(every[1].rows_for("repetitive", 0.0))
    note = s(
        "dr_budget_note",
        lang,
        tokens1=24,
        tpr1=f"{a.tokens_per_round:.2f}",
        alpha1=f"{a.acceptance_rate:.2f}",
        rank1=r1,
        of1=len(side[1]),
        tokens2=8,
        tpr2=f"{b.tokens_per_round:.2f}",
        alpha2=f"{b.acceptance_rate:.2f}",
        rank2=r2,
        of2=len(every[1].sources),
    )
    assert note in [i.value for i in at.info]


def test_no_note_with_one_result_or_the_same_budget(two_runs, embedded_pair):
    from specdec_core.ui import drafts_budget

    side, every = two_runs
    assert drafts_budget.lookup_note(side, None) is None
    assert drafts_budget.lookup_note(None, every) is None
    key, results = side
    same = (key[0], SessionConfig(gamma=4, max_new_tokens=8), *key[2:])
    assert drafts_budget.lookup_note((same, results), every) is None  # 8 and 8 tokens
    other = (key[0], key[1], SOURCE_PROMPTS["novel"], *key[3:])
    assert drafts_budget.lookup_note((other, results), every) is None  # another prompt
