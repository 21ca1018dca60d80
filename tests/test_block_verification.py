"""Block verification (``rules/block.py``): exact enumeration over small vocabularies
shows the emitted tokens follow the target, never fewer tokens kept in expectation than
token-wise, the paper's {a, b} numbers, greedy equality, and the sampled rule against its
own exact outcome probabilities."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch

from specdec_core.core.sampling import SamplingConfig, logits_to_probs, one_hot
from specdec_core.rules.acceptance import verify_greedy
from specdec_core.rules.block import block_weights, verify_block

D = torch.float64


class Rows:
    """Context-dependent rows: ``p(· | prefix)`` and ``q(· | prefix)`` for every prefix
    inside the block, drawn once from a seeded generator (float64, after ``sampling``).
    ``one_hot_q``: the draft is deterministic (an edit, prompt lookup): its row is one-hot
    at a token that depends on the prefix."""

    def __init__(self, vocab: int, seed: int, sampling: SamplingConfig, one_hot_q: bool = False):
        self.vocab, self.sampling, self.one_hot_q = vocab, sampling, one_hot_q
        self.gen = torch.Generator().manual_seed(seed)
        self.cache: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}

    def row(self, who: str, prefix: tuple[int, ...]) -> torch.Tensor:
        key = (who, prefix)
        if key not in self.cache:
            logits = 2.0 * torch.randn(self.vocab, generator=self.gen, dtype=D)
            if who == "q" and self.one_hot_q:
                self.cache[key] = one_hot(logits.argmax()[None], self.vocab)[0].to(D)
            else:
                row = logits_to_probs(logits[None], self.sampling)[0].to(D)
                self.cache[key] = row / row.sum()  # float32 out: renormalise in float64
        return self.cache[key]

    def p(self, prefix):
        return self.row("p", tuple(prefix))

    def q(self, prefix):
        return self.row("q", tuple(prefix))


def enumerate_round(rows: Rows, gamma: int, rule: str):
    """Exact outcome of one round: ``{emitted tuple: probability}`` and the expected
    number of drafts kept. Every draft block ``y`` with ``Π q_i(y_i) > 0`` is enumerated."""
    out: dict[tuple[int, ...], float] = {}
    expected_kept = 0.0
    for block in itertools.product(range(rows.vocab), repeat=gamma):
        prob = 1.0
        for i in range(gamma):
            prob *= float(rows.q(block[:i])[block[i]])
        if prob == 0.0:
            continue
        ids = torch.tensor(block)
        q = torch.stack([rows.q(block[:i]) for i in range(gamma)])
        p = torch.stack([rows.p(block[:i]) for i in range(gamma + 1)])
        if rule == "block":
            bw = block_weights(ids, q, p)
            keep, res = bw.keep_probs, bw.residuals
        else:  # token-wise: P(keep i) = Π_{j≤i} a_j · (1 − a_{i+1})
            a = [min(1.0, float(p[i, y] / q[i, y])) for i, y in enumerate(block)]
            keep, reach = [], 1.0
            for i in range(gamma + 1):
                keep.append(reach * (1.0 - a[i] if i < gamma else 1.0))
                reach *= a[i] if i < gamma else 0.0
            exc = (p[:gamma] - q).clamp_min(0.0)
            res = torch.cat([exc / exc.sum(-1, keepdim=True).clamp_min(1e-300), p[gamma:]])
        for tau, k in enumerate(keep):
            if k <= 0.0:
                continue
            expected_kept += prob * k * tau
            for z in range(rows.vocab):
                if res[tau, z] > 0.0:
                    key = (*block[:tau], z)
                    out[key] = out.get(key, 0.0) + prob * k * float(res[tau, z])
    return out, expected_kept


def extended(rows: Rows, emitted: dict[tuple[int, ...], float], length: int):
    """The law of the first ``length`` tokens when the target continues each emitted
    tuple (what the next rounds do, in law, if the rule is exact)."""
    law: dict[tuple[int, ...], float] = {}
    for seq, prob in emitted.items():
        for tail in itertools.product(range(rows.vocab), repeat=length - len(seq)):
            full, pr = seq + tail, prob
            for j in range(len(seq), length):
                pr *= float(rows.p(full[:j])[full[j]])
            law[full] = law.get(full, 0.0) + pr
    return law


def target_law(rows: Rows, length: int):
    law = {}
    for seq in itertools.product(range(rows.vocab), repeat=length):
        pr = 1.0
        for j in range(length):
            pr *= float(rows.p(seq[:j])[seq[j]])
        law[seq] = pr
    return law


SAMPLINGS = {
    "T=1": SamplingConfig(1.0, 0, 1.0),
    "T=0.7": SamplingConfig(0.7, 0, 1.0),
    "T=1.3,top-k=3": SamplingConfig(1.3, 3, 1.0),
    "T=1,top-p=0.8": SamplingConfig(1.0, 0, 0.8),
}
CASES = [
    (vocab, gamma, seed, name, one_hot_q)
    for vocab, gammas in ((3, (1, 2, 3, 4)), (4, (1, 2, 3)), (5, (2,)))
    for gamma in gammas
    for seed in (0, 1)
    for name in SAMPLINGS
    for one_hot_q in (False, True)
]


@pytest.mark.parametrize("vocab,gamma,seed,sampling,one_hot_q", CASES)
def test_block_output_follows_the_target_and_keeps_at_least_token_wise(
    vocab, gamma, seed, sampling, one_hot_q
):
    rows = Rows(vocab, 100 * vocab + 10 * gamma + seed, SAMPLINGS[sampling], one_hot_q)
    emitted, kept_block = enumerate_round(rows, gamma, "block")
    assert sum(emitted.values()) == pytest.approx(1.0, abs=1e-12)
    got, want = extended(rows, emitted, gamma + 1), target_law(rows, gamma + 1)
    assert max(abs(got.get(s, 0.0) - w) for s, w in want.items()) < 1e-12
    emitted_tok, kept_token = enumerate_round(rows, gamma, "token")
    # the token-wise enumeration itself is exact (a check of the harness)
    got_tok = extended(rows, emitted_tok, gamma + 1)
    assert max(abs(got_tok.get(s, 0.0) - w) for s, w in want.items()) < 1e-12
    assert kept_block >= kept_token - 1e-12


def test_block_keeps_strictly_more_somewhere():
    """Not a tautology: on these rows block verification keeps more than token-wise."""
    rows = Rows(3, 7, SAMPLINGS["T=1"])
    _, kept_block = enumerate_round(rows, 3, "block")
    _, kept_token = enumerate_round(rows, 3, "token")
    assert kept_block > kept_token + 1e-3


def test_paper_example_ab():
    """Sun et al.'s example: V = {a, b}, context-free p = (1/3, 2/3), q = (2/3, 1/3),
    γ = 2: 10/9 kept token-wise, 11/9 with block verification."""
    p, q = torch.tensor([1 / 3, 2 / 3], dtype=D), torch.tensor([2 / 3, 1 / 3], dtype=D)
    rows = Rows(2, 0, SAMPLINGS["T=1"])
    for prefix in [(), (0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)]:
        rows.cache[("p", prefix)], rows.cache[("q", prefix)] = p, q
    _, kept_block = enumerate_round(rows, 2, "block")
    _, kept_token = enumerate_round(rows, 2, "token")
    assert Fraction(kept_token).limit_denominator(100) == Fraction(10, 9)
    assert Fraction(kept_block).limit_denominator(100) == Fraction(11, 9)
    assert kept_block == pytest.approx(11 / 9, abs=1e-12)


def test_weights_by_hand():
    """Block "ab" on the {a, b} example: p'_1 = min(1, (1/3)/(2/3)) = 1/2,
    p'_2 = min(1, 1/2 · (2/3)/(1/3)) = 1; S_1 = Σ [½p − q]+ = 0, so h_1 = 0;
    h_2 = p'_2 = 1: the whole block is kept although token-wise rejects "a" half the time."""
    p = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=D)
    q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=D)
    bw = block_weights(torch.tensor([0, 1]), q, p)
    assert bw.weights == pytest.approx((0.5, 1.0), abs=1e-12)
    assert bw.stop_probs == pytest.approx((0.0, 1.0), abs=1e-12)
    assert bw.keep_probs == pytest.approx((0.0, 0.0, 1.0), abs=1e-12)
    assert bw.accept_probs == pytest.approx((0.5, 1.0), abs=1e-12)
    # block "aa": p'_1 = 1/2, p'_2 = 1/4; S_1 = 0, h_1 = 0; h_2 = 1/4
    bw = block_weights(torch.tensor([0, 0]), q, p)
    assert bw.weights == pytest.approx((0.5, 0.25), abs=1e-12)
    assert bw.keep_probs == pytest.approx((0.75, 0.0, 0.25), abs=1e-12)
    # after keeping nothing: r_0 = norm([p_1 − q_1]+) = b
    assert bw.residuals[0].tolist() == pytest.approx([0.0, 1.0], abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_one_hot_rows_decide_as_greedy(seed):
    """Temperature 0 (one-hot p and q): block verification decides what the greedy
    token-wise rule decides, whatever the draws."""
    gen = torch.Generator().manual_seed(seed)
    vocab, gamma = 4, 4
    p_ids = torch.randint(vocab, (gamma + 1,), generator=gen)
    draft = torch.where(
        torch.rand(gamma, generator=gen) < 0.7, p_ids[:gamma], (p_ids[:gamma] + 1) % vocab
    )
    p, q = one_hot(p_ids, vocab).float(), one_hot(draft, vocab).float()
    verdict, decision = verify_block(draft, q, p, gen)
    greedy = verify_greedy(draft, p)
    assert (verdict.accepted, verdict.next_token, verdict.kind) == (
        greedy.accepted,
        greedy.next_token,
        greedy.kind,
    )
    assert decision.token_wise == greedy.accepted


def test_sampled_rule_matches_its_exact_outcomes():
    """``verify_block`` (draws) against ``block_weights`` (exact): the kept length's
    frequencies over 20,000 seeded draws on fixed rows, within 4 standard errors."""
    gen = torch.Generator().manual_seed(5)
    rows = Rows(4, 3, SAMPLINGS["T=1"])
    block = (1, 2, 0)
    ids = torch.tensor(block)
    q = torch.stack([rows.q(block[:i]) for i in range(3)]).float()
    p = torch.stack([rows.p(block[:i]) for i in range(4)]).float()
    want = block_weights(ids, q, p).keep_probs
    n = 20_000
    counts = [0] * 4
    for _ in range(n):
        verdict, decision = verify_block(ids, q, p, gen)
        counts[verdict.accepted] += 1
        assert decision.kept == verdict.accepted and len(decision.u) == 3
    for c, w in zip(counts, want, strict=True):
        assert abs(c / n - w) <= 4 * (w * (1 - w) / n) ** 0.5 + 1e-9


def test_draws_replay_and_token_wise_uses_the_same_draws():
    rows = Rows(4, 11, SAMPLINGS["T=1"])
    block = (0, 3, 1, 2)
    ids = torch.tensor(block)
    q = torch.stack([rows.q(block[:i]) for i in range(4)]).float()
    p = torch.stack([rows.p(block[:i]) for i in range(5)]).float()
    first = verify_block(ids, q, p, torch.Generator().manual_seed(9))
    again = verify_block(ids, q, p, torch.Generator().manual_seed(9))
    assert first == again
    verdict, decision = first
    a = verdict.accept_probs
    want_tw = next((i for i, u in enumerate(decision.u) if not u < a[i]), 4)
    assert decision.token_wise == want_tw
    assert decision.resample_position == verdict.accepted + 1
    assert 0.0 < sum(decision.residual_probs) <= 1.0 + 1e-9
    assert len(decision.residual_ids) == len(decision.residual_probs) <= 5
