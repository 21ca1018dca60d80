from __future__ import annotations

import pytest
from conftest import TEXTBOOK

from specdec_core.costmodel import (
    best_gamma,
    expected_tokens_per_round,
    per_token_cost_ms,
    predicted_speedup,
    walltime_improvement,
)


@pytest.mark.parametrize("case", TEXTBOOK["cost_cases"], ids=lambda c: c["name"])
def test_per_token_cost(case):
    cost = per_token_cost_ms(
        case["draft_ms"], case["verify_ms"], case["overhead_ms"], case["advanced"]
    )
    assert cost == pytest.approx(case["per_token_ms"], abs=1e-9)
    assert (cost < case["target_step_ms"]) == case["faster_than_plain"]


@pytest.mark.parametrize("case", TEXTBOOK["expected_tokens_per_round"], ids=str)
def test_expected_tokens(case):
    value = expected_tokens_per_round(case["alpha"], case["gamma"])
    assert value == pytest.approx(case["value"], abs=1e-9)


@pytest.mark.parametrize("case", TEXTBOOK["walltime_improvement"]["cases"], ids=str)
def test_walltime_improvement(case):
    value = walltime_improvement(case["alpha"], case["gamma"], case["cost_ratio_c"])
    assert value == pytest.approx(case["walltime_improvement"], abs=1e-6)


def test_predicted_speedup_reduces_to_walltime_improvement():
    # verify costs one target step, no overhead: the Leviathan formula with c = 2/20
    assert predicted_speedup(0.7, 3, 20.0, 2.0, 20.0) == pytest.approx(
        walltime_improvement(0.7, 3, 0.1), abs=1e-12
    )


def test_best_gamma():
    assert best_gamma(0.0, 0.1) == 1
    g = best_gamma(0.8, 0.05)
    assert all(
        walltime_improvement(0.8, g, 0.05) >= walltime_improvement(0.8, k, 0.05)
        for k in range(1, 17)
    )
    assert g == 8  # 3.3616/1.2=2.80 at γ=4; peak at γ=8 (≈ 3.06)


def test_bad_values():
    with pytest.raises(ValueError):
        expected_tokens_per_round(1.5, 4)
    with pytest.raises(ValueError):
        per_token_cost_ms(1, 1, 0, 0)
