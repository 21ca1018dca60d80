from __future__ import annotations

import pytest
from conftest import TEXTBOOK

from specdec_core.rules.costmodel import (
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
    from specdec_core.rules.costmodel import WALLTIME_CASES

    cases = TEXTBOOK["walltime_improvement"]["cases"]
    assert [(c["alpha"], c["gamma"], c["cost_ratio_c"]) for c in cases] == list(WALLTIME_CASES)
    for case, (a, g, c) in zip(cases, WALLTIME_CASES, strict=True):
        assert walltime_improvement(a, g, c) == pytest.approx(
            case["walltime_improvement"], abs=1e-6
        )


def test_curve_ratio_and_cost_helpers():
    from specdec_core.rules.costmodel import (
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


# ------------------------------------------------------------------ measured inputs
def test_curve_model_reproduces_the_seed_lesson():
    from specdec_core.rules.costmodel import curve_improvement, curve_ms, speedup_from_measured

    # target step 20 ms, the whole round's drafts 8 ms (γ = 2, 4 ms each), verify off the
    # curve t(γ + 1) = 25 ms: 11 ms per token when the round advances 3, 33 ms when 1
    curve = {1: 20.0, 2: 22.5, 3: 25.0}
    verify = curve_ms(curve, 2 + 1)
    assert verify == 25.0
    assert per_token_cost_ms(8.0, verify, 0.0, 3) == pytest.approx(11.0)
    assert per_token_cost_ms(8.0, verify, 0.0, 1) == pytest.approx(33.0)
    assert speedup_from_measured(3, 20.0, 8.0, verify, 0.0) == pytest.approx(20 / 11)
    assert speedup_from_measured(1, 20.0, 8.0, verify, 0.0) == pytest.approx(20 / 33)
    # the same through the curve form: α = 1 advances γ + 1 = 3, α = 0 advances 1
    assert curve_improvement(1.0, 2, 4.0 / 20.0, curve) == pytest.approx(20 / 11)
    assert curve_improvement(0.0, 2, 4.0 / 20.0, curve) == pytest.approx(20 / 33)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.6, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("c", [0.0, 0.05, 0.2, 0.6])
def test_flat_curve_is_leviathans_closed_form(alpha, c):
    from specdec_core.rules.costmodel import best_gamma_on_curve, curve_improvement

    flat = {k: 7.0 for k in range(1, 18)}  # t(k) = t(1): Thm 3.8's assumption
    for gamma in range(1, 17):
        assert curve_improvement(alpha, gamma, c, flat) == pytest.approx(
            walltime_improvement(alpha, gamma, c), rel=1e-12
        )
    assert best_gamma_on_curve(alpha, c, flat) == best_gamma(alpha, c, 16)


def test_a_rising_curve_lowers_the_best_gamma():
    from specdec_core.rules.costmodel import best_gamma_on_curve

    rising = {k: 10.0 * (1 + 0.25 * (k - 1)) for k in range(1, 18)}  # t(5) = 2 · t(1)
    assert best_gamma_on_curve(0.8, 0.05, rising) < best_gamma(0.8, 0.05, 16)


def test_curve_interpolates_and_holds_at_the_ends():
    from specdec_core.rules.costmodel import curve_ms

    curve = {1: 2.0, 2: 3.0, 4: 7.0}
    assert curve_ms(curve, 1.5) == pytest.approx(2.5)
    assert curve_ms(curve, 3) == pytest.approx(5.0)
    assert curve_ms(curve, 0.5) == 2.0 and curve_ms(curve, 9) == 7.0
    with pytest.raises(ValueError):
        curve_ms({}, 1)


def test_expected_tokens_given_drafts_is_eq1_per_round():
    import random

    from specdec_core.rules.costmodel import expected_tokens_given_drafts

    assert expected_tokens_given_drafts(0.7, [4, 4, 4]) == pytest.approx(
        expected_tokens_per_round(0.7, 4)
    )
    assert expected_tokens_given_drafts(0.7, [0, 0]) == 1.0  # no draft: one token
    assert expected_tokens_given_drafts(0.7, []) == 0.0
    assert expected_tokens_given_drafts(1.0, [3, 1]) == 3.0  # every draft accepted: g + 1
    with pytest.raises(ValueError):
        expected_tokens_given_drafts(1.2, [2])
    mixed = [0, 2, 4, 1]
    assert expected_tokens_given_drafts(0.6, mixed) == pytest.approx(
        sum(expected_tokens_per_round(0.6, g) for g in mixed) / 4
    )
    # fewer drafts than γ: the γ formula over-predicts (the 2.49 vs 1.88)
    assert expected_tokens_given_drafts(0.6, mixed) < expected_tokens_per_round(0.6, 4)
    # Monte Carlo: independent acceptances with probability α, stop at the first rejection
    rng, alpha, rounds = random.Random(0), 0.65, 40000
    total = 0
    for i in range(rounds):
        g = mixed[i % 4]
        accepted = 0
        while accepted < g and rng.random() < alpha:
            accepted += 1
        total += accepted + 1
    assert total / rounds == pytest.approx(expected_tokens_given_drafts(alpha, mixed), rel=0.01)


def test_expected_tokens_given_position_rates_by_hand_and_as_eq1():
    from specdec_core.rules.costmodel import (
        expected_tokens_given_drafts,
        expected_tokens_given_position_rates,
    )

    rates = (1.0, 0.5)
    # 2 drafts: 1 + 1 + 1 × 0.5; 4 drafts hold the last rate: + 0.25 + 0.125
    assert expected_tokens_given_position_rates(rates, [2]) == pytest.approx(2.5)
    assert expected_tokens_given_position_rates(rates, [4]) == pytest.approx(2.875)
    assert expected_tokens_given_position_rates(rates, [0, 2, 1]) == pytest.approx(
        (1.0 + 2.5 + 2.0) / 3
    )
    assert expected_tokens_given_position_rates((0.6, 0.9, 0.5), [3]) == pytest.approx(
        1 + 0.6 + 0.54 + 0.27
    )
    # every α_n = α: Leviathan Eq. 1 per round
    mixed = [0, 2, 4, 1, 4]
    for alpha in (0.0, 0.35, 0.7, 1.0):
        assert expected_tokens_given_position_rates([alpha] * 3, mixed) == pytest.approx(
            expected_tokens_given_drafts(alpha, mixed)
        )
    assert expected_tokens_given_position_rates((), [0, 0]) == 1.0  # no draft: one token
    assert expected_tokens_given_position_rates(rates, []) == 0.0
    with pytest.raises(ValueError):
        expected_tokens_given_position_rates((0.5, 1.2), [2])
    with pytest.raises(ValueError):
        expected_tokens_given_position_rates((), [0, 3])


def test_position_rates_predict_runs_of_acceptances_where_one_alpha_does_not():
    """Acceptances in runs (a copied span matches until it diverges): draft 1 accepted
    with probability 0.5, each later one with 0.95 once the run started. Simulated
    rounds advance what the per-position product says; one pooled α (accepted / checked,
    what the runs' α is at T = 0) over-predicts them, as it did prompt lookup's."""
    import random

    from specdec_core.rules.costmodel import (
        expected_tokens_given_drafts,
        expected_tokens_given_position_rates,
    )

    rng, drafts = random.Random(1), [4, 4, 0, 4, 2]
    accepted = checked = total = 0
    for i in range(40000):
        g, n = drafts[i % len(drafts)], 0
        while n < g:
            checked += 1
            if rng.random() >= (0.5 if n == 0 else 0.95):
                break
            n += 1
        accepted += n
        total += n + 1
    measured = total / 40000
    rates = expected_tokens_given_position_rates((0.5, 0.95), drafts)
    pooled = expected_tokens_given_drafts(accepted / checked, drafts)
    assert rates == pytest.approx(1 + 3 * (0.5 + 0.475 + 0.45125 + 0.4286875) / 5 + 0.975 / 5)
    assert measured == pytest.approx(rates, rel=0.01)
    assert pooled > 1.05 * measured  # 2.46 vs 2.29: the pooled α is too high at draft 1


def test_predicted_run_counts_the_prompt_forward_once():
    from specdec_core.rules.costmodel import predicted_run_ms

    # 12 tokens at 3 per round = 4 rounds; the first round's verification is the prompt's
    # forward (50 ms): 50 + 4 × (8 + 1) + 3 × 25 = 161 ms
    assert predicted_run_ms(12, 3.0, 50.0, 8.0, 25.0, 1.0) == pytest.approx(161.0)
    # never fewer than one round: 2 tokens at 3 per round still cost one round
    assert predicted_run_ms(2, 3.0, 50.0, 8.0, 25.0, 1.0) == pytest.approx(59.0)
    with pytest.raises(ValueError):
        predicted_run_ms(0, 3.0, 50.0, 8.0, 25.0, 1.0)


# ------------------------------------------------------------------ what each drafter runs
@pytest.mark.parametrize(
    "cost, drafts, expected",
    [
        ("serial", 4, 4 * 1.2),  # draft model / early exit / EAGLE head: one step a draft
        ("serial", 0, 0.0),  # a round that drafts nothing runs nothing
        ("one_forward", 4, 1.5),  # block drafter: one forward for the whole block
        ("one_forward", 1, 1.5),  # ... whatever the block's length
        ("one_forward", 0, 0.0),
        ("heads", 3, 3 * 1.2),  # MTP: one head evaluation a draft
        ("none", 4, 1.5),  # prompt lookup: no forward, the measured lookup
        ("none", 0, 1.5),  # ... paid in every round, a lookup that found nothing too
    ],
)
def test_a_round_is_priced_by_what_its_drafter_runs(cost, drafts, expected):
    from specdec_core.rules.costmodel import draft_round_ms

    assert draft_round_ms(cost, drafts, step_ms=1.2, proposal_ms=1.5) == pytest.approx(expected)


def test_the_block_drafter_is_not_priced_as_gamma_serial_steps():
    from specdec_core.rules.costmodel import mean_draft_round_ms, predicted_run_ms

    # the H200's launch-bound numbers: a 2-layer step 1.18 ms, a 4-token block forward
    # ≈ 1.2 × that; four rounds of 4 drafts cost 4 forwards, not 16 steps
    drafts = [4, 4, 4, 4]
    block = mean_draft_round_ms("one_forward", drafts, 1.18, 1.42)
    serial = mean_draft_round_ms("serial", drafts, 1.18, 1.42)
    assert block == pytest.approx(1.42) and serial == pytest.approx(4.72)
    fast = predicted_run_ms(128, 1.8, 3.0, block, 2.0, 0.3)
    slow = predicted_run_ms(128, 1.8, 3.0, serial, 2.0, 0.3)
    assert slow - fast == pytest.approx(128 / 1.8 * (4.72 - 1.42))  # rounds × 3.3 ms


def test_mean_draft_round_averages_rounds_with_their_own_draft_counts():
    from specdec_core.rules.costmodel import mean_draft_round_ms

    # MTP's first round drafts nothing (no hidden state yet): 0, then 4 and 2 rows
    assert mean_draft_round_ms("heads", [0, 4, 2], 0.5) == pytest.approx((0 + 2.0 + 1.0) / 3)
    assert mean_draft_round_ms("one_forward", [0, 4, 2], 0.5, 3.0) == pytest.approx(2.0)
    assert mean_draft_round_ms("serial", [], 0.5) == 0.0
    with pytest.raises(ValueError):
        mean_draft_round_ms("parallel", [4], 0.5)
    with pytest.raises(ValueError):
        mean_draft_round_ms("serial", [4], -1.0)


def test_a_drafters_own_target_forward_is_priced_as_one_more_verification():
    from specdec_core.rules.costmodel import predicted_run_ms

    # EAGLE's first round: its own prefill, then the verification as a forward of its own
    plain = predicted_run_ms(12, 3.0, 50.0, 8.0, 25.0, 1.0)
    eagle = predicted_run_ms(12, 3.0, 50.0, 8.0, 25.0, 1.0, extra_target_forwards=1)
    assert eagle - plain == pytest.approx(25.0)


def test_every_drafter_declares_what_it_runs():
    from specdec_core.drafters.registry import DRAFTER_CLASSES
    from specdec_core.rules.costmodel import DRAFT_COSTS

    costs = {name: cls.draft_cost for name, cls in DRAFTER_CLASSES.items()}
    assert set(costs.values()) <= set(DRAFT_COSTS)
    assert costs == {
        "model": "serial",
        "ngram": "none",
        "early-exit": "serial",
        "eagle": "serial",
        "mtp": "heads",
        "block": "one_forward",
        "recurrent": "serial",
    }


def test_the_reference_device_row_holds_the_h200_figures():
    from specdec_core.rules.costmodel import REFERENCE_DEVICES

    (h200,) = REFERENCE_DEVICES
    assert h200.device == "NVIDIA H200"
    assert h200.target_tokens_per_s == 570.0 and h200.verify_ratio == (1.15, 1.24)
    assert h200.c == pytest.approx(h200.draft_step_ms / h200.target_step_ms, abs=0.01)
    assert dict(h200.speedup) == {
        "ngram": 1.89,
        "model": 0.43,
        "eagle": 0.81,
        "mtp": 0.82,
        "block": 0.94,
    }
