"""The acceptance rules of speculative decoding (chain position and tree node; batch; the
alternative rules: block, lossy), the analytic cost model, and the rule lab's exact and
Monte Carlo distributions.
"""
