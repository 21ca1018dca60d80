"""The broadcast penalty, exactly (rules/lab/penalty.py): on the hand-made bigram case the
per-prefix rule gives the target alone's law to 1e-12 and the broadcast shortcut does not,
with TVs checked by hand (presence penalty ln 2 halves a generated token's weight, so
every number is a fraction)."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest

from specdec_core.core.errors import RuleInputError
from specdec_core.core.penalties import PenaltyConfig
from specdec_core.rules.lab.penalty import (
    HAND_CASE,
    PENALTY_RULES,
    compare_penalty_rules,
    output_law,
    round_law,
    target_law,
    two_token_tv,
)

LN2 = PenaltyConfig(presence_penalty=math.log(2))
A, B, C = 0, 1, 2


def test_target_alone_by_hand():
    """p1 after the prompt A: weights (1, 2, 1), no generated token yet → (¼, ½, ¼).
    p2 after "A B" with B generated once (weight halved): (1, 1, 1) → ⅓ each."""
    law = target_law(HAND_CASE, LN2, 2)
    assert law[(B, B)] == pytest.approx(float(F(1, 2) * F(1, 3)), abs=1e-9)
    assert law[(A, A)] == pytest.approx(float(F(1, 4) * F(1, 7)), abs=1e-9)  # (½,2,1)/3.5
    assert law[(C, C)] == pytest.approx(float(F(1, 4) * F(1, 3)), abs=1e-9)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)


# (θ, presence, γ, n) → (TV broadcast, TV ignored): the ln 2 rows are hand-checked
# fractions; the others are the closed form's cross-check (n = 2) below.
CASES = [
    (1.0, math.log(2), 1, 2, F(37, 336), F(17, 112)),
    (1.0, math.log(2), 2, 2, F(37, 336), F(17, 112)),
    (1.0, math.log(2), 3, 2, F(37, 336), F(17, 112)),
]


@pytest.mark.parametrize(("theta", "presence", "gamma", "n", "tv_broad", "tv_ignored"), CASES)
def test_case_table(theta, presence, gamma, n, tv_broad, tv_ignored):
    """Broadcast, two tokens: Σ min(p1, q1)(x1)·TV(p2_b, p2 | x1) with min(p1, q1) =
    (¼, ¼, ¼) (q1 = (¼, ¼, ½)) and TVs 3/28 (x1 = A: ¼ → 1/7), 1/6 (B: ½ → ⅓),
    1/6 (C) → 3/112 + 1/12 = 37/336 ≈ 0.1101. Ignored: Σ p1(x1)·TV = ¼·3/28 + ½·1/6 +
    ¼·1/6 = 17/112. Per-prefix: 0."""
    config = PenaltyConfig(repetition_penalty=theta, presence_penalty=presence)
    cmp = compare_penalty_rules(HAND_CASE, config, gamma, n)
    assert cmp.tv["per_prefix"] < 1e-12
    assert cmp.tv["broadcast"] == pytest.approx(float(tv_broad), abs=1e-7)
    assert cmp.tv["ignored"] == pytest.approx(float(tv_ignored), abs=1e-7)
    assert cmp.two_token_tv == pytest.approx(float(tv_broad), abs=1e-7)
    assert max(abs(a - b) for a, b in zip(cmp.laws["per_prefix"], cmp.target, strict=True)) < 1e-12
    assert cmp.labels[:3] == ("A A", "A B", "A C") and len(cmp.outcomes) == 9


@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize(
    "config",
    [
        PenaltyConfig(repetition_penalty=2.0),
        PenaltyConfig(repetition_penalty=1.5, presence_penalty=1.0),
        PenaltyConfig(frequency_penalty=0.7, presence_penalty=0.3),
    ],
)
def test_per_prefix_is_the_target_alone_and_broadcast_is_not(gamma, config):
    for n in (2, 3):
        cmp = compare_penalty_rules(HAND_CASE, config, gamma, n)
        assert cmp.tv["per_prefix"] < 1e-12
        assert cmp.tv["broadcast"] > 0.01
        for law in (cmp.target, *cmp.laws.values()):
            assert sum(law) == pytest.approx(1.0, abs=1e-12)
        if n == 2:  # the closed form is the enumeration's two-token TV
            assert cmp.tv["broadcast"] == pytest.approx(cmp.two_token_tv, abs=1e-12)


def test_broadcast_grows_with_the_round_at_three_tokens():
    """γ = 1 puts only position 2 of each round behind a broadcast row; γ = 2 also
    position 3, so the three-token error grows (0.1230 → 0.1399 with ln 2)."""
    one = compare_penalty_rules(HAND_CASE, LN2, 1, 3).tv["broadcast"]
    two = compare_penalty_rules(HAND_CASE, LN2, 2, 3).tv["broadcast"]
    assert two > one > F(37, 336)
    assert compare_penalty_rules(HAND_CASE, LN2, 3, 3).tv["broadcast"] == pytest.approx(two)


def test_one_round_law_by_hand():
    """γ = 1, per-prefix: the round commits x1 alone after a rejection (mass [p1 − q1]+ =
    (0, ¼, 0)), or x1 then the bonus after an acceptance."""
    law = round_law(HAND_CASE, LN2, "per_prefix", 1, list(HAND_CASE.prompt))
    assert law[(B,)] == pytest.approx(0.25, abs=1e-9)
    assert (A,) not in law and (C,) not in law
    assert law[(B, B)] == pytest.approx(0.25 / 3, abs=1e-9)  # accepted B (¼), bonus B ⅓
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)


def test_without_penalties_every_rule_is_the_target():
    for rule in PENALTY_RULES:
        law = output_law(HAND_CASE, PenaltyConfig(), rule, 2, 2)
        ref = target_law(HAND_CASE, PenaltyConfig(), 2)
        assert max(abs(law.get(k, 0.0) - v) for k, v in ref.items()) < 1e-12
    assert two_token_tv(HAND_CASE, PenaltyConfig()) == 0.0


def test_bad_sizes_are_refused():
    for gamma, n in ((0, 2), (4, 2), (2, 1), (2, 4)):
        with pytest.raises(RuleInputError):
            compare_penalty_rules(HAND_CASE, LN2, gamma, n)
