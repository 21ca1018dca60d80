"""Where "lossless" ends: same distribution ≠ same text, numerics, a quantized target, and
lossy acceptance rules priced.

Widgets and rendering only: every number comes from ``specdec_core.rules.lab.lossy`` (the
rules on the lab's rows), ``specdec_core.bench.lossless`` and ``specdec_core.bench.numerics``
(the studies on the pair), through ``specdec_core.ui.lossless``.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.ui.context import page_context
from specdec_core.ui.i18n import t
from specdec_core.ui.lab import view as LV
from specdec_core.ui.lossless import numerics as NU
from specdec_core.ui.lossless import quant as QU
from specdec_core.ui.lossless import rules as LR
from specdec_core.ui.lossless import seeds as SE
from specdec_core.ui.lossless import tradeoff as TR

pair, config = page_context()
LV.pace()  # at most one run of this page a second per tab

st.title(t("ll_title"))
st.markdown(t("ll_intro"))
with st.expander(t("ll_levels_title"), expanded=True):
    st.markdown(t("ll_levels"))
st.caption(t("ll_runs_note"))

# ------------------------------------------------------------------ prompt of ① and ②
prompt = SE.pick_prompt()

# ------------------------------------------------------------------ 1 · same seed
SE.show_same_seed(pair, config, prompt)

# ------------------------------------------------------------------ 2 · numerics
NU.show_numerics(pair, config, prompt)

# ------------------------------------------------------------------ 3 · quantized target
QU.show_quant(pair, config, prompt)

# ------------------------------------------------------------------ 4 · lossy rules
st.header(t("ll_sec_rules"))
st.info(t("ll_never_default"))
knobs = LR.show_lab_rules()
TR.show_tradeoff(pair, config, knobs)
