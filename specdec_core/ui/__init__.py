"""Streamlit-side helpers: the only package in ``specdec_core`` that imports streamlit."""
