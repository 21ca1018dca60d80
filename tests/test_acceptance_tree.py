"""The multi-candidate (tree node) rule: exact enumeration over small vocabularies shows the
output equals p; the naive "any sibling accepted by min(1, p/q)" rule is biased, with its
exact numbers; sampling agrees with the exact distribution."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specdec_core.core.sampling import one_hot
from specdec_core.rules.acceptance import node_output_distribution, node_steps, verify_node

T = torch.float64


def _row(rng: np.random.Generator, vocab: int, sparse: bool) -> torch.Tensor:
    row = rng.dirichlet(np.ones(vocab) * 0.7)
    if sparse:
        row[rng.random(vocab) < 0.3] = 0.0
        row = row if row.sum() > 0 else np.eye(vocab)[0]
        row = row / row.sum()
    return torch.tensor(row, dtype=T)


def _output(p: torch.Tensor, q: torch.Tensor, k: int, rule: str) -> torch.Tensor:
    """Average the node's exact output over k children drawn i.i.d. from q."""
    vocab = p.shape[0]
    out = torch.zeros(vocab, dtype=T)
    for kids in itertools.product(range(vocab), repeat=k):
        weight = float(np.prod([q[x].item() for x in kids]))
        if weight > 0:
            out += weight * node_output_distribution(p, q, kids, rule)
    return out


@pytest.mark.parametrize("vocab", [2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("draft", ["probabilistic", "one-hot"])
def test_enumeration_output_equals_p(vocab, k, seed, draft):
    rng = np.random.default_rng(seed)
    p = _row(rng, vocab, sparse=seed % 2 == 0)
    q = _row(rng, vocab, sparse=seed % 3 == 0)
    if draft == "one-hot":
        q = one_hot(torch.tensor(int(rng.integers(vocab))), vocab).to(T)
    assert torch.allclose(_output(p, q, k, "residual"), p, atol=1e-9)


def test_naive_sibling_rule_is_biased_with_exact_numbers():
    p = torch.tensor([0.6, 0.3, 0.1], dtype=T)
    q = torch.tensor([0.2, 0.5, 0.3], dtype=T)
    assert torch.allclose(_output(p, q, 1, "naive"), p, atol=1e-12)  # one child: the chain rule
    naive = _output(p, q, 2, "naive")
    # min(p, q)·(1 + β) + β²·r with min = [.2, .3, .1], β = .4, r = [1, 0, 0]
    assert torch.allclose(naive, torch.tensor([0.44, 0.42, 0.14], dtype=T), atol=1e-12)
    assert torch.allclose(_output(p, q, 2, "residual"), p, atol=1e-12)
    assert 0.5 * (naive - p).abs().sum() == pytest.approx(0.16)


def test_node_steps_follow_the_residual_chain():
    p = torch.tensor([0.6, 0.3, 0.1], dtype=T)
    q = torch.tensor([0.2, 0.5, 0.3], dtype=T)
    steps = node_steps(p, q, [1, 1])
    # sibling 1: min(1, .3/.5) = .6; then p₂ = norm([p − q]+) = [1, 0, 0]: sibling 2 → 0
    assert steps.accept_probs == pytest.approx((0.6, 0.0))
    assert torch.allclose(steps.targets[1], torch.tensor([1.0, 0, 0], dtype=T))
    with pytest.raises(ValueError, match="q\\(x\\)"):
        node_steps(p, torch.tensor([0.5, 0.5, 0.0], dtype=T), [2])


def test_sampling_agrees_with_the_exact_distribution():
    p = torch.tensor([0.5, 0.2, 0.2, 0.1])
    q = torch.tensor([0.1, 0.4, 0.3, 0.2])
    gen = torch.Generator().manual_seed(0)
    counts = np.zeros(4)
    n = 6000
    for _ in range(n):
        kids = torch.multinomial(q, 2, replacement=True, generator=gen).tolist()
        counts[verify_node(p, q, kids, gen).token] += 1
    assert chisquare(counts, p.numpy() * n).pvalue > 1e-3
