"""Chapter 3: the caches after a commit — committed length, target KV, draft KV."""

from __future__ import annotations

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.trace import KVState
from specdec_core.ui.errors import code_span
from specdec_core.ui.i18n import t
from specdec_core.ui.lessons import live
from specdec_core.ui.lessons.checkpoint import Check, answers, ask
from specdec_core.ui.pair_text import default_prompt
from specdec_core.ui.render import kv_table

CHECKS = ("c3_committed", "c3_target", "c3_draft")
SCENARIO = "first_error_3"


def kv_after_commit(pair: ModelPair) -> tuple[KVState, KVState, int, int] | None:
    """(KV state before the round, after its commit, accepted drafts, prompt length) of
    the scenario, straight from the engine, replayed from the state its "open this moment"
    link carries (the step page shows the same prompt and lengths); ``None`` if the pair
    has no such scenario."""
    state = live.scenario(pair, SCENARIO)
    if state is None:
        return None
    session = live.session_at(pair, live.as_linked(pair, state), "committed")
    last = session.history[-1]
    return last.propose.kv_before, last.commit.kv_after, last.record.accepted, session.prompt_len


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c3_intro"))
    state = live.scenario(pair, SCENARIO)
    found = kv_after_commit(pair)
    if state is None or found is None:
        st.info(t("ls_not_found"))
        return
    before, after, accepted, prompt_len = found
    verified = live.session_at(pair, live.as_linked(pair, state), "commit")
    st.markdown(
        t(
            "ls_c3_setup",
            text=code_span(state.prompt),
            prompt=prompt_len,
            committed=before.committed_len,
            target=before.target_kv_len,
            draft=before.draft_kv_len,
        )
    )
    default = default_prompt(pair.name)
    if default != state.prompt:  # the step page opens on another prompt: its count too
        n = len(pair.tokenizer.encode(default))
        st.caption(t("ls_c3_default_prompt", text=code_span(default), n=n))
    st.html(live.verified_html(verified))
    st.markdown(t("ls_c3_round", accepted=accepted))
    questions = (
        (
            "c3_committed",
            after.committed_len,
            t(
                "ls_c3_why_committed",
                before=before.committed_len,
                accepted=accepted,
                n=after.committed_len,
            ),
        ),
        (
            "c3_target",
            after.target_kv_len,
            t("ls_c3_why_target", committed=after.committed_len, n=after.target_kv_len),
        ),
        (
            "c3_draft",
            after.draft_kv_len,
            t("ls_c3_why_draft", committed=after.committed_len, n=after.draft_kv_len),
        ),
    )
    for cid, value, why in questions:
        ask(Check(cid, "number", t("ls_q_" + cid), value, why, tol=0))
    if all(c in answers() for c in CHECKS):
        st.markdown(
            t(
                "ls_c3_reveal",
                committed=after.committed_len,
                target=after.target_kv_len,
                draft=after.draft_kv_len,
            )
        )
        st.dataframe(kv_table(after, keep=4), hide_index=True)
        st.caption(t("ls_c3_note"))
        live.open_in_step_through(state)
