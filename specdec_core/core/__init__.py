"""Foundations every other folder builds on: errors, settings and prompt input, model pairs, KV
caches, sampling distributions, frozen traces and round records.
"""
