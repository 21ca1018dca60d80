"""Block verification against token-wise verification on context-free rows (the same
``p`` and ``q`` at every position, as in Sun et al. 2025's {a, b} example): the exact law
of the kept length under each rule, the ideal verifier's expected length, the law of the
output, and a Monte Carlo of both rules' draws checked with χ².

The rule is ``rules/block.py``'s (its module docstring has the notation); here it is
written once more over plain numbers, so the {a, b} example runs in
:class:`fractions.Fraction` and gives the paper's 10/9, 11/9 and 12/9 exactly (a test
checks this copy against the engine's on float rows). Blocks are enumerated: ``V^γ`` of
them, at most :data:`MAX_BLOCKS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import numpy as np

from specdec_core.core.errors import RuleInputError
from specdec_core.rules.lab.montecarlo import ChiSquare, chi_square

__all__ = [
    "AB_GAMMA",
    "AB_NAMES",
    "AB_P",
    "AB_Q",
    "MAX_BLOCKS",
    "MAX_BLOCK_GAMMA",
    "BlockLab",
    "BlockMonteCarlo",
    "BlockStep",
    "block_lab",
    "block_monte_carlo",
    "block_steps",
    "keep_law",
]

N = TypeVar("N", float, Fraction)

#: The paper's example: V = {a, b}, target favours b, draft favours a, γ = 2.
AB_NAMES = ("a", "b")
AB_P = (Fraction(1, 3), Fraction(2, 3))
AB_Q = (Fraction(2, 3), Fraction(1, 3))
AB_GAMMA = 2
MAX_BLOCK_GAMMA = 4
MAX_BLOCKS = 625  # V^γ enumerated blocks at most (8 tokens: γ ≤ 3; 5 tokens: γ ≤ 4)


@dataclass(frozen=True)
class BlockStep:
    """Position ``i`` (0..γ) of one block: the weight ``p'_i``, the scaled target row
    ``p'_i · p`` against the draft row ``q`` (``q ≡ 0`` after the block), their excess
    ``[p'_i · p − q]+`` (the residual before normalising), ``S_i`` and ``h_i`` (``h_0``
    unused: 1)."""

    weight: float
    scaled_p: tuple[float, ...]
    q: tuple[float, ...]
    excess: tuple[float, ...]
    mass: float
    stop_prob: float


def _steps(p: Sequence[N], q: Sequence[N], block: Sequence[int]) -> list[tuple]:
    """``(p'_i, S_i, h_i, excess_i)`` for ``i = 0..γ`` (the rule of ``rules/block.py``)."""
    zero = p[0] - p[0]
    weights = [zero + 1]
    for y in block:
        weights.append(min(zero + 1, weights[-1] * p[y] / q[y]))
    out = []
    for i, w in enumerate(weights):
        last = i == len(block)
        excess = [max(w * px - (zero if last else qx), zero) for px, qx in zip(p, q, strict=True)]
        mass = sum(excess, zero)
        den = mass + 1 - w
        out.append((w, mass, mass / den if mass > 0 and den > 0 else zero, excess))
    return out


def keep_law(p: Sequence[N], q: Sequence[N], block: Sequence[int], rule: str) -> list[N]:
    """``P(kept = i)`` for ``i = 0..γ`` given the drafted ``block``: ``rule`` ``block``
    (``h_i · Π_{j>i} (1 − h_j)``) or ``token`` (``Π_{j≤i} a_j · (1 − a_{i+1})``)."""
    zero = p[0] - p[0]
    if rule == "token":
        law, reach = [], zero + 1
        for y in block:
            a = min(zero + 1, p[y] / q[y])
            law.append(reach * (1 - a))
            reach *= a
        return [*law, reach]
    stops = [s[2] for s in _steps(p, q, block)]
    law = []
    for i in range(len(block) + 1):
        later = zero + 1
        for h in stops[i + 1 :]:
            later *= 1 - h
        law.append((zero + 1 if i == 0 else stops[i]) * later)
    return law


def _residual(p: Sequence[N], q: Sequence[N], block: Sequence[int], rule: str, i: int) -> list[N]:
    """The row the token after ``i`` kept drafts comes from."""
    zero = p[0] - p[0]
    if i == len(block):
        return list(p)
    if rule == "token":
        excess = [max(px - qx, zero) for px, qx in zip(p, q, strict=True)]
    else:
        excess = _steps(p, q, block)[i][3]
    mass = sum(excess, zero)
    return [e / mass for e in excess] if mass > 0 else list(p)


@dataclass(frozen=True)
class BlockLab:
    """Both rules on one pair of context-free rows and a γ (numbers: ``Fraction`` for the
    {a, b} example, else float).

    Attributes:
        lengths: rule → ``P(kept = k)``, ``k = 0..γ``. expected: rule → expected kept
            drafts, and ``ideal``: ``Σ_{k=1..γ} Σ_{x^k} min(P(x^k), Q(x^k))``, what a
            verifier that knew the blocks' joint probabilities keeps.
        first, second: rule → the law of the round's first and second output token (the
            second after the target continues a round that emitted one); ``p`` for both.
        tv: rule → TV between the law of the first ``γ + 1`` tokens (the target
            continuing each round's output) and the target's own: 0 for an exact rule.
    """

    gamma: int
    lengths: dict[str, tuple]
    expected: dict[str, object]
    first: dict[str, tuple]
    second: dict[str, tuple]
    tv: dict[str, float]


def _check(p: Sequence, q: Sequence, gamma: int) -> None:
    if not 1 <= gamma <= MAX_BLOCK_GAMMA or len(p) ** gamma > MAX_BLOCKS:
        raise RuleInputError(
            f"γ must be 1..{MAX_BLOCK_GAMMA} with at most {MAX_BLOCKS} blocks, got γ = {gamma}",
            "block_gamma",
            gamma=gamma,
            limit=MAX_BLOCK_GAMMA,
        )
    if len(p) != len(q) or len(p) < 2:
        raise RuleInputError("p and q need the same tokens, at least two", "block_rows")


def block_lab(p: Sequence[N], q: Sequence[N], gamma: int) -> BlockLab:
    """Exact enumeration over all ``V^γ`` drafted blocks of both rules (see
    :class:`BlockLab`). Raises RuleInputError (``block_gamma``, ``block_rows``)."""
    _check(p, q, gamma)
    zero, v = p[0] - p[0], len(p)
    lengths, expected, first, second, tv = {}, {}, {}, {}, {}
    target = {s: _prod(p[x] for x in s) for s in itertools.product(range(v), repeat=gamma + 1)}
    for rule in ("token", "block"):
        law = [zero] * (gamma + 1)
        emitted: dict[tuple[int, ...], N] = {}
        for block in itertools.product(range(v), repeat=gamma):
            drafted = _prod(q[y] for y in block)
            if drafted == 0:
                continue
            for i, k in enumerate(keep_law(p, q, block, rule)):
                if k == 0:
                    continue
                law[i] += drafted * k
                for z, r in enumerate(_residual(p, q, block, rule, i)):
                    key = (*block[:i], z)
                    emitted[key] = emitted.get(key, zero) + drafted * k * r
        lengths[rule] = tuple(law)
        expected[rule] = sum((k * x for k, x in enumerate(law)), zero)
        full = {s: zero for s in target}
        for seq, pr in emitted.items():  # the target continues each output to γ + 1 tokens
            for tail in itertools.product(range(v), repeat=gamma + 1 - len(seq)):
                full[seq + tail] += pr * _prod(p[x] for x in tail)
        first[rule] = tuple(
            sum((pr for s, pr in full.items() if s[0] == x), zero) for x in range(v)
        )
        second[rule] = tuple(
            sum((pr for s, pr in full.items() if s[1] == x), zero) for x in range(v)
        )
        tv[rule] = float(sum(abs(full[s] - target[s]) for s in target)) / 2
    ideal = zero
    for k in range(1, gamma + 1):
        for s in itertools.product(range(v), repeat=k):
            ideal += min(_prod(p[x] for x in s), _prod(q[x] for x in s))
    expected["ideal"] = ideal
    return BlockLab(gamma, lengths, expected, first, second, tv)


def _prod(xs) -> N:
    out = None
    for x in xs:
        out = x if out is None else out * x
    return 1 if out is None else out


def block_steps(p: Sequence[float], q: Sequence[float], block: Sequence[int]) -> list[BlockStep]:
    """The proof's key step for one drafted block, position by position: where the scaled
    target row ``p'_i · p`` stands above ``q``, the excess is what resampling after ``i``
    kept drafts supplies, so the kept mass ``min(p'_i p, q)`` plus the excess add up to
    ``p'_i · p`` at every prefix (Sun et al. 2025, proof of Thm 2)."""
    steps = _steps([float(x) for x in p], [float(x) for x in q], block)
    out = []
    for i, (w, mass, h, excess) in enumerate(steps):
        last = i == len(block)
        out.append(
            BlockStep(
                weight=float(w),
                scaled_p=tuple(float(w * x) for x in p),
                q=tuple(0.0 if last else float(x) for x in q),
                excess=tuple(float(e) for e in excess),
                mass=float(mass),
                stop_prob=1.0 if i == 0 else float(h),
            )
        )
    return out


@dataclass(frozen=True)
class BlockMonteCarlo:
    """``n`` simulated rounds per rule, both rules on the same drafted blocks and the
    same uniforms: kept-length counts ``[γ + 1]`` and output first-token counts ``[V]``
    per rule, each with its χ² against the exact law (:func:`block_lab`)."""

    n: int
    lengths: dict[str, np.ndarray]
    firsts: dict[str, np.ndarray]
    length_fit: dict[str, ChiSquare]
    first_fit: dict[str, ChiSquare]
    more_than_token: int


def block_monte_carlo(
    p: Sequence[float], q: Sequence[float], gamma: int, n: int, seed: int
) -> BlockMonteCarlo:
    """Simulate both rules' mechanisms (the backward test ``η_i < h_i`` and the first
    failing ``η_i ≥ a_i``, then an inverse-CDF draw from the residual row), vectorised over
    ``n`` rounds with ``numpy.random.default_rng(seed)``; ``more_than_token``: rounds where
    block verification kept more than token-wise with the same draws."""
    _check(p, q, gamma)
    pf, qf = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    v = len(pf)
    rng = np.random.default_rng(seed)
    blocks = rng.choice(v, size=(n, gamma), p=qf / qf.sum())  # [n, γ]
    eta = rng.random((n, gamma))  # [n, γ], shared by both rules
    pick = rng.random(n)
    index = (blocks * v ** np.arange(gamma)[::-1]).sum(axis=1)  # [n], the block's number
    table = {}
    for rule in ("token", "block"):
        bars, rows = [], []
        for block in itertools.product(range(v), repeat=gamma):
            if any(qf[y] <= 0 for y in block):  # never drafted: any row of the right shape
                bars.append([0.0] * gamma)
                rows.append([list(pf)] * (gamma + 1))
                continue
            if rule == "token":
                bars.append([min(1.0, pf[y] / qf[y]) for y in block])
            else:
                bars.append([float(s[2]) for s in _steps(list(pf), list(qf), block)[1:]])
            rows.append([_residual(list(pf), list(qf), block, rule, i) for i in range(gamma + 1)])
        table[rule] = (np.asarray(bars), np.asarray(rows))  # [B, γ], [B, γ + 1, V]
    lengths, firsts, kept = {}, {}, {}
    for rule, (bars, rows) in table.items():
        passed = eta < bars[index]  # [n, γ]
        if rule == "token":
            k = np.where(passed.all(axis=1), gamma, (~passed).argmax(axis=1))
        else:  # the largest i with η_i < h_i, 0 if none
            k = np.where(passed.any(axis=1), gamma - passed[:, ::-1].argmax(axis=1), 0)
        cdf = np.cumsum(rows[index, k], axis=1)  # [n, V]
        token = np.minimum((cdf < pick[:, None] * cdf[:, -1:]).sum(axis=1), v - 1)
        first = np.where(k > 0, blocks[:, 0], token)
        kept[rule] = k
        lengths[rule] = np.bincount(k, minlength=gamma + 1)
        firsts[rule] = np.bincount(first, minlength=v)
    exact = block_lab(list(pf), list(qf), gamma)
    return BlockMonteCarlo(
        n,
        lengths,
        firsts,
        {r: chi_square(lengths[r], np.asarray(exact.lengths[r], dtype=float)) for r in lengths},
        {r: chi_square(firsts[r], np.asarray(exact.first[r], dtype=float)) for r in firsts},
        int((kept["block"] > kept["token"]).sum()),
    )
