"""Models are loaded once per process and shared read-only by every browser session."""

from __future__ import annotations

import streamlit as st

from specdec_core.models import ModelPair, load_pair


@st.cache_resource(show_spinner=False, max_entries=2)
def cached_pair(name: str) -> ModelPair:
    """Load a preset pair once per process (``st.cache_resource``); never mutated."""
    return load_pair(name)
