"""The broadcast penalty done wrong, on the pair (lessons/wrong_penalty.py): the
repeat-count statistic and the Monte Carlo's invariants."""

from __future__ import annotations

import pytest

from specdec_core.core.penalties import PenaltyConfig
from specdec_core.lessons.wrong_penalty import penalty_monte_carlo, repeat_counts


def test_repeat_counts():
    assert repeat_counts([[1, 2, 3], [1, 1, 2], [4, 4, 4], [5, 6, 5]], 3) == (0.25, 0.5, 0.25)


def test_monte_carlo_invariants_on_the_tiny_pair(tiny_pair):
    """Same seed for both speculative rules: without a penalty their samples agree exactly
    (identical rows); with one, the first token still agrees (position 1 sees its true
    prefix under both rules)."""
    off = penalty_monte_carlo(tiny_pair, "ab", PenaltyConfig(), 2, 3, samples=24, seed=3)
    assert off.laws["per_prefix"] == off.laws["broadcast"] and off.first_token_same
    assert off.tv["per_prefix"] == off.tv["broadcast"]
    on = penalty_monte_carlo(tiny_pair, "ab", PenaltyConfig(presence_penalty=2.0), 2, 3, 24, 3)
    assert on.first_token_same and on.n_samples == 24
    for law in on.laws.values():
        assert sum(law) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        penalty_monte_carlo(tiny_pair, "ab", samples=0)
