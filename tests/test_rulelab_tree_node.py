"""The lab's tree-node section engine (several sibling candidates at one node): the residual
rule gives exactly p for every k, the naive rule's exact, biased numbers and closed form."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_core.core.errors import RuleInputError
from specdec_core.rules.lab.tree_node import node_rules

P = np.array([0.6, 0.3, 0.1])
Q = np.array([0.2, 0.5, 0.3])


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_residual_rule_is_exactly_p(k):
    res = node_rules(P, Q, k)["residual"]
    np.testing.assert_allclose(res.final, P, atol=1e-12)
    assert res.tv_to_p == pytest.approx(0.0, abs=1e-12)
    assert res.k == k


def test_naive_rule_textbook_numbers():
    one = node_rules(P, Q, 1)
    np.testing.assert_allclose(one["naive"].final, P, atol=1e-12)  # k = 1: the chain rule
    assert one["naive"].accept_prob == pytest.approx(0.6, abs=1e-12)  # A = Σ min(p, q)
    assert one["residual"].accept_prob == pytest.approx(0.6, abs=1e-12)
    two = node_rules(P, Q, 2)["naive"]
    np.testing.assert_allclose(two.final, [0.44, 0.42, 0.14], atol=1e-12)
    assert two.tv_to_p == pytest.approx(0.16, abs=1e-12)
    assert two.accept_prob == pytest.approx(1 - 0.4**2, abs=1e-12)  # 1 − β^k


@pytest.mark.parametrize("k", [2, 3, 4])
def test_naive_rule_closed_form(k):
    # min(p, q)·(1 + β + … + β^{k−1}) + β^k·r with min = [.2, .3, .1], β = .4, r = [1, 0, 0]
    beta, min_pq, r = 0.4, np.array([0.2, 0.3, 0.1]), np.array([1.0, 0.0, 0.0])
    closed = min_pq * sum(beta**i for i in range(k)) + beta**k * r
    naive = node_rules(P, Q, k)["naive"]
    np.testing.assert_allclose(naive.final, closed, atol=1e-12)
    if k == 3:
        np.testing.assert_allclose(naive.final, [0.376, 0.468, 0.156], atol=1e-12)
        assert naive.tv_to_p == pytest.approx(0.224, abs=1e-12)


def test_residual_accept_prob_k2_by_hand():
    # x1 accepted w.p. A = .6; after a rejection p₂ = r = [1, 0, 0], and x2 ~ q is accepted
    # only if it is t1 (min(1, 1/.2) = 1): .4 · .2 = .08 more
    assert node_rules(P, Q, 2)["residual"].accept_prob == pytest.approx(0.68, abs=1e-12)


def test_one_hot_draft_and_random_rows():
    one_hot = np.array([0.0, 1.0, 0.0])  # greedy draft: the k siblings are all t2
    res = node_rules(P, one_hot, 3)
    np.testing.assert_allclose(res["residual"].final, P, atol=1e-12)
    # naive: t2 accepted w.p. .3 three times, else r = [.6, 0, .1]/.7: .3·(1 + .7 + .49) = .657
    np.testing.assert_allclose(res["naive"].final, [0.294, 0.657, 0.049], atol=1e-12)
    rng = np.random.default_rng(3)
    for v in (3, 8):
        p, q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
        np.testing.assert_allclose(node_rules(p, q, 3)["residual"].final, p, atol=1e-9)


@pytest.mark.parametrize(
    ("p", "q", "k", "code"),
    [
        (P, Q, 0, "bad_value"),
        (P, Q, 5, "bad_value"),
        (P, Q, 2.0, "bad_value"),
        (P, Q, True, "bad_value"),
        ([0.5, 0.5], [0.5, 0.5], 1, "n_tokens"),
        (np.ones(9) / 9, np.ones(9) / 9, 1, "n_tokens"),
        (P, [0.25, 0.25, 0.25, 0.25], 1, "n_tokens"),
        ([0.6, np.nan, 0.4], Q, 1, "not_a_number"),
        ([1.2, -0.3, 0.1], Q, 1, "negative"),
        ([6, 3, 1], Q, 1, "not_probability"),
    ],
)
def test_bad_input(p, q, k, code):
    with pytest.raises(RuleInputError) as info:
        node_rules(p, q, k)
    assert info.value.code == code
