"""Chapter 6: state beyond the KV cache — after a rejection the grammar matcher and the
penalty counts roll back with both caches; a penalty broadcast over a round is not
lossless; a matcher left un-rolled-back drifts from the committed text; a recurrent state
is restored from a checkpoint (``ch_state_recurrent.py``). Every number comes
from the engine on the loaded pair (``lessons/wrong_grammar.py``) or the exact enumeration
(``rules/lab/penalty.py``)."""

from __future__ import annotations

import math
import threading

import streamlit as st

from specdec_core.core.grammar import GRAMMAR_PRESETS
from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_prob
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.lessons.wrong_grammar import (
    NoRollback,
    RollbackMoment,
    grammar_no_rollback,
    rollback_moment,
)
from specdec_core.rules.lab.penalty import HAND_CASE, compare_penalty_rules
from specdec_core.ui.i18n import t
from specdec_core.ui.lab.processors import show_no_rollback, token, tv_text
from specdec_core.ui.lessons import ch_state_recurrent
from specdec_core.ui.lessons.checkpoint import Check, ask, choice
from specdec_core.ui.render import html_table

CHECKS = ("c6_rollback", "c6_matcher", "c6_broadcast", "c6_stale", *ch_state_recurrent.CHECKS)
GRAMMAR = "speaker_line"
STALE_GRAMMAR = "short_answer"
_lock = threading.Lock()
_found: dict[tuple, object] = {}  # (pair name, id, what) → result: the lesson only reads it


def _cached(pair: ModelPair, what: str, make):
    key = (pair.name, id(pair), what)
    with _lock:
        if key not in _found:
            _found[key] = make()
        return _found[key]


def moment(pair: ModelPair) -> RollbackMoment | None:
    """The first round with a rejection of a greedy session under the speaker-line grammar
    and a presence penalty (found once per process)."""
    return _cached(pair, "moment", lambda: rollback_moment(pair, GRAMMAR))


def stale(pair: ModelPair) -> NoRollback | None:
    """The short-answer grammar's rejected round and its un-rolled-back matcher."""
    return _cached(pair, "stale", lambda: grammar_no_rollback(pair, STALE_GRAMMAR))


def state_table(m: RollbackMoment) -> str:
    """Both caches, the grammar matcher and the penalty counts (rows) at the three moments
    (columns: three short headers, so the table fits 1024 px with the sidebar open)."""
    states = (m.before, m.verified, m.committed)
    grammar = [s.processors.grammar for s in states]
    penalty = [s.processors.penalty for s in states]
    rows = (
        ("ls_c6_col_committed", [s.committed_len for s in states]),
        ("ls_c6_col_target", [s.target_kv_len for s in states]),
        ("ls_c6_col_draft", [s.draft_kv_len for s in states]),
        ("ls_c6_col_grammar", [g.accepted_tokens if g else 0 for g in grammar]),
        ("ls_c6_col_allowed", [g.allowed_next if g else 0 for g in grammar]),
        ("ls_c6_col_penalty", [p.distinct if p else 0 for p in penalty]),
    )
    columns: dict[str, list] = {t("ls_c6_col_moment"): [t(key) for key, _ in rows]}
    for i, moment in enumerate(("ls_c6_before", "ls_c6_verified", "ls_c6_committed")):
        columns[t(moment)] = [values[i] for _, values in rows]
    return html_table(columns, name="ls-state-table")


def grammar_shown(source: str) -> str:
    """A grammar source for a code span: a space at either end written ``␣`` (the page's
    mark for a space; a bare leading space read as a stray double space before it)."""
    core = source.strip(" ")
    lead, trail = len(source) - len(source.lstrip(" ")), len(source) - len(source.rstrip(" "))
    return "␣" * lead + core + "␣" * trail


def render(pair: ModelPair) -> None:
    _processors(pair)
    ch_state_recurrent.render(pair)  # a recurrent state: checkpoints, restored or not


def _processors(pair: ModelPair) -> None:
    st.markdown(t("ls_c6_intro"))
    with st.spinner(t("ls_c6_finding")):
        m = moment(pair)
    if m is None or m.before.processors is None:
        st.info(t("ls_not_found"))
        return
    prompt_len = m.before.committed_len - m.before.processors.grammar.accepted_tokens
    st.markdown(
        t(
            "ls_c6_setup",
            grammar=grammar_shown(GRAMMAR_PRESETS[GRAMMAR][1]),
            r=m.round_index + 1,
            gamma=m.gamma,
            accepted=m.accepted,
            k=m.accepted + 1,
            committed=m.before.committed_len,
        )
    )
    # 1 · which state rolls back
    st.subheader(t("ls_c6_rollback_title"))
    opts = ("kv", "kv_grammar", "all", "none")
    why = t("ls_c6_rollback_why")
    if ask(
        choice(
            "c6_rollback",
            t("ls_c6_rollback_q", k=m.accepted + 1),
            "all",
            why,
            opts,
            "ls_c6_rollback_",
        )
    ):
        st.html(state_table(m))
        st.caption(t("ls_c6_table_note"))
    # 2 · the matcher's count after the commit
    generated = m.committed.committed_len - prompt_len
    before = m.before.processors.grammar.accepted_tokens
    q = t("ls_c6_matcher_q", before=before, accepted=m.accepted)
    why = t(
        "ls_c6_matcher_why",
        before=before,
        accepted=m.accepted,
        n=generated,
        verified=m.verified.processors.grammar.accepted_tokens,
    )
    ask(Check("c6_matcher", "number", q, generated, why))
    # 3 · the broadcast penalty
    st.subheader(t("ls_c6_broadcast_title"))
    opts = ("yes", "no_later", "no_first", "greedy_only")
    if ask(
        choice(
            "c6_broadcast",
            t("ls_c6_broadcast_q"),
            "no_later",
            t("ls_c6_broadcast_why"),
            opts,
            "ls_c6_broadcast_",
        )
    ):
        cmp = compare_penalty_rules(HAND_CASE, PenaltyConfig(presence_penalty=math.log(2)), 2, 2)
        st.markdown(
            t(
                "ls_c6_broadcast_reveal",
                ok=tv_text(cmp.tv["per_prefix"]),
                bad=fmt_prob(cmp.tv["broadcast"]),
                ignored=fmt_prob(cmp.tv["ignored"]),
            )
        )
    # 4 · the matcher that was not rolled back
    st.subheader(t("ls_c6_stale_title"))
    with st.spinner(t("ls_c6_finding")):
        res = stale(pair)
    if res is None or res.first_diff is None:
        st.info(t("ls_not_found"))
        return
    drafts = " · ".join(token(pair, i) for i in res.drafts)
    grammar = grammar_shown(GRAMMAR_PRESETS[STALE_GRAMMAR][1])
    st.markdown(t("ls_c6_stale_setup", grammar=grammar, drafts=drafts, k=res.accepted + 1))
    question = t("ls_c6_stale_q", j=res.first_diff)
    why = t(
        "ls_c6_stale_why_term" if res.stale_terminated else "ls_c6_stale_why",
        n=res.stale_allowed,
        ok=res.correct_allowed,
    )
    if ask(Check("c6_stale", "number", question, res.stale_allowed, why)):
        show_no_rollback(pair, res, "ls_c6_masks")
