"""The acceptance-rule lab: why ``min(1, p/q)`` plus the residual gives exactly ``p``.

Small hand-edited distributions over 3–8 named tokens (or real model rows taken from a
step-through round), the exact decomposition

    p(x) = min(p(x), q(x))  +  β · r(x),   β = 1 − A = Σ [p − q]+,  r = norm([p − q]+)
           (accept path)      (reject path)

with ``A = Σ min(p, q) = 1 − TV(p, q)`` (Leviathan et al. 2023, Thm 3.5 and Lemma 3.3;
Chen et al. 2023, Thm 1), three rules compared exactly (correct; the wrong "resample from
p after a rejection"; a one-hot draft), and a Monte Carlo of one verification step with the
vectorised rule of :mod:`specdec_core.rules.batch` (the same rule as
:func:`specdec_core.rules.acceptance.verify_sampling`).

Pure: numpy, torch and scipy; no streamlit, no plotly. All probabilities are float64
numpy arrays ``[V]`` (``V`` = number of tokens, 3..8 for hand-made rows).

Modules: ``rows`` (presets, normalising, rows from a model position), ``exact`` (the
decomposition and each rule's exact final distribution), ``montecarlo`` (simulation and
χ²), ``temperature`` (``A(T)``), ``tree_node`` (several sibling candidates at one tree node:
the residual rule against the naive one), ``block`` (block verification against token-wise
on context-free rows). Import a name from the module that defines it.
"""
