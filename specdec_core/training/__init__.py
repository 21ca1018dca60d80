"""Reproducible training of the embedded pair and of its drafters (``python -m
specdec_core.training.embedded`` / ``.eagle`` / ``.mtp`` / ``.block``).
"""
