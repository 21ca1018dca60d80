"""The acceptance lab's sections 6 and 7, the same rule beyond one chain position: at
another temperature, and at a tree node with several sibling drafts (residual vs naive).
Widgets and rendering only: every number comes from ``specdec_core.rules.lab``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules.lab.temperature import (
    TEMPERATURE_GRID,
    acceptance_at,
    acceptance_curve,
    temper,
)
from specdec_core.rules.lab.tree_node import MAX_SIBLINGS
from specdec_core.ui.errors import show_error
from specdec_core.ui.figures.lab import (
    acceptance_temperature_figure,
    rule_finals_figure,
    rule_rows_figure,
)
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV

S = st.session_state


def show_temperature(
    p: Sequence[float],
    q: Sequence[float],
    d: Any,
    names: list[str],
    fig_labels: Mapping[str, str],
    source: tuple,
) -> None:
    """Section 6: both rows tempered by the slider's T, and the acceptance over a grid of T."""
    st.header(t("rl_sec_temp"))
    st.markdown(t("rl_temp_help"))
    if source[0] == "step":
        st.caption(t("rl_temp_other"))
    temp = float(st.slider(t("rl_temp"), 0.0, 3.0, 1.0, 0.05, key="rl_temp"))
    p_t, q_t = temper(p, temp), temper(q, temp)
    a_t = acceptance_at(p, q, temp)
    curve = acceptance_curve(p, q)
    k1, k2 = st.columns(2)
    k1.plotly_chart(
        LV.figure(rule_rows_figure, names, p_t, q_t, fig_labels, t("rl_temp_rows", t=temp)),
        key="rl_fig_temp_rows",
    )
    curve_labels = {
        "acceptance": t("rl_lab_acceptance"),
        "temperature": t("rl_lab_temperature"),
        "chosen": t("rl_lab_chosen"),
    }
    k2.plotly_chart(
        LV.figure(
            acceptance_temperature_figure,
            TEMPERATURE_GRID,
            curve,
            (temp, a_t),
            curve_labels,
            t("rl_temp_curve"),
        ),
        key="rl_fig_temp_curve",
    )
    n1, n2 = st.columns(2)
    n1.metric(t("rl_m_A_T", t=temp), fmt_prob(a_t))
    n2.metric(t("rl_m_A_1"), fmt_prob(d.acceptance))


def show_tree_node(
    p: Sequence[float],
    q: Sequence[float],
    d: Any,
    names: list[str],
    fig_labels: Mapping[str, str],
) -> None:
    """Section 7: k sibling drafts at one tree node, the residual rule against the naive one."""
    st.header(t("rl_sec_tree"))
    st.markdown(t("rl_tree_help"))
    k_state = S.get("rl_tree_k")  # None on first load, or a crafted value: not one of the choices
    if type(k_state) is not int or not 1 <= k_state <= MAX_SIBLINGS:
        S["rl_tree_k"] = 2  # two siblings: the smallest tree where the naive rule goes wrong
    k_tree = st.columns([1, 2])[0].selectbox(
        t("rl_tree_k"),
        list(range(1, MAX_SIBLINGS + 1)),
        key="rl_tree_k",
        help=t("rl_tree_k_help"),
    )
    try:
        tree = LV.tree_node(p, q, k_tree)
    except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
        show_error(exc)
        st.stop()
    # the figure colours rules by the lab's palette: residual as "correct", naive as "resample_p"
    tree_labels = {
        **fig_labels,
        "correct": t("rl_tree_rule_residual"),
        "resample_p": t("rl_tree_rule_naive"),
    }
    tree_finals = {"correct": tree["residual"].final, "resample_p": tree["naive"].final}
    g1, g2 = st.columns([3, 2])
    g1.plotly_chart(
        LV.figure(
            rule_finals_figure, names, p, tree_finals, tree_labels, t("rl_tree_fig", k=k_tree)
        ),
        key="rl_fig_tree",
    )
    with g2:
        st.write("")
        st.markdown(t("rl_tree_why", beta=fmt_prob(d.beta)))
    if tree["naive"].tv_to_p < 1e-12:
        st.caption(t("rl_tree_same"))
    LV.show_tree_tables(names, p, tree)
