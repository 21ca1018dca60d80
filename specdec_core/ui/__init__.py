"""Streamlit-side helpers: the only package in ``specdec_core`` that imports streamlit."""

from specdec_core.ui import logguard

logguard.install_in_server()  # first: bounded logs even if a page module fails to import
