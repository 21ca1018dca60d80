"""Chapter 6, last section: a recurrent state. The recurrent drafter checkpoints its state
after each token and restores it on rejection; not restoring the *draft's* state keeps the
output exact but lowers acceptance (the figures measured on held-out prompts, from the
model card); not restoring a *target's* state breaks exactness (a hand-made two-token
target, ``lessons/wrong_state.toy_target``)."""

from __future__ import annotations

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_prob
from specdec_core.lessons.wrong_state import ToyRun, shipped_figures, toy_target
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import ask, choice
from specdec_core.ui.render import html_table

CHECKS = ("c6_rec_draft", "c6_rec_target")
ROWS = ("restored", "not_restored", "draft_model")


def figures_table(pair: ModelPair) -> str | None:
    """The model card's greedy runs at γ = 4 as a table (``None``: no card)."""
    fig = shipped_figures(pair)
    if fig is None:
        return None
    rows = [fig.rows[name] for name in ROWS if name in fig.rows]
    yes, no = t("yes"), t("no")
    columns = {
        t("ls_c6_rec_col_drafter"): [t(f"ls_c6_rec_row_{r.drafter}") for r in rows],
        t("ls_c6_rec_col_alpha"): [fmt_prob(r.acceptance_rate) for r in rows],
        t("ls_c6_rec_col_accepted"): [f"{r.mean_accepted:.2f}" for r in rows],
        t("ls_c6_rec_col_exact"): [yes if r.exact else no for r in rows],
    }
    return html_table(columns, name="ls-recurrent-table")


def toy_table(right: ToyRun, wrong: ToyRun) -> str:
    """Round by round, what the hand-made target committed and (in brackets) the state it
    kept after verification, restored vs not (three columns: a phone shows them whole)."""
    n = max(len(right.rounds), len(wrong.rounds))

    def cell(run: ToyRun, i: int) -> str:
        if i >= len(run.rounds):
            return "—"
        r = run.rounds[i]
        return f"{' '.join(r.appended)} ({r.state_kept})"

    columns = {
        t("ls_c6_rec_col_round"): list(range(1, n + 1)),
        t("ls_c6_rec_col_ok"): [cell(right, i) for i in range(n)],
        t("ls_c6_rec_col_bad"): [cell(wrong, i) for i in range(n)],
    }
    return html_table(columns, name="ls-toy-table")


def render(pair: ModelPair) -> None:
    st.subheader(t("ls_c6_rec_title"))
    st.markdown(t("ls_c6_rec_intro"))
    opts = ("exact_fewer", "not_exact", "exact_same", "error")
    if ask(
        choice(
            "c6_rec_draft",
            t("ls_c6_rec_draft_q"),
            "exact_fewer",
            t("ls_c6_rec_draft_why"),
            opts,
            "ls_c6_rec_draft_",
        )
    ):
        table = figures_table(pair)
        if table is None:
            st.info(t("ls_c6_rec_no_card"))
        else:
            fig = shipped_figures(pair)
            assert fig is not None
            st.html(table)
            st.caption(t("ls_c6_rec_figures_note", n=fig.prompts, tokens=fig.tokens, g=fig.gamma))
    right, wrong = toy_target(True), toy_target(False)
    st.markdown(t("ls_c6_rec_toy_setup", alone=" ".join(right.alone)))
    opts = ("yes", "no", "greedy_only")
    if ask(
        choice(
            "c6_rec_target",
            t("ls_c6_rec_target_q"),
            "no",
            t("ls_c6_rec_target_why"),
            opts,
            "ls_c6_rec_target_",
        )
    ):
        st.html(toy_table(right, wrong))
        st.caption(t("ls_c6_rec_toy_note"))
        st.markdown(
            t(
                "ls_c6_rec_toy_reveal",
                ok=" ".join(right.output),
                bad=" ".join(wrong.output),
                alone=" ".join(right.alone),
            )
        )
