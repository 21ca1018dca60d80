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
from specdec_core.ui.figures.lab import (
    acceptance_stack_figure,
    rule_finals_figure,
    rule_rows_figure,
)
from specdec_core.ui.guards import SHORT_CHARS, table_state_ok, whole_number
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import beyond as BY
from specdec_core.ui.lab import montecarlo as MC
from specdec_core.ui.lab import processors as PR
from specdec_core.ui.lab import view as LV

S = st.session_state
pair, config = page_context()
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
mc = MC.show_monte_carlo(p, q, y, seed, names, results, fig_labels)

# ------------------------------------------------------------------ 5 · accepted ≠ output
MC.show_accepted(mc, d, p, names, fig_labels)

# ------------------------------------------------------------------ 6 · temperature
BY.show_temperature(p, q, d, names, fig_labels, source)

# ------------------------------------------------------------------ 7 · tree node
BY.show_tree_node(p, q, d, names, fig_labels)

# ------------------------------------------------------------------ 8 · state beyond the KV cache
PR.show_state(pair, seed)
