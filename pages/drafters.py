"""Where drafts come from: every draft source the pair can run (the draft model, prompt
lookup (n-gram), early exit and, where the pair ships them, the EAGLE feature head, the
MTP heads and the block drafter) on the same prompt, side by side with the target alone;
then all of them on a repetitive and a novel prompt, greedy and T = 1, measured beside the
cost model's prediction (``ui/speed/compare_run.py``, run in the background).

Layout only: the cards and the results live in ``specdec_core.ui.drafters``; every number
comes from ``specdec_core.bench.compare``.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.ui import drafts_budget, problems
from specdec_core.ui.context import page_context
from specdec_core.ui.drafters import cards, results
from specdec_core.ui.i18n import t
from specdec_core.ui.speed import compare_run

pair, config = page_context()
st.title(t("dr_title"))
problems.show()  # what a link to this page could not keep (one message, as on /)
st.markdown(t("dr_intro"))
prompt, chosen = cards.inputs(pair)
key = cards.run_row(pair, config, prompt, chosen)
shown = results.section(pair, key)
with st.expander(t("dr_read_title"), expanded=shown):
    st.markdown(t("dr_read"))

st.divider()  # every source, two prompts
compare_run.section(pair, config, "dr")
drafts_budget.show_lookup_note("dr")  # why prompt lookup ranks differently
results.other_drafters()
