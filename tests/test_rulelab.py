"""The acceptance-rule lab engine: textbook numbers, seeded χ² verdicts, temperature and
real-model rows. (The vectorised sampler it runs is tested in test_acceptance_batch.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TEXTBOOK
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec_core.core.errors import RuleInputError
from specdec_core.core.slices import dist_slice
from specdec_core.core.trace import TokenInfo
from specdec_core.rules.lab.exact import RULES, compare_rules, decompose
from specdec_core.rules.lab.montecarlo import DEFAULT_N, MAX_N, chi_square, monte_carlo
from specdec_core.rules.lab.rows import (
    MAX_TOKENS,
    PAD_WEIGHT,
    PRESETS,
    normalise,
    resize,
    rows_from_slice,
)
from specdec_core.rules.lab.temperature import (
    TEMPERATURE_GRID,
    acceptance_at,
    acceptance_curve,
    temper,
)

CASES = {c["name"]: c for c in TEXTBOOK["distribution_cases"]}
TEXTBOOK_P, TEXTBOOK_Q = CASES["textbook three-token example"]["p"], [0.2, 0.5, 0.3]


def close(a, b, tol: float = 1e-9) -> bool:
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol, rtol=0)


# ------------------------------------------------------------- exact numbers (1e-9)


@pytest.mark.parametrize("case", TEXTBOOK["distribution_cases"], ids=lambda c: c["name"])
def test_textbook_cases_through_the_lab(case):
    p, q = normalise(case["p"]), normalise(case["q"], "q")
    d = decompose(p, q)
    assert d.acceptance == pytest.approx(case["acceptance_total"], abs=1e-9)
    assert d.one_minus_tv == pytest.approx(case["acceptance_total"], abs=1e-9)
    assert d.beta == pytest.approx(1 - case["acceptance_total"], abs=1e-9)
    assert d.excess_total == pytest.approx(d.beta, abs=1e-9)
    assert close(d.reconstructed, p)  # min(p, q) + [p − q]+ = p, token by token
    if "min_pq" in case:
        assert close(d.min_pq, case["min_pq"])
    if "rejection_total" in case:
        assert d.beta == pytest.approx(case["rejection_total"], abs=1e-9)
    if "tv_distance" in case:
        assert d.tv == pytest.approx(case["tv_distance"], abs=1e-9)
    if "residual" in case:
        assert close(d.residual, case["residual"])
    if case["acceptance_total"] == 1.0:
        assert d.residual is None
    rules = compare_rules(p, q, one_hot_token=0)
    assert close(rules["correct"].final, case["final_correct_rule"])
    assert rules["correct"].tv_to_p == pytest.approx(0.0, abs=1e-9)
    if "final_resample_from_p_rule" in case:
        assert close(rules["resample_p"].final, case["final_resample_from_p_rule"])


def test_textbook_three_rules():
    p, q = normalise(TEXTBOOK_P), normalise(TEXTBOOK_Q)
    rules = compare_rules(p, q, one_hot_token=1)  # the one-hot draft proposes token 2
    assert close(rules["correct"].final, [0.6, 0.3, 0.1])
    assert close(rules["resample_p"].final, [0.44, 0.42, 0.14])
    assert rules["resample_p"].tv_to_p == pytest.approx(0.16, abs=1e-9)
    assert close(rules["one_hot"].final, [0.6, 0.3, 0.1])  # exactly p …
    assert rules["one_hot"].acceptance == pytest.approx(0.3, abs=1e-9)  # … at A = p(y)
    assert rules["one_hot"].tv_to_p == pytest.approx(0.0, abs=1e-9)
    assert rules["correct"].acceptance == pytest.approx(0.6, abs=1e-9)
    one_hot_case = CASES["one-hot draft proposes token 1"]
    assert close(decompose(p, normalise(one_hot_case["q"])).residual, one_hot_case["residual"])
    assert close(decompose(p, q).accepted_only, [1 / 3, 0.5, 1 / 6])


def test_presets_match_the_textbook_file():
    for preset, case in [
        ("textbook", "textbook three-token example"),
        ("identical", "identical distributions never reject"),
        ("forbidden", "drafted token the target forbids"),
        ("one_hot", "one-hot draft proposes token 1"),
    ]:
        assert close(PRESETS[preset].p, CASES[case]["p"])
        assert close(PRESETS[preset].q, CASES[case]["q"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 10), min_size=3, max_size=8).filter(lambda w: sum(w) > 1e-3),
    st.data(),
)
def test_correct_and_one_hot_rules_are_lossless(p_w, data):
    n = len(p_w)
    q_w = data.draw(
        st.lists(st.floats(0, 10), min_size=n, max_size=n).filter(lambda w: sum(w) > 1e-3)
    )
    y = data.draw(st.integers(0, n - 1))
    p, q = normalise(p_w), normalise(q_w)
    rules = compare_rules(p, q, y)
    assert close(rules["correct"].final, p, 1e-12)
    assert close(rules["one_hot"].final, p, 1e-12)
    assert rules["one_hot"].acceptance == pytest.approx(p[y], abs=1e-12)
    d = decompose(p, q)
    assert close(d.reconstructed, p, 1e-12)
    assert d.acceptance == pytest.approx(d.one_minus_tv, abs=1e-12)


@pytest.mark.parametrize(
    ("weights", "code"),
    [
        ([1, 2], "n_tokens"),
        ([1] * 9, "n_tokens"),
        ([1, -1, 2], "negative"),
        ([0, 0, 0], "no_mass"),
        ([1, None, 2], "not_a_number"),
        ([1, float("nan"), 2], "not_a_number"),
    ],
)
def test_normalise_errors(weights, code):
    with pytest.raises(RuleInputError) as info:
        normalise(weights, "q")
    assert info.value.code == code


def test_normalise_and_resize():
    assert close(normalise([3, 1, 0, 4]), [0.375, 0.125, 0.0, 0.5], 1e-15)
    names, p, q = resize(["a", "b", "c"], [1, 2, 3], [3, 2, 1], 5)
    assert names == ["a", "b", "c", "t4", "t5"] and p[3:] == [PAD_WEIGHT] * 2
    assert resize(names, p, q, 3) == (["a", "b", "c"], [1, 2, 3], [3, 2, 1])
    with pytest.raises(RuleInputError):
        resize(names, p, q, 9)


# ------------------------------------------------------------- seeded Monte Carlo verdicts


@pytest.mark.parametrize("preset", list(PRESETS))
def test_monte_carlo_verdicts_at_default_n_and_seed(preset):
    """What the page shows at the default N and sidebar seed 0: the correct and one-hot
    rules pass χ² against p, the wrong rule fails it whenever it differs from p."""
    pr = PRESETS[preset]
    p, q = normalise(pr.p), normalise(pr.q)
    exact = compare_rules(p, q, pr.one_hot_token)
    runs = {rule: monte_carlo(p, q, rule, seed=0, one_hot_token=pr.one_hot_token) for rule in RULES}
    assert runs["correct"].n == DEFAULT_N
    assert runs["correct"].fit.p_value > 0.01
    assert runs["one_hot"].fit.p_value > 0.01
    if exact["resample_p"].tv_to_p > 1e-12:
        assert runs["resample_p"].fit.p_value < 1e-6
    else:  # identical rows: β = 0, the wrong rule is never exercised
        assert runs["resample_p"].fit.p_value > 0.01
    for rule in RULES:
        se = np.sqrt(exact[rule].acceptance * (1 - exact[rule].acceptance) / DEFAULT_N)
        assert abs(runs[rule].acceptance_rate - exact[rule].acceptance) <= 5 * se + 1e-12
        assert runs[rule].counts.sum() == DEFAULT_N


def test_monte_carlo_is_seeded_chunked_and_reports_progress():
    p, q = normalise(TEXTBOOK_P), normalise(TEXTBOOK_Q)
    ticks: list[float] = []
    a = monte_carlo(p, q, "correct", n=50_000, seed=3, progress=ticks.append)
    b = monte_carlo(p, q, "correct", n=50_000, seed=3)
    c = monte_carlo(p, q, "correct", n=50_000, seed=4)
    assert ticks == [0.4, 0.8, 1.0]
    assert (a.counts == b.counts).all() and (a.counts != c.counts).any()
    assert close(a.stderr, np.sqrt(a.freq * (1 - a.freq) / 50_000), 1e-15)
    with pytest.raises(RuleInputError):
        monte_carlo(p, q, "correct", n=MAX_N + 1)


def test_accepted_drafts_follow_min_over_a_not_p():
    p, q = normalise(TEXTBOOK_P), normalise(TEXTBOOK_Q)
    run = monte_carlo(p, q, "correct", seed=0)
    assert run.accepted_fit is not None and run.accepted_fit.p_value > 0.01
    assert run.accepted_vs_p.p_value < 1e-6
    assert run.n_accepted == run.accepted_counts.sum()
    # A = 0: nothing is ever accepted
    none = monte_carlo(np.array([1.0, 0, 0]), np.array([0, 0.5, 0.5]), "correct", n=1000)
    assert none.n_accepted == 0 and none.accepted_fit is None and none.fit.p_value > 0.01


def test_chi_square_zero_probability_categories():
    ok = chi_square(np.array([0, 70, 30]), np.array([0.0, 0.7, 0.3]))
    assert ok.impossible == 0 and ok.dof == 1 and ok.p_value == pytest.approx(1.0)
    bad = chi_square(np.array([1, 69, 30]), np.array([0.0, 0.7, 0.3]))
    assert bad.impossible == 1 and bad.p_value == 0.0 and not bad.consistent
    single = chi_square(np.array([0, 50, 0]), np.array([0.0, 1.0, 0.0]))
    assert single.p_value == 1.0 and single.dof == 0


# ------------------------------------------------------------- temperature


def test_temperature():
    p, q = normalise(TEXTBOOK_P), normalise(TEXTBOOK_Q)
    assert close(temper(p, 1.0), p, 1e-6)
    assert close(temper(p, 0.0), [1, 0, 0], 0)  # greedy: one-hot on the argmax
    forbidden = normalise([0.0, 0.7, 0.3])
    for temp in (0.3, 1.0, 2.5):
        assert temper(forbidden, temp)[0] == 0.0  # zero stays zero
        assert temper(forbidden, temp).sum() == pytest.approx(1.0, abs=1e-12)
    assert acceptance_at(p, q, 0.0) == 0.0  # argmaxes differ (t1 vs t2)
    assert acceptance_at(p, q, 1.0) == pytest.approx(0.6, abs=1e-6)
    curve = acceptance_curve(p, q)
    assert curve.shape == TEMPERATURE_GRID.shape and TEMPERATURE_GRID[0] == 0.0
    assert curve[0] == 0.0 and curve[-1] > 0.85  # flattening towards uniform: A → 1
    assert acceptance_at(p, p, 0.0) == 1.0


# ------------------------------------------------------------- rows from a model position


def test_rows_from_slice_top_tokens_plus_other():
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(50, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(50, generator=gen) * 2, -1)
    dist = dist_slice(p, q, [7], 8, lambda i: TokenInfo(i, f"w{i}", f"w{i}"))
    rows = rows_from_slice(dist)
    assert len(rows.tokens) == MAX_TOKENS - 1 and rows.p.shape == (MAX_TOKENS,)
    assert rows.p.sum() == pytest.approx(1.0, abs=1e-12)
    assert rows.q.sum() == pytest.approx(1.0, abs=1e-12)
    ids = [tok.id for tok in rows.tokens]
    assert close(rows.p[:-1], p[ids].numpy(), 1e-6)  # named tokens keep their mass
    assert rows.p[-1] == pytest.approx(1 - float(p[ids].sum()), abs=1e-6)
    full_a = float(torch.minimum(p, q).sum())
    assert rows.true_acceptance == pytest.approx(full_a, abs=1e-5)
    assert decompose(rows.p, rows.q).acceptance >= full_a - 1e-6  # lumping only raises A
    unlikely = int(torch.argmin(p))  # a drafted token far down p is still named
    kept = rows_from_slice(
        dist_slice(p, q, [unlikely], 8, lambda i: TokenInfo(i, "", "")), keep=[unlikely]
    )
    assert unlikely in [tok.id for tok in kept.tokens] and len(kept.tokens) == 7
    assert kept.p[[tok.id for tok in kept.tokens].index(unlikely)] == pytest.approx(
        float(p[unlikely]), abs=1e-7
    )
    with pytest.raises(RuleInputError):
        rows_from_slice(dist_slice(p, None, [], 8, lambda i: TokenInfo(i, "", "")))
