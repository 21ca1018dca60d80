"""Acceptance-rule lab: why min(1, p/q) plus the residual gives exactly p.

Layout only: the sections live in ``specdec_core.ui.lab``; every number comes from
``specdec_core.rules.lab`` (which calls ``specdec_core.rules.acceptance`` and
``specdec_core.core.sampling``).
"""

from __future__ import annotations

import streamlit as st

from specdec_core.ui.context import page_context
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import beyond as BY
from specdec_core.ui.lab import block as BL
from specdec_core.ui.lab import montecarlo as MC
from specdec_core.ui.lab import processors as PR
from specdec_core.ui.lab import rows, rules
from specdec_core.ui.lab import view as LV

pair, config = page_context()
LV.pace()  # at most one run of this page a second per tab
seed = int(config.seed)
if "rl_base" not in st.session_state:
    LV.preset("textbook")

st.title(t("rl_title"))
st.markdown(t("rl_intro"))
names, p, q, source = rows.section()  # 1 · the rows
d, fig_labels = rules.proof(names, p, q)  # 2 · the proof
y, results = rules.three_rules(names, p, q, fig_labels)  # 3 · three rules
mc = MC.show_monte_carlo(p, q, y, seed, names, results, fig_labels)  # 4 · Monte Carlo
MC.show_accepted(mc, d, p, names, fig_labels)  # 5 · accepted ≠ output
BY.show_temperature(p, q, d, names, fig_labels, source)  # 6 · temperature
BY.show_tree_node(p, q, d, names, fig_labels)  # 7 · tree node
PR.show_state(pair, seed)  # 8 · state beyond the KV cache
BL.show_block(p, q, names, seed)  # 9 · block verification
