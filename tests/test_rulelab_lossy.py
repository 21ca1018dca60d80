"""The rule lab's lossy rules (rules/lab/lossy.py): exact final distributions of typical
and threshold acceptance on hand-made rows, their TV to p, and the exact rule = p."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec_core.core.errors import RuleInputError
from specdec_core.rules.lab.lossy import (
    LOSSY_RULES,
    LossyRules,
    accept_set,
    check_lossy,
    compare_lossy,
    entropy_nats,
    lossy_sweep,
    typical_threshold,
)
from specdec_core.rules.lab.rows import PRESETS, normalise

TEXTBOOK = ([0.6, 0.3, 0.1], [0.2, 0.5, 0.3])
FORBIDDEN = ([0.0, 0.7, 0.3], [0.5, 0.4, 0.1])
IDENTICAL = ([0.25, 0.25, 0.5], [0.25, 0.25, 0.5])
TIE = ([0.4, 0.4, 0.2], [0.2, 0.2, 0.6])

# (rows, rule, δ, ε, top-k, accept set, final distribution, TV to p, P(accept))
CASES = [
    # bar min(0.09, 0.3·e^−0.898 = 0.122) = 0.09 < 0.1: every token passes, the output is q
    (TEXTBOOK, "typical", 0.3, 0.09, 1, [1, 1, 1], [0.2, 0.5, 0.3], 0.4, 1.0),
    # ε = 0.2: the bar is 0.3·e^−H = 0.122, t3 (0.1) fails: 0.3 of q is redrawn from p
    (TEXTBOOK, "typical", 0.3, 0.2, 1, [1, 1, 0], [0.38, 0.59, 0.03], 0.29, 0.7),
    # only t1 has p ≥ 0.5 (and is the top-1): 0.8 of q redrawn from p
    (TEXTBOOK, "threshold", 0.5, 0.09, 1, [1, 0, 0], [0.68, 0.24, 0.08], 0.08, 0.2),
    (TEXTBOOK, "threshold", 0.25, 0.09, 1, [1, 1, 0], [0.38, 0.59, 0.03], 0.29, 0.7),
    # nothing passes: every draft redrawn from p — lossless and never accepting
    (TEXTBOOK, "threshold", 1.0, 0.09, 0, [0, 0, 0], [0.6, 0.3, 0.1], 0.0, 0.0),
    # δ = 0, no top-k: everything p allows passes; a token with p = 0 never does
    (FORBIDDEN, "threshold", 0.0, 0.09, 0, [0, 1, 1], [0.0, 0.75, 0.25], 0.05, 0.5),
    (FORBIDDEN, "typical", 0.3, 0.09, 1, [0, 1, 1], [0.0, 0.75, 0.25], 0.05, 0.5),
    # q = p and still lossy: only the likely t3 passes, the rest is redrawn from p
    (IDENTICAL, "threshold", 0.3, 0.09, 1, [0, 0, 1], [0.125, 0.125, 0.75], 0.25, 0.5),
    # bar min(1, e^−1.0397 = 0.3536): only t3 (0.5) passes
    (IDENTICAL, "typical", 1.0, 1.0, 1, [0, 0, 1], [0.125, 0.125, 0.75], 0.25, 0.5),
    # a tie for the top-1: the lower index ranks first (like the engine's argmax)
    (TIE, "threshold", 1.0, 0.09, 1, [1, 0, 0], [0.52, 0.32, 0.16], 0.12, 0.2),
    (TIE, "threshold", 1.0, 0.09, 2, [1, 1, 0], [0.44, 0.44, 0.12], 0.08, 0.4),
]


@pytest.mark.parametrize(
    "rows, rule, delta, eps, k, accepted, final, tv, acceptance",
    CASES,
    ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)],
)
def test_lossy_case_table(rows, rule, delta, eps, k, accepted, final, tv, acceptance):
    p, q = (np.array(r, dtype=np.float64) for r in rows)
    res = compare_lossy(p, q, LossyRules(delta, eps, k))[rule]
    assert res.accepted.astype(int).tolist() == accepted
    np.testing.assert_allclose(res.final, final, atol=1e-12)
    assert res.tv_to_p == pytest.approx(tv, abs=1e-12)
    assert res.acceptance == pytest.approx(acceptance, abs=1e-12)
    assert res.final.sum() == pytest.approx(1.0, abs=1e-12)


def test_typical_bar_is_medusas_formula():
    p = np.array(TEXTBOOK[0])
    h = -(0.6 * math.log(0.6) + 0.3 * math.log(0.3) + 0.1 * math.log(0.1))
    assert entropy_nats(p) == pytest.approx(h, abs=1e-12)
    assert entropy_nats(np.array([0.0, 1.0, 0.0])) == 0.0  # 0·log 0 = 0
    assert typical_threshold(p, 0.3, 0.2) == pytest.approx(0.3 * math.exp(-h), abs=1e-12)
    assert typical_threshold(p, 0.3, 0.09) == 0.09  # ε caps the bar


@pytest.mark.parametrize("name", list(PRESETS))
def test_exact_rule_is_p_on_every_preset(name):
    pre = PRESETS[name]
    p, q = normalise(pre.p), normalise(pre.q)
    res = compare_lossy(p, q)
    np.testing.assert_allclose(res["exact"].final, p, atol=1e-12)
    assert res["exact"].tv_to_p < 1e-12
    assert res["exact"].acceptance == pytest.approx(np.minimum(p, q).sum(), abs=1e-12)
    assert res["exact"].accepted is None
    assert list(res) == list(LOSSY_RULES)


def test_random_rows_exact_is_p_and_lossy_rules_follow_the_formula():
    rng = np.random.default_rng(7)
    for _ in range(50):
        v = int(rng.integers(3, 9))
        p, q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
        knobs = LossyRules(float(rng.uniform()), float(rng.uniform(0.01, 1)), int(rng.integers(4)))
        res = compare_lossy(p, q, knobs)
        np.testing.assert_allclose(res["exact"].final, p, atol=1e-12)
        for rule in ("typical", "threshold"):
            s = res[rule].accepted
            # the enumeration, written out: accept y ∈ S with prob. 1, else redraw from p
            expected = np.array(
                [q[x] * s[x] + sum(q[y] for y in range(v) if not s[y]) * p[x] for x in range(v)]
            )
            np.testing.assert_allclose(res[rule].final, expected, atol=1e-12)
            assert res[rule].tv_to_p == pytest.approx(0.5 * np.abs(expected - p).sum(), abs=1e-12)


@pytest.mark.parametrize("rule", ["typical", "threshold"])
def test_sweep_acceptance_falls_as_delta_rises(rule):
    p, q = (np.array(r) for r in TEXTBOOK)
    sweep = lossy_sweep(p, q, rule, LossyRules(0.3, 1.0, 0))
    assert len(sweep.deltas) == 41 and sweep.deltas[0] == 0.0 and sweep.deltas[-1] == 1.0
    assert np.all(np.diff(sweep.acceptance) <= 1e-12)
    assert sweep.acceptance[0] == pytest.approx(1.0)  # δ = 0: every token passes: output q
    assert sweep.tv_to_p[0] == pytest.approx(0.4)
    if rule == "threshold":  # δ = 1 and no top-k: nothing passes, the output is p
        assert sweep.acceptance[-1] == 0.0 and sweep.tv_to_p[-1] < 1e-12


@pytest.mark.parametrize(
    "delta, eps, k, code",
    [
        (-0.1, 0.09, 1, "lossy_delta"),
        (1.5, 0.09, 1, "lossy_delta"),
        (float("nan"), 0.09, 1, "lossy_delta"),
        ("0.3", 0.09, 1, "lossy_delta"),
        (True, 0.09, 1, "lossy_delta"),
        (0.3, 0.0, 1, "lossy_epsilon"),
        (0.3, 1.01, 1, "lossy_epsilon"),
        (0.3, float("inf"), 1, "lossy_epsilon"),
        (0.3, 0.09, 2.5, "lossy_top_k"),
        (0.3, 0.09, 9, "lossy_top_k"),
        (0.3, 0.09, -1, "lossy_top_k"),
    ],
)
def test_bad_knobs_are_refused(delta, eps, k, code):
    with pytest.raises(RuleInputError) as info:
        check_lossy(delta, eps, k)
    assert info.value.code == code


def test_good_knobs_and_rules_without_an_accept_set():
    assert check_lossy(0, 1, 8.0) == LossyRules(0.0, 1.0, 8)
    p, q = (np.array(r) for r in TEXTBOOK)
    for rule in ("exact", "bogus"):
        with pytest.raises(RuleInputError) as info:
            accept_set(p, rule, LossyRules())
        assert info.value.code == "lossy_rule"
    with pytest.raises(RuleInputError):
        lossy_sweep(p, q, "exact")
