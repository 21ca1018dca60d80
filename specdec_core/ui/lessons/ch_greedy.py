"""Chapter 1: guess-and-check with a greedy draft, and what a round costs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.lessons.link import LessonState
from specdec_core.rules.costmodel import per_token_cost_ms, speedup_from_cost
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons import live
from specdec_core.ui.lessons.checkpoint import Check, ask
from specdec_core.ui.token_text import token_in_sentence

CASES = {"first_error_3": "c1_fe3", "first_error_1": "c1_fe1", "all_accepted": "c1_all"}
NAMES = "ABC"  # the cases' titles, in the order shown
TARGET_MS, DRAFT_MS, VERIFY_MS = 20.0, 8.0, 25.0
CHECKS = (*CASES.values(), "c1_cost_1", "c1_cost_3")


def ordered(pair: ModelPair) -> list[tuple[str, str, LessonState | None]]:
    """``(scenario key, checkpoint id, state)`` of the cases in the order they happen in
    their run: each case's "text so far" then holds only rounds asked about above it,
    never the answer of a round still to come (the three are found in one greedy run)."""
    cases = [(key, cid, live.scenario(pair, key)) for key, cid in CASES.items()]
    return sorted(cases, key=lambda c: (c[2] is None, c[2] and (c[2].prompt, c[2].round)))


def _case(pair: ModelPair, name: str, cid: str, state: LessonState | None) -> None:
    st.subheader(t("ls_c1_case", name=name))
    if state is None:
        st.info(t("ls_not_found"))
        return
    before = live.session_at(pair, state, "verify")
    st.markdown(t("ls_c1_context"))
    st.html(live.context_html(before))
    st.markdown(t("ls_c1_drafts"))
    st.html(live.drafts_html(before))
    after = live.session_at(pair, state, "commit")
    v = after.steps.current_verify
    assert v is not None
    rejected = next((c.position for c in v.checks if c.status == "rejected"), 0)
    names = {c.position: visible_token(c.token) for c in v.checks}
    if rejected:
        why = t(
            "ls_c1_why_reject",
            k=rejected,
            draft=token_in_sentence(next(c.token for c in v.checks if c.position == rejected)),
            target=token_in_sentence(v.next_token),
        )
    else:
        why = t("ls_c1_why_all", bonus=token_in_sentence(v.next_token))
    check = Check(
        cid,
        "token",
        t("ls_c1_q_kept"),
        rejected,
        why,
        options=(*names, 0),
        label=lambda k: t("ls_c1_all_kept") if k == 0 else f"{k} · {names[k]}",  # type: ignore[index]
    )
    if ask(check):
        st.html(live.verified_html(after))
        kept = sum(c.status == "accepted" for c in v.checks)
        st.markdown(t("ls_c1_advanced", kept=kept, n=kept + 1))
        live.open_in_step_through(state)


def _cost() -> None:
    st.subheader(t("ls_c1_cost_title"))
    st.markdown(t("ls_c1_cost_intro", target=TARGET_MS, draft=DRAFT_MS, verify=VERIFY_MS))
    for n, cid in ((1, "c1_cost_1"), (3, "c1_cost_3")):
        cost = per_token_cost_ms(DRAFT_MS, VERIFY_MS, 0.0, n)
        why = t("ls_c1_cost_why", draft=DRAFT_MS, verify=VERIFY_MS, n=n, cost=f"{cost:g}")
        check = Check(cid, "number", t("ls_c1_cost_q", n=n), cost, why, tol=0.5, unit=" ms")
        if ask(check):
            verdict = "ls_c1_slower" if cost > TARGET_MS else "ls_c1_faster"
            speedup = speedup_from_cost(TARGET_MS, cost)
            st.markdown(t(verdict, cost=f"{cost:g}", target=TARGET_MS, x=f"{speedup:.2f}"))
    if all(c in st.session_state.get("ls_answers", {}) for c in ("c1_cost_1", "c1_cost_3")):
        rows = [(n, per_token_cost_ms(DRAFT_MS, VERIFY_MS, 0.0, n)) for n in range(1, 6)]
        st.dataframe(
            pd.DataFrame(
                {
                    t("ls_c1_col_n"): [n for n, _ in rows],
                    t("ls_c1_col_cost"): [f"{c:.1f}" for _, c in rows],
                    t("ls_c1_col_speedup"): [
                        f"{speedup_from_cost(TARGET_MS, c):.2f}×" for _, c in rows
                    ],
                }
            ),
            hide_index=True,
        )
        st.caption(t("ls_c1_cost_note"))


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c1_intro"))
    for name, (_, cid, state) in zip(NAMES, ordered(pair), strict=True):
        _case(pair, name, cid, state)
    _cost()
