"""Speed and cost: when does speculation pay? The cost model, then real measurements.

Layout only: the calculators and views live in ``specdec_core.ui.speed``; formulas in
``specdec_core.rules.costmodel``, timings and comparisons in ``specdec_core.bench``. Long
measurements run as a queue of tasks kept in ``st.session_state``: each task is a
checkpoint where the progress bar updates and where Stop (or any other click) interrupts;
a stopped sweep keeps the points it finished.
"""

from __future__ import annotations

import streamlit as st

from specdec_core.server import tasks as T
from specdec_core.ui import problems
from specdec_core.ui.context import page_context
from specdec_core.ui.i18n import t
from specdec_core.ui.speed import calculators, compare_run
from specdec_core.ui.speed.block_rule import show_block_rule
from specdec_core.ui.speed.device import show_device_regime
from specdec_core.ui.speed.measure import show_controls
from specdec_core.ui.speed.queue import queue
from specdec_core.ui.speed.sweeps import show_batch_sweep, show_gamma_sweep
from specdec_core.ui.speed.view import show_measurement
from specdec_core.ui.speed.why import show_predictions, show_timeline, show_verify_curve

S = st.session_state
pair, config = page_context()
if S.get("sp_worker_for") != pair.name:  # imports and loads while the teacher sets options
    S["sp_worker_for"] = pair.name
    try:
        queue().start(pair.name)
    except OSError:  # no process could start: the first measurement says so
        pass

st.title(t("sp_title"))
problems.show()  # what a link to this page could not keep (one message, as on /)
st.markdown(t("sp_intro"))
calculators.cost_section()  # ① per-token cost
calculators.curve_section()  # ② Leviathan curves
show_block_rule()  # token-wise vs block verification, measured (an expander)

# ------------------------------------------------------------------ the device's regime
show_device_regime(pair.device)

# ------------------------------------------------------------------ ③ measured: controls
show_controls(pair, config)

# ------------------------------------------------------------------ ③ measured: results
measured = S.get("sp_measured")
if isinstance(measured, T.Measurement):
    show_measurement(measured)
    show_verify_curve(measured)
    show_timeline(measured)
    show_predictions(S.get("sp_by_drafter", {}))
else:
    st.info(t("sp_no_results"))

# ------------------------------------------------------------------ every draft source
compare_run.section(pair, config, "sp")

# ------------------------------------------------------------------ ④ γ sweep
st.header(t("sp_gamma_header"))
st.markdown(t("sp_gamma_help"))
sweep = S.get("sp_gamma")
if sweep and sweep["points"]:
    show_gamma_sweep(sweep["points"], sweep["partial"], sweep.get("how"))

# ------------------------------------------------------------------ ⑤ batch sweep
st.header(t("sp_batch_header"))
st.markdown(t("sp_batch_help"))
batch = S.get("sp_batch")
if batch and batch["points"]:
    show_batch_sweep(batch["points"], batch["partial"], batch.get("how"))
