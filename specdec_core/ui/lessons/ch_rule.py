"""Chapter 2: the exact rule — min(1, p/q), the residual, and which rule keeps p."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules.lab.block import AB_GAMMA, AB_P, AB_Q, block_lab
from specdec_core.rules.lab.exact import RULES, compare_rules, decompose
from specdec_core.rules.lab.rows import PRESETS, normalise
from specdec_core.ui.figures.common import visible_token
from specdec_core.ui.figures.lab import acceptance_stack_figure, rule_finals_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.lab.block import fractions_over_one_denominator
from specdec_core.ui.lab.rules import fig_labels
from specdec_core.ui.lessons import live
from specdec_core.ui.lessons.checkpoint import Check, ask, choice
from specdec_core.ui.token_text import token_in_sentence
from specdec_core.ui.words import STRIP_STATE, say

CHECKS = ("c2_accept", "c2_source", "c2_rule")
PRESET = PRESETS["textbook"]
SOURCES = ("p", "q", "residual", "again")
RULE_CHOICES = ("correct", "correct_one_hot", "all", "correct_resample_p")


def rows() -> tuple[np.ndarray, np.ndarray]:
    """The textbook rows p = [.6, .3, .1], q = [.2, .5, .3] (normalised)."""
    return normalise(PRESET.p, "p"), normalise(PRESET.q, "q")


def _vec(x: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in x) + "]"


def _accept(pair: ModelPair) -> None:
    st.subheader(t("ls_c2_accept_title"))
    state = live.scenario(pair, "sampled_rejection")
    if state is None:
        st.info(t("ls_not_found"))
        return
    session = live.session_at(pair, state, "commit")
    v = session.steps.current_verify
    assert v is not None
    c = next(c for c in v.checks if c.status == "rejected")
    tok = token_in_sentence(c.token)
    st.markdown(t("ls_c2_accept_setup", pos=c.position, tok=tok))
    st.html(live.context_html(session) + live.drafts_html(session))
    why = t("ls_c2_accept_why", p=fmt_prob(c.p), q=fmt_prob(c.q), a=f"{c.accept_prob:.3f}")
    check = Check(
        "c2_accept",
        "number",
        t("ls_c2_accept_q", tok=tok, p=fmt_prob(c.p), q=fmt_prob(c.q)),
        round(c.accept_prob, 4),
        why,
        tol=0.02,
    )
    if ask(check):
        st.dataframe(
            pd.DataFrame(
                {
                    t("ls_col_pos"): [x.position for x in v.checks],
                    t("token"): [visible_token(x.token) for x in v.checks],
                    "p(y)": [fmt_prob(x.p) for x in v.checks],
                    "q(y)": [fmt_prob(x.q) for x in v.checks],
                    "min(1, p/q)": [f"{x.accept_prob:.3f}" for x in v.checks],
                    "u": ["—" if x.u is None else f"{x.u:.3f}" for x in v.checks],
                    t("ls_col_status"): [say(STRIP_STATE, x.status) for x in v.checks],
                }
            ),
            hide_index=True,
        )
        st.markdown(
            t(
                "ls_c2_accept_reveal",
                pos=c.position,
                u=f"{c.u:.3f}",
                a=f"{c.accept_prob:.3f}",
                fix=token_in_sentence(v.next_token),
            )
        )
        live.open_in_step_through(state)


def _source() -> None:
    st.subheader(t("ls_c2_source_title"))
    p, q = rows()
    d = decompose(p, q)
    st.markdown(t("ls_c2_rows", p=_vec(p), q=_vec(q)))
    question, why = t("ls_c2_source_q"), t("ls_c2_source_why")
    check = choice("c2_source", question, "residual", why, SOURCES, "ls_c2_src_")
    if ask(check):
        assert d.residual is not None
        st.markdown(
            t(
                "ls_c2_source_reveal",
                excess=_vec(d.excess),
                r=_vec(d.residual),
                beta=f"{d.beta:.2f}",
                A=f"{d.acceptance:.2f}",
            )
        )
        st.plotly_chart(
            acceptance_stack_figure(
                PRESET.names,
                d.min_pq,
                d.excess,
                d.p,
                {**fig_labels(), "p": t("rl_lab_p_mark")},
                t("ls_c2_proof_title"),
            ),
            key="ls_fig_proof",
        )
        st.markdown(t("ls_c2_proof"))


def _rule() -> None:
    st.subheader(t("ls_c2_rule_title"))
    p, q = rows()
    one_hot = PRESET.one_hot_token
    question, why = t("ls_c2_rule_q", tok=PRESET.names[one_hot]), t("ls_c2_rule_why")
    check = choice("c2_rule", question, "correct_one_hot", why, RULE_CHOICES, "ls_c2_rules_")
    if ask(check):
        results = compare_rules(p, q, one_hot)
        st.dataframe(
            pd.DataFrame(
                {
                    t("rl_col_rule"): [t(f"rl_rule_{r}") for r in RULES],
                    t("ls_col_final"): [_vec(results[r].final) for r in RULES],
                    "TV(·, p)": [f"{results[r].tv_to_p:.2f}" for r in RULES],
                    t("ls_col_lossless"): [
                        t("yes") if results[r].tv_to_p < 1e-9 else t("no") for r in RULES
                    ],
                }
            ),
            hide_index=True,
        )
        finals = {r: results[r].final for r in RULES}
        st.plotly_chart(
            rule_finals_figure(PRESET.names, p, finals, fig_labels(), t("ls_c2_finals_title")),
            key="ls_fig_finals",
        )
        st.caption(t("ls_c2_rule_note"))


def _block() -> None:
    """Block verification (Sun et al. 2025) in one paragraph: what each exact rule
    guarantees, with the paper's {a, b} numbers computed exactly (``rules/lab/block.py``)."""
    st.subheader(t("ls_c2_block_title"))
    lab = block_lab(AB_P, AB_Q, AB_GAMMA)
    three = [lab.expected[k] for k in ("token", "block", "ideal")]
    token, block, ideal = fractions_over_one_denominator(three)
    st.markdown(t("ls_c2_block", token=token, block=block, ideal=ideal))


def render(pair: ModelPair) -> None:
    st.markdown(t("ls_c2_intro"))
    _accept(pair)
    _source()
    _rule()
    _block()
