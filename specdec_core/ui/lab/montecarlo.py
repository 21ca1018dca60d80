"""The acceptance lab's sections 4 and 5: Monte Carlo draws of the three rules against the
exact p, then the accepted draws alone (accepted ≠ output). Widgets and rendering only:
the draws come from ``specdec_core.rules.lab`` through ``view.monte_carlo_bounded``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules.lab.exact import RULES
from specdec_core.rules.lab.montecarlo import DEFAULT_N, MAX_N
from specdec_core.ui.figures.common import COLORS
from specdec_core.ui.figures.lab import RULE_COLORS, empirical_figure
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV

S = st.session_state


def show_monte_carlo(
    p: Sequence[float],
    q: Sequence[float],
    y: int,
    seed: int,
    names: list[str],
    results: Mapping[str, Any],
    fig_labels: Mapping[str, str],
) -> dict[str, Any]:
    """Section 4: N draws of each rule (kept in the session until an input changes; lowered
    past the tab's budget, with a message), their table and chart. Returns the runs."""
    st.header(t("rl_sec_mc"))
    st.markdown(t("rl_mc_help", seed=seed))
    n_draws = int(
        st.columns([1, 2])[0].number_input(
            t("rl_mc_n"), 1000, MAX_N, DEFAULT_N, 1000, key="rl_mc_n"
        )
    )
    n_asked = n_draws
    mc_key = (tuple(p), tuple(q), y, n_draws, seed)
    if S.get("rl_mc_key") != mc_key:
        bar = st.progress(0.0)

        def _tick(done: float) -> None:  # done: the fraction of all rules' draws
            rule = RULES[min(int(done * len(RULES)), len(RULES) - 1)]
            bar.progress(min(done, 1.0), text=t("rl_mc_running", rule=t(f"rl_rule_{rule}")))

        # bounded per tab (ui/lab/view.py mc_allowed): past the budget N is lowered, with a message
        mc, used = LV.monte_carlo_bounded(p, q, y, n_draws, seed, progress=_tick)
        bar.empty()
        S.pop("rl_mc_capped", None)
        if mc["correct"].n != n_asked:
            S["rl_mc_capped"] = t(
                "rl_mc_capped",
                limit=f"{LV.MC_BUDGET_DRAWS:,}",
                used=f"{used:,}",
                n=f"{n_asked:,}",
                shown=f"{mc['correct'].n:,}",
            )
        S["rl_mc"], S["rl_mc_key"] = mc, mc_key
    mc = S["rl_mc"]
    n_draws = mc["correct"].n
    if "rl_mc_capped" in S:
        st.warning(S["rl_mc_capped"])

    LV.show_mc_table(mc, results)
    if results["resample_p"].tv_to_p < 1e-12:
        st.caption(t("rl_mc_same"))
    exact = [(t("rl_lab_p"), p, COLORS["p"])]
    empirical = [
        (t(f"rl_rule_{rule}"), mc[rule].freq, mc[rule].stderr, RULE_COLORS[rule]) for rule in RULES
    ]
    st.plotly_chart(
        LV.figure(
            empirical_figure, names, exact, empirical, fig_labels, t("rl_mc_title", n=n_draws)
        ),
        key="rl_fig_mc",
    )
    st.caption(t("rl_mc_errbars"))
    return mc


def show_accepted(
    mc: Mapping[str, Any],
    d: Any,
    p: Sequence[float],
    names: list[str],
    fig_labels: Mapping[str, str],
) -> None:
    """Section 5: the correct rule's accepted draws alone against their exact law and p,
    with the two fit tests and the acceptance rate."""
    st.header(t("rl_sec_accepted"))
    st.markdown(t("rl_accepted_help"))
    run = mc["correct"]
    if d.accepted_only is None or run.accepted_fit is None:
        st.info(t("rl_acc_none"))
        return
    a1, a2 = st.columns([3, 2])
    exact_acc = [
        (t("rl_lab_p"), p, COLORS["p"]),
        (t("rl_acc_exact"), d.accepted_only, COLORS["min"]),
    ]
    emp_acc = [
        (
            t("rl_acc_empirical"),
            run.accepted_freq,
            run.accepted_stderr,
            RULE_COLORS["accepted_only"],
        )
    ]
    title = t("rl_acc_title", n=run.n_accepted, total=run.n)
    a1.plotly_chart(
        LV.figure(empirical_figure, names, exact_acc, emp_acc, fig_labels, title),
        key="rl_fig_accepted",
    )
    a2.metric(
        t("rl_acc_fit"),
        f"{run.accepted_fit.p_value:.3g}",
        delta=LV.verdict(run.accepted_fit, "rl_verdict_ok_acc"),
        delta_color="off",
        delta_arrow="off",
    )
    a2.metric(
        t("rl_acc_fit_p"),
        f"{run.accepted_vs_p.p_value:.3g}",
        delta=LV.verdict(run.accepted_vs_p),
        delta_color="off",
        delta_arrow="off",
    )
    a2.metric(t("rl_col_rate"), fmt_prob(run.acceptance_rate))
