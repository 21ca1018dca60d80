"""Chapter 7: where drafts come from — the five routes of the lesson's table (a small
draft model, n-gram / prompt lookup, the EAGLE family, MTP heads, block drafting) plus
early exit, what each costs per round (draft forwards, extra target forwards), and a
predict-then-reveal question answered by really running every source the loaded pair can
run (:func:`specdec_core.drafters.drafters_for`) on the repetitive prompt.

The live run is :func:`specdec_core.bench.source_compare.compare_sources` (greedy, γ = 4,
:data:`TOKENS` tokens, one pass: a few rounds per source, seconds), found once per process
and per set of sources; the question's answer is its winner, computed, never written
down (on a tie, the source with fewer draft forwards per round)."""

from __future__ import annotations

import threading

import pandas as pd
import streamlit as st

from specdec_core.bench.source_compare import compare_sources
from specdec_core.bench.source_results import SourceComparison, source_prompts
from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.drafters.registry import drafters_for
from specdec_core.ui import drafts_budget
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons.checkpoint import Check, ask, choice
from specdec_core.ui.render import html_table
from specdec_core.ui.speed.sources import source_label

CHECKS = ("c7_block", "c7_winner")
ROUTES = ("model", "ngram", "eagle", "mtp", "block", "early-exit")  # the lesson's table + 1
ROUTE_COLS = ("how", "draft_fw", "target_fw", "tree")
PROMPT = "repetitive"
GAMMA, TOKENS = 4, 16
_lock = threading.Lock()
_runs: dict[tuple, SourceComparison] = {}  # (pair name, id, sources) → the run: read only


def live_run(pair: ModelPair) -> SourceComparison:
    """Every source of ``pair`` on the repetitive prompt, greedy, γ = :data:`GAMMA`,
    :data:`TOKENS` tokens, one timed pass (found once per process and set of sources)."""
    names = drafters_for(pair)
    key = (pair.name, id(pair), names)
    with _lock:
        if key not in _runs:
            _runs[key] = compare_sources(
                pair,
                SessionConfig(gamma=GAMMA, max_new_tokens=TOKENS),
                names,
                prompts={PROMPT: source_prompts(pair.name)[PROMPT]},
                temperatures=(0.0,),
                repeats=1,
            )
        return _runs[key]


def winner(run: SourceComparison) -> str:
    """The source that committed the most tokens per round; on a tie the one with fewer
    draft forwards per round (cheaper), then the first in source order."""
    rows = run.rows_for(PROMPT, 0.0)
    return max(rows, key=lambda r: (r.tokens_per_round, -r.draft_forwards_per_round)).name


def _routes(pair: ModelPair) -> None:
    here = set(drafters_for(pair))
    columns = {
        t("ls_c7_col_route"): [t("ls_c7_route_" + r) for r in ROUTES],
        **{t("ls_c7_col_" + c): [t(f"ls_c7_{c}_{r}") for r in ROUTES] for c in ROUTE_COLS},
        t("ls_c7_col_here"): [
            t("ls_c7_here_yes", name=source_label(r)) if r in here else t("ls_c7_here_no")
            for r in ROUTES
        ],
    }
    st.html(html_table(columns, name="ls-routes"))  # text cells wrap: fits 1024 px


def _block(pair: ModelPair) -> None:
    st.subheader(t("ls_c7_block_title"))
    question, why = t("ls_c7_block_q", gamma=GAMMA), t("ls_c7_block_why", gamma=GAMMA)
    if ask(choice("c7_block", question, "1", why, ("0", "1", "4", "5"), "ls_c7_fw_")):
        st.markdown(t("ls_c7_routes_reveal"))
        _routes(pair)


def _winner(pair: ModelPair) -> None:
    st.subheader(t("ls_c7_winner_title"))
    st.code(source_prompts(pair.name)[PROMPT], language=None)
    with st.spinner(t("ls_c7_running")):
        run = live_run(pair)
    best = winner(run)
    check = Check(
        "c7_winner",
        "choice",
        t("ls_c7_winner_q", gamma=GAMMA, tokens=TOKENS),
        best,
        t("ls_c7_winner_why"),
        options=run.sources,
        label=lambda name: source_label(str(name)),
    )
    if not ask(check):
        return
    rows = run.rows_for(PROMPT, 0.0)
    won = next(r for r in rows if r.name == best)
    st.markdown(
        t(
            "ls_c7_winner_reveal",
            name=source_label(best),
            tpr=f"{won.tokens_per_round:.2f}",
            rounds=won.rounds,
            tokens=TOKENS,
            fw=f"{won.draft_forwards_per_round:.2f}",
        )
    )
    lookup = drafts_budget.lookup_sentence(rows, TOKENS)  # its place here, and why
    if lookup:
        st.markdown(lookup)
    st.dataframe(
        pd.DataFrame(
            {
                t("src_col_source"): [source_label(r.name) for r in rows],
                t("src_col_tokens"): [f"{r.tokens_per_round:.2f}" for r in rows],
                t("src_col_accepted"): [f"{r.accepted_per_round:.2f}" for r in rows],
                t("src_col_draft_fwd"): [f"{r.draft_forwards_per_round:.2f}" for r in rows],
                t("src_col_heads"): [
                    "—"
                    if r.head_evaluations_per_round is None
                    else f"{r.head_evaluations_per_round:.2f}"
                    for r in rows
                ],
                t("src_col_alpha"): [f"{r.acceptance_rate:.2f}" for r in rows],
                t("src_col_ms"): [f"{r.ms_per_token.median:.1f}" for r in rows],
            }
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption(t("ls_c7_winner_note"))


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c7_intro"))
    _block(pair)
    _winner(pair)
