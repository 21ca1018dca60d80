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


def test_reference_table_is_the_textbook_walltime_cases():
    from specdec_core.costmodel import WALLTIME_CASES

    cases = TEXTBOOK["walltime_improvement"]["cases"]
    assert [(c["alpha"], c["gamma"], c["cost_ratio_c"]) for c in cases] == list(WALLTIME_CASES)
    for case, (a, g, c) in zip(cases, WALLTIME_CASES, strict=True):
        assert walltime_improvement(a, g, c) == pytest.approx(
            case["walltime_improvement"], abs=1e-6
        )


def test_curve_ratio_and_cost_helpers():
    from specdec_core.costmodel import (
        cost_ratio,
        forward_time_speedup,
        improvement_curve,
        speedup_from_cost,
    )

    curve = improvement_curve(0.8, 0.05, range(1, 17))
    assert [g for g, _, _ in curve] == list(range(1, 17))
    assert curve[3][1] == pytest.approx(3.3616, abs=1e-9)  # γ = 4: E[tokens]
    assert curve[3][2] == pytest.approx(2.801333, abs=1e-6)
    assert max(curve, key=lambda r: r[2])[0] == best_gamma(0.8, 0.05)
    assert cost_ratio(8.0, 20.0) == pytest.approx(0.4)
    # the textbook example: 11 ms/token vs a 20 ms target step is 20/11 = 1.818× faster
    assert speedup_from_cost(20.0, 11.0) == pytest.approx(20 / 11)
    assert speedup_from_cost(20.0, 33.0) < 1.0
    # verification costing one target step: the forward-time model is Thm 3.8
    assert forward_time_speedup(0.7, 3, 20.0, 2.0, 20.0) == pytest.approx(
        walltime_improvement(0.7, 3, 0.1)
    )
    with pytest.raises(ValueError):
        cost_ratio(1.0, 0.0)
    with pytest.raises(ValueError):
        speedup_from_cost(0.0, 1.0)
