"""Reproducible training of the embedded pair and of the EAGLE head (``python -m
specdec_core.training.embedded`` / ``.eagle``).
"""
