"""The acceptance rules of speculative decoding (chain, batch, tree node), the analytic cost model,
and the rule lab's exact and Monte Carlo distributions.
"""
