"""SpecDec Lab — Streamlit entry: sidebar (pair, device, language, settings) and
``st.navigation`` over the lesson pages. Run with ``streamlit run app.py``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import streamlit as st

from specdec_core.ui.context import app_context
from specdec_core.ui.i18n import t
from specdec_core.ui.sidebar import render_sidebar

HERE = Path(__file__).resolve().parent
_started = time.perf_counter()

st.set_page_config(page_title="SpecDec Lab", page_icon="🔮", layout="wide")

PAGES = [
    ("pages/step_through.py", "nav_step", ":material/footprint:"),
    ("pages/acceptance_lab.py", "nav_rules", ":material/balance:"),
    ("pages/speed.py", "nav_speed", ":material/speed:"),
    ("pages/drafters.py", "nav_drafters", ":material/call_split:"),
]

pages = [
    st.Page(str(HERE / path), title=t(key), icon=icon, default=i == 0, url_path=Path(path).stem)
    for i, (path, key, icon) in enumerate(PAGES)
    if (HERE / path).is_file()
]
nav = st.navigation(pages)
st.sidebar.title(t("app_title"))
st.sidebar.caption(t("app_tagline"))
render_sidebar()
with app_context():
    nav.run()
if os.environ.get("SPECDEC_PROFILE"):  # server time of this rerun, for benchmarks/load_test.py
    print(f"specdec-render-ms {(time.perf_counter() - _started) * 1e3:.1f}", file=sys.stderr)
