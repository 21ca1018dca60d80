"""Why prompt lookup ranks differently with a different token budget: the sentence that
reads two comparisons of the draft sources (the drafters page's side-by-side run and its
every-source run, or chapter 7's live run) and names the budget as the difference.

Prompt lookup drafts only by copying what followed an earlier occurrence of the last
tokens; its own output is part of the text it searches, so on a repetitive prompt a longer
run gives it more to match. Every number here is an attribute of the results (rank by
tokens per round, as both tables and chapter 7's question do)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from specdec_core.bench.compare import DrafterResult
from specdec_core.bench.source_results import SourceComparison, SourceRow
from specdec_core.ui.i18n import t

LOOKUP = "ngram"


@dataclass(frozen=True)
class Standing:
    """Prompt lookup in one comparison: its rank by tokens per round (1 = most) among
    ``of`` sources, its tokens per round and α, and the run's token budget."""

    rank: int
    of: int
    tokens_per_round: float
    alpha: float
    budget: int


def standing(rows: Sequence[DrafterResult | SourceRow], budget: int) -> Standing | None:
    """Prompt lookup's standing among ``rows`` (``None`` when it did not run). A tie ranks
    every tied source at the better place."""
    mine = next((r for r in rows if r.name == LOOKUP), None)
    if mine is None:
        return None
    better = sum(1 for r in rows if r.tokens_per_round > mine.tokens_per_round)
    return Standing(better + 1, len(rows), mine.tokens_per_round, mine.acceptance_rate, budget)


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def lookup_note(side: tuple | None, every: tuple | None) -> str | None:
    """The drafters page's note, from its two stored results: ``side`` =
    ``(key, [DrafterResult])`` (key: pair, config, prompt, …) and ``every`` =
    ``(key, SourceComparison)``. ``None`` unless both ran prompt lookup on the same prompt
    text at the same temperature with different token budgets."""
    if side is None or every is None:
        return None
    (_, config, prompt, *_), results = side
    comp: SourceComparison = every[1]
    key = next((k for k, text in comp.prompts if _same_text(text, prompt)), None)
    temp = config.temperature
    if key is None or (key, temp) not in comp.settings:
        return None
    a = standing(results, config.max_new_tokens)
    b = standing(comp.rows_for(key, temp), comp.max_new_tokens)
    if a is None or b is None or a.budget == b.budget:
        return None
    return t("dr_budget_note", **_fields(a, "1"), **_fields(b, "2"))


def _fields(s: Standing, n: str) -> dict[str, str]:
    return {
        f"tokens{n}": str(s.budget),
        f"tpr{n}": f"{s.tokens_per_round:.2f}",
        f"alpha{n}": f"{s.alpha:.2f}",
        f"rank{n}": str(s.rank),
        f"of{n}": str(s.of),
    }


def show_lookup_note(prefix: str = "dr") -> None:
    """The note under the every-source comparison, when it applies."""
    S = st.session_state
    note = lookup_note(S.get(f"{prefix}_results"), S.get(f"{prefix}_sources"))
    if note:
        st.info(note)


def lookup_sentence(rows: Sequence[SourceRow], budget: int) -> str | None:
    """Chapter 7's sentence on prompt lookup in its own run (``None`` when it did not
    run): its place, α and tokens per round at this budget, and why a budget matters."""
    s = standing(rows, budget)
    if s is None:
        return None
    return t("ls_c7_lookup_budget", **_fields(s, ""))
