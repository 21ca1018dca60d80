"""The measurement server: a job queue and worker that run long measurements off the page (no
Streamlit).
"""
