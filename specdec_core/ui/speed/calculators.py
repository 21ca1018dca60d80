"""The speed page's two calculators: ① the per-token cost of speculation from four
timings (draft, verify, overhead per round, tokens advanced) against the target's own
step, and ② the Leviathan et al. (2023) curves -- expected tokens per round and the
wall-time improvement over γ for a given α and cost ratio ``c`` -- with the best γ.
Formulas live in :mod:`specdec_core.rules.costmodel`; this module draws."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specdec_core.rules.costmodel import (
    WALLTIME_CASES,
    best_gamma,
    expected_tokens_per_round,
    improvement_curve,
    per_token_cost_ms,
    speedup_from_cost,
    walltime_improvement,
)
from specdec_core.ui.figures.speed import speed_cost_figure, speed_gamma_curve_figure
from specdec_core.ui.i18n import t

S = st.session_state
TEXTBOOK_COST = {"sp_tstep": 20.0, "sp_dms": 8.0, "sp_vms": 25.0, "sp_oms": 0.0, "sp_adv": 3}


def _textbook() -> None:
    S.update(TEXTBOOK_COST)


def _use_measured() -> None:
    """Copy α and ``c`` from the last measurement, both or neither: ``c`` is a ratio of
    step times, so from a measurement judged too busy neither is taken (α with the old
    ``c`` would draw a curve that no measurement supports) and a note says why."""
    summary = S["sp_measured"].summary
    cm = summary.cost_model
    if summary.timing is not None and summary.timing.busy:
        S["sp_use_refused"] = True
        return
    S["sp_alpha"] = round(min(max(cm.alpha, 0.0), 1.0), 2)
    S["sp_c"] = round(min(max(cm.c, 0.0), 1.0), 2)


def cost_delta(cost: float, target_step: float) -> dict[str, str]:
    """The cost metric's delta against one target step, as ``st.metric`` keywords: the
    size without a sign (the arrow gives the direction: "↓ 9.0 ms", not "↓ -9.0 ms"),
    green when the token costs less than a target step, red when more, grey when equal
    at the shown precision."""
    d = round(cost - target_step, 1)
    color, arrow = ("green", "down") if d < 0 else ("red", "up") if d > 0 else ("gray", "off")
    return {
        "delta": f"{abs(d):.1f} ms",
        "delta_color": color,
        "delta_arrow": arrow,
        "delta_description": t("sp_cost_vs"),
        "help": t("sp_cost_metric_help"),
    }


def cost_section() -> None:
    """① The per-token cost: four timings in, the cost per token and its chart out."""
    st.header(t("sp_cost_header"))
    st.markdown(t("sp_cost_help"))
    st.latex(t("sp_cost_formula"))
    for key, value in TEXTBOOK_COST.items():
        S.setdefault(key, value)
    c1, c2, c3, c4, c5 = st.columns(5)
    target_step = c1.number_input(
        t("sp_target_step"), 0.1, 10000.0, step=1.0, key="sp_tstep", help=t("sp_target_step_help")
    )
    draft_ms = c2.number_input(
        t("sp_draft_ms"), 0.0, 10000.0, step=1.0, key="sp_dms", help=t("sp_draft_ms_help")
    )
    verify_ms = c3.number_input(
        t("sp_verify_ms"), 0.0, 10000.0, step=1.0, key="sp_vms", help=t("sp_verify_ms_help")
    )
    overhead_ms = c4.number_input(
        t("sp_overhead_ms"), 0.0, 10000.0, step=1.0, key="sp_oms", help=t("sp_overhead_ms_help")
    )
    advanced = c5.number_input(
        t("sp_advanced"), 1, 9, step=1, key="sp_adv", help=t("sp_advanced_help")
    )
    st.button(t("sp_cost_reset"), on_click=_textbook, help=t("sp_cost_reset_help"))

    cost = per_token_cost_ms(draft_ms, verify_ms, overhead_ms, advanced)
    ratio = speedup_from_cost(target_step, cost) if cost > 0 else float("inf")
    m1, m2 = st.columns([2, 3])  # the delta and its "vs one target step" whole at 1024 px
    m1.metric(t("sp_cost_metric"), f"{cost:.1f} ms", **cost_delta(cost, target_step))
    if cost < target_step:
        m2.success(t("sp_cost_faster", cost=cost, target=target_step, x=ratio))
    else:
        m2.error(t("sp_cost_slower", cost=cost, target=target_step, x=ratio))
    span = list(range(1, max(5, int(advanced)) + 1))
    costs = [per_token_cost_ms(draft_ms, verify_ms, overhead_ms, k) for k in span]
    cost_labels = {
        "title": t("sp_cost_fig_title"),
        "x": t("sp_cost_fig_x"),
        "y": t("sp_cost_fig_y"),
        "target": t("sp_cost_fig_target"),
        "chosen": t("sp_cost_fig_chosen"),
    }
    st.plotly_chart(
        speed_cost_figure(span, costs, target_step, cost_labels, int(advanced)),
        width="stretch",
        key="sp_cost_fig",
    )


def curve_section() -> None:
    """② The Leviathan curves for α and ``c`` (sliders, or the last measurement's values),
    the best γ, and the paper's worked cases."""
    st.header(t("sp_curve_header"))
    st.markdown(t("sp_curve_help"))
    st.latex(t("sp_tokens_formula"))
    st.markdown(t("sp_curve_help2"))
    st.latex(t("sp_improvement_formula"))
    S.setdefault("sp_alpha", 0.8)
    S.setdefault("sp_c", 0.05)
    a1, a2, a3 = st.columns([2, 2, 1])
    alpha = a1.slider(t("sp_alpha"), 0.0, 1.0, step=0.01, key="sp_alpha", help=t("sp_alpha_help"))
    c_ratio = a2.slider(t("sp_c"), 0.0, 1.0, step=0.01, key="sp_c", help=t("sp_c_help"))
    a3.button(
        t("sp_use_measured"),
        on_click=_use_measured,
        disabled="sp_measured" not in S,
        help=t("sp_use_measured_help"),
    )
    if S.pop("sp_use_refused", False):
        st.warning(t("sp_use_measured_busy", alpha=S["sp_measured"].summary.cost_model.alpha))
    curve = improvement_curve(alpha, c_ratio, range(1, 17))
    best = best_gamma(alpha, c_ratio, 16)
    best_value = walltime_improvement(alpha, best, c_ratio)
    curve_labels = {
        "title": t("sp_curve_fig_title", alpha=alpha, c=c_ratio),
        "x": t("sp_curve_fig_x"),
        "tokens": t("sp_curve_tokens"),
        "improvement": t("sp_curve_improvement"),
        "best": t("sp_curve_best"),
        "breakeven": t("sp_breakeven"),
    }
    st.plotly_chart(
        speed_gamma_curve_figure(curve, best, curve_labels), width="stretch", key="sp_curve_fig"
    )
    b1, b2, b3 = st.columns(3)
    b1.metric(t("sp_best_gamma"), best)
    b2.metric(t("sp_best_improvement"), f"{best_value:.3f}×")
    b3.metric(t("sp_best_tokens"), f"{expected_tokens_per_round(alpha, best):.3f}")
    if best_value < 1.0:
        st.warning(t("sp_never_pays"))
    with st.expander(t("sp_cases_header")):
        st.dataframe(
            pd.DataFrame(
                {
                    t("sp_col_alpha"): [a for a, _, _ in WALLTIME_CASES],
                    t("sp_col_gamma"): [g for _, g, _ in WALLTIME_CASES],
                    t("sp_col_c"): [c for _, _, c in WALLTIME_CASES],
                    t("sp_col_tokens"): [
                        round(expected_tokens_per_round(a, g), 6) for a, g, _ in WALLTIME_CASES
                    ],
                    t("sp_col_improvement"): [
                        round(walltime_improvement(a, g, c), 6) for a, g, c in WALLTIME_CASES
                    ],
                }
            ),
            hide_index=True,
            width="stretch",
        )
