"""The rule lab's second and third sections: why ``min(p, q)`` plus the residual gives
exactly ``p`` (the decomposition, its figures and metrics), and three rules side by side
(the correct one, resampling from ``p``, a one-hot draft) with their final distributions."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specdec_core.core.inputs import whole_number
from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules.lab.exact import RULES, Decomposition, compare_rules, decompose
from specdec_core.ui.figures.lab import (
    acceptance_stack_figure,
    rule_finals_figure,
    rule_rows_figure,
)
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.token_text import token_in_sentence


def fig_labels() -> dict[str, str]:
    """The rule figures' words (``p``, ``q``, the overlap and excess, each rule's name),
    shared with the Lessons chapter on the rule."""
    return {
        "p": t("rl_lab_p"),
        "q": t("rl_lab_q"),
        "min": t("rl_lab_min"),
        "excess": t("rl_lab_excess"),
        "probability": t("probability"),
        "token": t("token"),
        **{rule: t(f"rl_rule_{rule}") for rule in RULES},
    }


def proof(names: list[str], p: np.ndarray, q: np.ndarray) -> tuple[Decomposition, dict]:
    """Section 2 · the proof. Returns the decomposition and the figures' labels."""
    st.header(t("rl_sec_proof"))
    st.markdown(t("rl_proof_help"))
    d = decompose(p, q)
    labels = fig_labels()
    c1, c2 = st.columns(2)
    c1.plotly_chart(
        LV.figure(rule_rows_figure, names, p, q, labels, t("rl_fig_rows")), key="rl_fig_rows"
    )
    stack_labels = {**labels, "p": t("rl_lab_p_mark")}
    c2.plotly_chart(
        LV.figure(
            acceptance_stack_figure, names, d.min_pq, d.excess, d.p, stack_labels, t("rl_fig_stack")
        ),
        key="rl_fig_stack",
    )
    m = st.columns(5)
    m[0].metric(t("rl_m_A"), fmt_prob(d.acceptance), help=t("rl_m_A_help"))
    m[1].metric(t("rl_m_beta"), fmt_prob(d.beta))
    m[2].metric(t("rl_m_excess"), fmt_prob(d.excess_total), help=t("rl_m_excess_help"))
    m[3].metric(t("rl_m_tv"), fmt_prob(d.tv), help=t("rl_m_tv_help"))
    m[4].metric(t("rl_m_1mtv"), fmt_prob(d.one_minus_tv), help=t("rl_m_1mtv_help"))
    with st.expander(t("rl_proof_table")):
        LV.show_proof_table(names, d)
    return d, labels


def three_rules(names: list[str], p: np.ndarray, q: np.ndarray, labels: dict) -> tuple:
    """Section 3 · three rules. Returns the one-hot rule's token ``y`` and each rule's
    result (``compare_rules``)."""
    S, n_tok = st.session_state, len(names)
    st.header(t("rl_sec_rules"))
    st.markdown(t("rl_rules_help"))
    try:
        whole_number(S.get("rl_y", 0), 0, n_tok - 1, "token")
    except Exception:  # noqa: BLE001 - a crafted value: not a row of this table
        S["rl_y"] = 0
    y = st.columns([1, 2])[0].selectbox(
        t("rl_onehot_token"), list(range(n_tok)), format_func=names.__getitem__, key="rl_y"
    )
    y_name = token_in_sentence(names[y])
    results = compare_rules(p, q, y)
    h1, h2, h3 = st.columns(3)
    h1.markdown(t("rl_rule_correct_help"))
    h2.markdown(t("rl_rule_resample_p_help"))
    h3.markdown(t("rl_rule_one_hot_help", tok=y_name))
    # stacked, not side by side: at 1024 px with the sidebar open a column leaves the chart's
    # bar labels overlapping and the table scrolling sideways
    f1, f2 = st.container(), st.container()
    finals = {rule: res.final for rule, res in results.items()}
    f1.plotly_chart(
        LV.figure(rule_finals_figure, names, p, finals, labels, t("rl_final_title")),
        key="rl_fig_finals",
    )
    with f2:
        LV.table(
            "rl_rule_summary",
            {
                "rule": ([t(f"rl_rule_{r}") for r in RULES], t("rl_col_rule")),
                "acceptance": (
                    [results[r].acceptance for r in RULES],
                    LV.number(t("rl_col_acceptance")),
                ),
                "tv": ([results[r].tv_to_p for r in RULES], LV.number(t("rl_col_tv"))),
            },
        )
    st.markdown(f"**{t('rl_final_table_title')}**")
    LV.table(
        "rl_final_table",
        {
            "token": (names, t("rl_col_name")),
            "p": (p, LV.number(t("rl_lab_p"))),
            **{rule: (final, LV.number(t(f"rl_rule_{rule}"))) for rule, final in finals.items()},
        },
    )
    return y, results
