"""Make every page run inside ``app.py`` (sidebar + ``st.navigation``).

A deep link (``/speed``) on a fresh server can make Streamlit run ``pages/speed.py``
directly through its legacy ``pages/`` discovery, without ``app.py``: no sidebar, no pair.
Pages call :func:`page_context` first; outside the app it runs ``app.py`` (which renders
the sidebar and, through ``st.navigation``, this same page) and stops the direct run.

``APP_RUNS`` counts full runs of ``app.py`` (the step panel's
:func:`specdec_core.ui.step.links.fragment_run` tells a fragment-only rerun by it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from specdec_core.core.models import ModelPair
from specdec_core.core.settings import SessionConfig
from specdec_core.ui import logguard
from specdec_core.ui.guards import pace_full_run

APP_PATH = Path(__file__).resolve().parents[2] / "app.py"
APP_RUNS = "app_runs"  # full runs of app.py in this browser session (session state)
_local = threading.local()
_run_lock = threading.Lock()  # compile() of app.py from several session threads at once


@contextmanager
def app_context() -> Iterator[None]:
    """Used by ``app.py`` around ``nav.run()``: pages run inside the app (and the full runs
    are counted, see :func:`specdec_core.ui.step.links.fragment_run`). Also keeps the log
    guard on every handler."""
    logguard.install_in_server()  # repeats collapsed, records capped (cheap when done)
    pace_full_run()  # a tab sending full reruns as fast as it can is slowed to a few a second
    st.session_state[APP_RUNS] = st.session_state.get(APP_RUNS, 0) + 1
    _local.inside = True
    try:
        yield
    finally:
        _local.inside = False


def page_context() -> tuple[ModelPair, SessionConfig]:
    """The loaded pair and settings for a page (running ``app.py`` first if needed)."""
    if not getattr(_local, "inside", False):
        with _run_lock:
            code = compile(APP_PATH.read_text(encoding="utf-8"), str(APP_PATH), "exec")
        # Works around Streamlit's legacy ``pages/`` folder discovery: on a cold deep link
        # (``/speed`` before any session has called ``st.navigation``) Streamlit runs the
        # page file directly, without app.py (streamlit#8388). Running app.py here gives the
        # page its sidebar and pair; st.navigation then renders this same page inside it.
        exec(code, {"__name__": "__main__", "__file__": str(APP_PATH)})
        st.stop()
    return st.session_state["pair"], st.session_state["config"]
