"""The rules, against hand-worked numbers, exact enumeration and properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from conftest import TEXTBOOK
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specdec_core.core.sampling import one_hot, tv_distance
from specdec_core.rules.acceptance import (
    acceptance_probability,
    acceptance_total,
    accepted_token_distribution,
    final_distribution,
    residual_distribution,
    verify_greedy,
    verify_sampling,
)

T = torch.float64


def t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=T)


@pytest.mark.parametrize("case", TEXTBOOK["distribution_cases"], ids=lambda c: c["name"])
def test_textbook_distribution_cases(case):
    p, q = t(case["p"]), t(case["q"])
    assert acceptance_total(p, q).item() == pytest.approx(case["acceptance_total"], abs=1e-9)
    if "min_pq" in case:
        assert torch.allclose(torch.minimum(p, q), t(case["min_pq"]), atol=1e-9)
    if "rejection_total" in case:
        rejection = (p - q).clamp_min(0).sum().item()
        assert rejection == pytest.approx(case["rejection_total"], abs=1e-9)
    if "tv_distance" in case:
        assert tv_distance(p, q).item() == pytest.approx(case["tv_distance"], abs=1e-9)
    residual = residual_distribution(p, q)
    if "residual" in case:
        assert torch.allclose(residual, t(case["residual"]), atol=1e-9)
    if case["acceptance_total"] == 1.0:
        assert residual is None  # 0/0 is never evaluated
    assert torch.allclose(final_distribution(p, q), t(case["final_correct_rule"]), atol=1e-9)
    if "final_resample_from_p_rule" in case:
        wrong = final_distribution(p, q, resample_from="target")
        assert torch.allclose(wrong, t(case["final_resample_from_p_rule"]), atol=1e-9)
    if "drafted" in case:
        y = case["drafted"]
        a = acceptance_probability(p[y].item(), q[y].item())
        assert a == pytest.approx(case["accept_prob_of_drafted"], abs=1e-9)


def test_accepted_tokens_alone_are_not_p():
    p, q = t([0.6, 0.3, 0.1]), t([0.2, 0.5, 0.3])
    # min(p, q) / A = [.2, .3, .1] / .6
    assert torch.allclose(accepted_token_distribution(p, q), t([1 / 3, 0.5, 1 / 6]), atol=1e-12)


def test_zero_q_for_proposed_token_is_an_error():
    with pytest.raises(ValueError, match="q\\(y\\)"):
        acceptance_probability(0.5, 0.0)


@pytest.mark.parametrize("case", TEXTBOOK["greedy_cases"], ids=lambda c: c["name"])
def test_textbook_greedy_cases(case):
    gamma, vocab = case["gamma"], 10
    target_argmax = torch.arange(gamma + 1) + 1  # target wants 1, 2, 3, ...
    drafts = target_argmax[:gamma].clone()
    if case["first_mismatch"] is not None:
        drafts[case["first_mismatch"] - 1] = 0  # mismatch at that position
    verdict = verify_greedy(drafts, one_hot(target_argmax, vocab))
    assert verdict.accepted == case["accepted"]
    assert verdict.kind == case["kind"]
    assert verdict.next_token == int(target_argmax[verdict.accepted])
    discarded = gamma - verdict.accepted - (1 if verdict.kind == "correction" else 0)
    assert discarded == case["discarded"]
    assert verdict.accepted + case["appended"] == case["advanced"]


# ------------------------------------------------------------- exact enumeration


def _rows(rng: np.random.Generator, vocab: int, sparse: bool) -> torch.Tensor:
    row = rng.dirichlet(np.ones(vocab) * 0.7)
    if sparse:  # zero out some mass: drafts where the target has none, and vice versa
        row[rng.random(vocab) < 0.3] = 0.0
        if row.sum() == 0:
            row[0] = 1.0
        row /= row.sum()
    return torch.tensor(row, dtype=T)


def _tables(seed: int, vocab: int, gamma: int, draft_kind: str):
    """p(·|prefix) and q(·|prefix) for every prefix of length ≤ γ (context-dependent)."""
    rng = np.random.default_rng(seed)
    p_tab, q_tab = {}, {}
    for length in range(gamma + 1):
        for prefix in itertools.product(range(vocab), repeat=length):
            p_tab[prefix] = _rows(rng, vocab, sparse=seed % 2 == 0)
            if draft_kind == "one-hot":
                q_tab[prefix] = one_hot(torch.tensor(int(rng.integers(vocab))), vocab).to(T)
            else:
                q_tab[prefix] = _rows(rng, vocab, sparse=seed % 3 == 0)
    return p_tab, q_tab


def _round_distribution(p_tab, q_tab, vocab, gamma, resample_from="residual"):
    """Exact P(first γ+1 output tokens) when a speculative round is followed by plain
    sampling from p (what later rounds do, by induction), using the engine's formulas."""
    out: dict[tuple, float] = {}

    def add(seq: tuple, prob: float) -> None:
        if len(seq) == gamma + 1:
            out[seq] = out.get(seq, 0.0) + prob
            return
        for x in range(vocab):  # later tokens come from p itself
            px = p_tab[seq][x].item() if len(seq) <= gamma else 0.0
            if px > 0:
                add(seq + (x,), prob * px)

    def draft(prefix: tuple, prob: float) -> None:
        i = len(prefix)
        if i == gamma:  # all accepted: bonus from p_{γ+1}
            for x in range(vocab):
                px = p_tab[prefix][x].item()
                if px > 0:
                    add(prefix + (x,), prob * px)
            return
        p, q = p_tab[prefix], q_tab[prefix]
        for y in range(vocab):
            qy = q[y].item()
            if qy == 0:
                continue
            a = acceptance_probability(p[y].item(), qy)
            if a > 0:
                draft(prefix + (y,), prob * qy * a)
            if a < 1:
                if resample_from == "residual":
                    r = residual_distribution(p, q)
                else:
                    r = p
                for x in range(vocab):
                    if r[x] > 0:
                        add(prefix + (x,), prob * qy * (1 - a) * r[x].item())

    draft((), 1.0)
    return out


def _target_distribution(p_tab, vocab, gamma):
    out = {}
    for seq in itertools.product(range(vocab), repeat=gamma + 1):
        prob = 1.0
        for i in range(gamma + 1):
            prob *= p_tab[seq[:i]][seq[i]].item()
        if prob > 0:
            out[seq] = prob
    return out


def _max_diff(a: dict, b: dict) -> float:
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


@pytest.mark.parametrize(
    ("vocab", "gamma", "seed"), [(3, 1, 0), (4, 2, 1), (5, 2, 2), (3, 3, 3), (8, 1, 4), (4, 3, 6)]
)
@pytest.mark.parametrize("draft_kind", ["probabilistic", "one-hot"])
def test_enumeration_output_equals_p(vocab, gamma, seed, draft_kind):
    p_tab, q_tab = _tables(seed, vocab, gamma, draft_kind)
    got = _round_distribution(p_tab, q_tab, vocab, gamma)
    want = _target_distribution(p_tab, vocab, gamma)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)
    assert _max_diff(got, want) < 1e-12


@pytest.mark.parametrize(("vocab", "gamma", "seed"), [(3, 1, 1), (4, 2, 5), (5, 1, 7)])
def test_enumeration_resample_from_p_is_biased(vocab, gamma, seed):
    p_tab, q_tab = _tables(seed, vocab, gamma, "probabilistic")
    got = _round_distribution(p_tab, q_tab, vocab, gamma, resample_from="target")
    want = _target_distribution(p_tab, vocab, gamma)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)
    assert _max_diff(got, want) > 1e-3


def test_verify_sampling_matches_enumeration_statistically():
    """The fast rule (``verify_sampling``) against the slow exact enumeration: the first
    emitted token follows p_1, and the accepted length has the exact law."""
    from scipy.stats import chisquare

    vocab, gamma, n = 4, 2, 20000
    p_tab, q_tab = _tables(11, vocab, gamma, "probabilistic")
    gen = torch.Generator().manual_seed(0)
    counts = np.zeros(vocab)
    drafts_gen = torch.Generator().manual_seed(1)
    for _ in range(n):
        prefix: tuple = ()
        ids, q_rows, p_rows = [], [], []
        for _i in range(gamma):
            q = q_tab[prefix].float()
            y = int(torch.multinomial(q, 1, generator=drafts_gen))
            ids.append(y)
            q_rows.append(q)
            p_rows.append(p_tab[prefix].float())
            prefix += (y,)
        p_rows.append(p_tab[prefix].float())
        v = verify_sampling(torch.tensor(ids), torch.stack(q_rows), torch.stack(p_rows), gen)
        first = ids[0] if v.accepted > 0 else v.next_token
        counts[first] += 1
    expected = p_tab[()].numpy() * n
    keep = expected > 0
    assert counts[~keep].sum() == 0
    assert chisquare(counts[keep], expected[keep]).pvalue > 1e-3


# ------------------------------------------------------------- properties

probs = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8).filter(lambda x: sum(x) > 0.01)


def _norm(x):
    v = torch.tensor(x, dtype=T)
    return v / v.sum()


@settings(max_examples=200, deadline=None)
@given(probs, probs)
def test_residual_properties(p_raw, q_raw):
    n = min(len(p_raw), len(q_raw))
    assume(sum(p_raw[:n]) > 0.01 and sum(q_raw[:n]) > 0.01)  # cut to n, still distributions
    p, q = _norm(p_raw[:n]), _norm(q_raw[:n])
    r = residual_distribution(p, q)
    if r is None:
        assert torch.allclose(p, q, atol=1e-12)
        return
    assert (r >= 0).all()
    assert r.sum().item() == pytest.approx(1.0, abs=1e-9)
    assert (r[q >= p] == 0).all()
    assert torch.allclose(final_distribution(p, q), p, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(probs, st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_identical_distributions_always_accept(p_raw, gamma, seed):
    p = _norm(p_raw).float()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.multinomial(p, gamma, replacement=True, generator=gen)
    rows = p.expand(gamma, -1)
    v = verify_sampling(ids, rows, p.expand(gamma + 1, -1), gen)
    assert v.accepted == gamma and v.kind == "bonus"
    assert all(a == 1.0 for a in v.accept_probs)
    assert 0 <= v.next_token < p.shape[0] and p[v.next_token] > 0
