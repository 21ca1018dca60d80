"""Acceptance-rule lab: why min(1, p/q) plus the residual gives exactly p.

Widgets and rendering only: every number comes from ``specdec_core.rules.lab`` (which calls
``specdec_core.rules.acceptance`` and ``specdec_core.core.sampling``).
"""

from __future__ import annotations

import streamlit as st

from specdec_core.core.numfmt import fmt_prob
from specdec_core.rules import lab as R
from specdec_core.ui.context import page_context
from specdec_core.ui.errors import plain, show_error
from specdec_core.ui.figures.common import COLORS
from specdec_core.ui.figures.lab import (
    RULE_COLORS,
    acceptance_stack_figure,
    acceptance_temperature_figure,
    empirical_figure,
    rule_finals_figure,
    rule_rows_figure,
)
from specdec_core.ui.guards import SHORT_CHARS, table_state_ok, whole_number
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV

S = st.session_state
_, config = page_context()
LV.pace()  # at most one run of this page a second per tab
seed = int(config.seed)
NUM = LV.NUM


if "rl_base" not in S:
    LV.preset("textbook")

st.title(t("rl_title"))
st.markdown(t("rl_intro"))

# ------------------------------------------------------------------ 1 · rows
st.header(t("rl_sec_rows"))
st.caption(t("rl_presets"))
pcols = st.columns(len(R.PRESETS))
for col, name in zip(pcols, R.PRESETS, strict=True):
    col.button(
        t(f"rl_preset_{name}"),
        key=f"rl_preset_{name}",
        on_click=LV.preset,
        args=(name,),
        help=t(f"rl_preset_help_{name}"),
        width="stretch",
    )

verify = LV.step_verify()
st.caption(t("rl_from_step"))
s1, s2, s3 = st.columns([1, 1, 3], vertical_alignment="bottom")
if verify is None or not verify.checks:
    s1.selectbox(t("rl_step_pos"), [1], key="rl_step_pos_off", disabled=True)
    s2.button(t("rl_step_load"), key="rl_preset_step", disabled=True, width="stretch")
    s3.caption(t("rl_step_none" if verify is None else "rl_step_no_drafts"))
else:
    positions = [c.position for c in verify.checks]
    if S.get("rl_step_pos") not in positions:
        S["rl_step_pos"] = positions[0]
    s1.selectbox(t("rl_step_pos"), positions, key="rl_step_pos")
    s2.button(t("rl_step_load"), key="rl_preset_step", on_click=LV.from_step, width="stretch")

if "rl_error" in S:
    st.error(S.pop("rl_error"))
# A crafted client can store any edit state: check it before Streamlit applies it (a new
# editor key drops it), so thousands of added rows cost nothing.
editor_key = f"rl_editor_{S['rl_ver']}"
try:
    edits = S.get(editor_key)
except Exception:  # noqa: BLE001 - a state that does not even parse
    edits = "unparsable"
if not table_state_ok(edits, len(S["rl_base"]), {"name": "text", "p": "number", "q": "number"}):
    S["rl_ver"] += 1
    editor_key, edits = f"rl_editor_{S['rl_ver']}", None
    st.error(f"{t('error_prefix')} {t('err_table_state')}")
edits = edits or {}
source = S.get("rl_source", ("preset", "textbook"))
edited_mark = " " + t("rl_source_edited") if edits.get("edited_rows") else ""
if source[0] == "preset":
    st.info(t("rl_source_preset", name=t(f"rl_preset_{source[1]}")) + edited_mark)
else:
    _, r, k, tok, n_named, a_full, greedy = source
    st.info(t("rl_step_source", r=r, k=k, tok=plain(tok), n=n_named, a_full=a_full) + edited_mark)
    if greedy:
        st.caption(t("rl_step_greedy"))

left, right = st.columns([3, 2])
with left:
    st.number_input(
        t("rl_n_tokens"),
        R.MIN_TOKENS,
        R.MAX_TOKENS,
        key="rl_ntok",
        on_change=LV.resize,
        help=t("rl_n_tokens_help"),
    )
    st.caption(t("rl_edit_help"))
    edited = st.data_editor(
        S["rl_base"],
        key=editor_key,
        num_rows="fixed",
        hide_index=True,
        width="stretch",
        column_config={
            "name": st.column_config.TextColumn(t("rl_col_name"), max_chars=SHORT_CHARS),
            "p": st.column_config.NumberColumn(t("rl_col_p_weight"), min_value=0.0, format=NUM),
            "q": st.column_config.NumberColumn(t("rl_col_q_weight"), min_value=0.0, format=NUM),
        },
    )
    S["rl_current"] = edited
try:
    p = R.normalise(LV.weights(edited["p"].tolist(), "p"), "p")
    q = R.normalise(LV.weights(edited["q"].tolist(), "q"), "q")
except Exception as exc:  # noqa: BLE001 - one clear message, never a traceback
    show_error(exc)
    st.stop()
names = LV.unique_names(edited["name"].tolist())
n_tok = len(names)
with right:
    st.markdown(f"**{t('rl_normalised')}**")
    LV.table(
        "rl_norm_table",
        {
            "token": (names, t("rl_col_name")),
            "p": (p, LV.number(t("rl_lab_p"))),
            "q": (q, LV.number(t("rl_lab_q"))),
        },
    )

# ------------------------------------------------------------------ 2 · proof
st.header(t("rl_sec_proof"))
st.markdown(t("rl_proof_help"))
d = R.decompose(p, q)
fig_labels = {
    "p": t("rl_lab_p"),
    "q": t("rl_lab_q"),
    "min": t("rl_lab_min"),
    "excess": t("rl_lab_excess"),
    "probability": t("probability"),
    "token": t("token"),
    **{rule: t(f"rl_rule_{rule}") for rule in R.RULES},
}
c1, c2 = st.columns(2)
c1.plotly_chart(
    LV.figure(rule_rows_figure, names, p, q, fig_labels, t("rl_fig_rows")), key="rl_fig_rows"
)
stack_labels = {**fig_labels, "p": t("rl_lab_p_mark")}
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

# ------------------------------------------------------------------ 3 · three rules
st.header(t("rl_sec_rules"))
st.markdown(t("rl_rules_help"))
try:
    whole_number(S.get("rl_y", 0), 0, n_tok - 1, "token")
except Exception:  # noqa: BLE001 - a crafted value: not a row of this table
    S["rl_y"] = 0
y = st.columns([1, 2])[0].selectbox(
    t("rl_onehot_token"), list(range(n_tok)), format_func=names.__getitem__, key="rl_y"
)
y_name = plain(names[y])
results = R.compare_rules(p, q, y)
h1, h2, h3 = st.columns(3)
h1.markdown(t("rl_rule_correct_help"))
h2.markdown(t("rl_rule_resample_p_help"))
h3.markdown(t("rl_rule_one_hot_help", tok=y_name))
# stacked, not side by side: at 1024 px with the sidebar open a column leaves the chart's
# bar labels overlapping and the table scrolling sideways
f1, f2 = st.container(), st.container()
finals = {rule: res.final for rule, res in results.items()}
f1.plotly_chart(
    LV.figure(rule_finals_figure, names, p, finals, fig_labels, t("rl_final_title")),
    key="rl_fig_finals",
)
with f2:
    LV.table(
        "rl_rule_summary",
        {
            "rule": ([t(f"rl_rule_{r}") for r in R.RULES], t("rl_col_rule")),
            "acceptance": (
                [results[r].acceptance for r in R.RULES],
                LV.number(t("rl_col_acceptance")),
            ),
            "tv": ([results[r].tv_to_p for r in R.RULES], LV.number(t("rl_col_tv"))),
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

# ------------------------------------------------------------------ 4 · Monte Carlo
st.header(t("rl_sec_mc"))
st.markdown(t("rl_mc_help", seed=seed))
n_draws = int(
    st.columns([1, 2])[0].number_input(
        t("rl_mc_n"), 1000, R.MAX_N, R.DEFAULT_N, 1000, key="rl_mc_n"
    )
)
n_asked = n_draws
mc_key = (tuple(p), tuple(q), y, n_draws, seed)
if S.get("rl_mc_key") != mc_key:
    bar = st.progress(0.0)

    def _tick(done: float) -> None:  # done: the fraction of all rules' draws
        rule = R.RULES[min(int(done * len(R.RULES)), len(R.RULES) - 1)]
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
    (t(f"rl_rule_{rule}"), mc[rule].freq, mc[rule].stderr, RULE_COLORS[rule]) for rule in R.RULES
]
st.plotly_chart(
    LV.figure(empirical_figure, names, exact, empirical, fig_labels, t("rl_mc_title", n=n_draws)),
    key="rl_fig_mc",
)
st.caption(t("rl_mc_errbars"))

# ------------------------------------------------------------------ 5 · accepted ≠ output
st.header(t("rl_sec_accepted"))
st.markdown(t("rl_accepted_help"))
run = mc["correct"]
if d.accepted_only is None or run.accepted_fit is None:
    st.info(t("rl_acc_none"))
else:
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

# ------------------------------------------------------------------ 6 · temperature
st.header(t("rl_sec_temp"))
st.markdown(t("rl_temp_help"))
if source[0] == "step":
    st.caption(t("rl_temp_other"))
temp = float(st.slider(t("rl_temp"), 0.0, 3.0, 1.0, 0.05, key="rl_temp"))
p_t, q_t = R.temper(p, temp), R.temper(q, temp)
a_t = R.acceptance_at(p, q, temp)
curve = R.acceptance_curve(p, q)
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
        R.TEMPERATURE_GRID,
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

# ------------------------------------------------------------------ 7 · tree node
st.header(t("rl_sec_tree"))
st.markdown(t("rl_tree_help"))
k_state = S.get("rl_tree_k")  # None on first load, or a crafted value: not one of the choices
if type(k_state) is not int or not 1 <= k_state <= R.MAX_SIBLINGS:
    S["rl_tree_k"] = 2  # two siblings: the smallest tree where the naive rule goes wrong
k_tree = st.columns([1, 2])[0].selectbox(
    t("rl_tree_k"), list(range(1, R.MAX_SIBLINGS + 1)), key="rl_tree_k", help=t("rl_tree_k_help")
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
    LV.figure(rule_finals_figure, names, p, tree_finals, tree_labels, t("rl_tree_fig", k=k_tree)),
    key="rl_fig_tree",
)
with g2:
    st.write("")
    st.markdown(t("rl_tree_why", beta=fmt_prob(d.beta)))
if tree["naive"].tv_to_p < 1e-12:
    st.caption(t("rl_tree_same"))
LV.show_tree_tables(names, p, tree)
