"""The vectorised rule (``acceptance_batch``) against the scalar rule in ``acceptance``:
decision by decision on random rows, the rejection row, and the law of emitted tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency

from specdec_core.rules.acceptance import (
    acceptance_probability,
    final_distribution,
    residual_distribution,
    verify_sampling,
)
from specdec_core.rules.batch import accept_mask, rejection_source, sample_position
from specdec_core.rules.lab.montecarlo import chi_square


def random_rows(gen: torch.Generator, v: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two float64 rows ``[V]`` with some exact zeros (forbidden tokens) in each."""
    p, q = (
        torch.softmax(torch.randn(v, generator=gen, dtype=torch.float64) * 2, -1) for _ in range(2)
    )
    p, q = p * (torch.rand(v, generator=gen) > 0.2), q * (torch.rand(v, generator=gen) > 0.2)
    q[int(torch.argmax(p))] += 0.05  # q has mass somewhere, p too
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("seed", range(20))
def test_accept_mask_equals_the_scalar_rule_on_random_rows(seed):
    gen = torch.Generator().manual_seed(seed)
    p, q = random_rows(gen, v=3 + seed % 6)
    y = torch.multinomial(q, 500, replacement=True, generator=gen)  # q(y) > 0
    u = torch.rand(500, generator=gen, dtype=torch.float64)
    pairs = zip(y.tolist(), u.tolist(), strict=True)
    scalar = [ui < acceptance_probability(float(p[yi]), float(q[yi])) for yi, ui in pairs]
    assert accept_mask(p, q, y, u).tolist() == scalar


@pytest.mark.parametrize("seed", range(20))
def test_rejection_source_is_the_residual_or_p(seed):
    p, q = random_rows(torch.Generator().manual_seed(seed), v=3 + seed % 6)
    assert torch.equal(rejection_source(p, q), residual_distribution(p, q))
    assert torch.equal(rejection_source(p, q, "target"), p)
    assert torch.equal(rejection_source(p, p.clone()), p)  # [p − q]+ has no mass


def test_accept_decisions_agree_with_verify_sampling_draw_by_draw():
    """Slow reference loop: run ``verify_sampling`` (γ = 1) 3000 times, record the y it
    was given and the u it drew, and check the vectorised ``accept_mask`` takes the same
    decision on exactly those (y, u)."""
    p = torch.tensor([0.0, 0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    q = torch.tensor([0.3, 0.1, 0.3, 0.3, 0.0], dtype=torch.float64)
    gen, drafts = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)
    ys, us, accepted = [], [], []
    for _ in range(3000):
        y = torch.multinomial(q, 1, generator=drafts)
        v = verify_sampling(y, q[None], torch.stack([p, p]), gen)
        ys.append(int(y)), us.append(v.u[0]), accepted.append(v.accepted == 1)
    mask = accept_mask(p, q, torch.tensor(ys), torch.tensor(us, dtype=torch.float64))
    assert mask.tolist() == accepted
    assert 0 < sum(accepted) < 3000


@pytest.mark.parametrize("resample_from", ["residual", "target"])
def test_sampler_has_the_same_law_as_verify_sampling(resample_from):
    """Emitted tokens of the slow reference loop and of the vectorised sampler: a
    two-sample χ² test of homogeneity, and both against the exact law."""
    p = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
    q = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    n = 4000
    gen, drafts = torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)
    slow = np.zeros(3, dtype=np.int64)
    for _ in range(n):
        y = torch.multinomial(q, 1, generator=drafts)
        v = verify_sampling(y, q[None], torch.stack([p, p]), gen, resample_from=resample_from)
        slow[int(y) if v.accepted == 1 else v.next_token] += 1
    tokens, _ = sample_position(p, q, n, torch.Generator().manual_seed(13), resample_from)
    fast = np.bincount(tokens.numpy(), minlength=3)
    assert chi2_contingency(np.stack([slow, fast])).pvalue > 0.01
    exact = final_distribution(p, q, resample_from=resample_from).numpy()
    assert chi_square(slow, exact).consistent and chi_square(fast, exact).consistent


def test_sampler_uses_p_when_residual_undefined_and_never_emits_forbidden_tokens():
    p = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    tokens, accepted = sample_position(p, p.clone(), 5000, torch.Generator().manual_seed(0))
    assert bool(accepted.all())  # p == q: u < 1 always
    forbidden = torch.tensor([0.0, 0.7, 0.3], dtype=torch.float64)
    q = torch.tensor([0.5, 0.4, 0.1], dtype=torch.float64)
    tokens, accepted = sample_position(forbidden, q, 5000, torch.Generator().manual_seed(0))
    assert int((tokens == 0).sum()) == 0 and 0 < int(accepted.sum()) < 5000
