"""Lossy acceptance rules on the lab's rows, enumerated exactly: what typical acceptance
and threshold ("relaxed") acceptance emit, and how far that is from ``p``.

One verification position, a draft ``y ~ q`` and the target row ``p`` (both ``[V]``
float64, ``V`` = 3..8 on the lab's rows). The exact rule accepts ``y`` with
``min(1, p(y)/q(y))`` and draws a rejected position's token from ``r = norm([p − q]+)``:
its final distribution is ``p`` (Leviathan et al. 2023, Thm 3.5). The two lossy rules
accept ``y`` by a deterministic test on ``p`` alone:

* **typical** (Medusa, Cai et al. 2024, §2.3.1): accept ``y`` if
  ``p(y) > min(ε, δ·exp(−H(p)))``, ``H(p) = −Σ p log p`` in nats (``0·log 0 = 0``).
* **threshold** ("relaxed" acceptance): accept ``y`` if ``p(y) ≥ δ``, or ``y`` is one of
  the target's ``top_k`` most likely tokens (``top_k = 0``: no top-k clause; ties broken
  towards the lower index, like the engine's argmax).

With accept set ``S`` (the tokens the test passes), ``P(accept) = Σ_{x∈S} q(x)`` and a
rejection draws the position's token from ``s``, so the emitted token follows

    P(x) = q(x)·[x ∈ S]  +  (1 − Σ_{x∈S} q(x)) · s(x).

This module's ``s`` is ``p`` itself (a rejected draft is replaced by a fresh draw from the
target: the residual ``[p − q]+`` belongs to the exact rule's ``min(1, p/q)`` test and
means nothing for a test that ignores ``q``). So ``δ`` large (nothing passes) gives ``p``
with no draft ever accepted, ``δ → 0`` (everything ``p`` allows passes) gives ``q`` on
``p``'s support: the price, ``TV(P, p)``, against the gain, ``P(accept)``.

Pure: numpy and torch; no streamlit, no plotly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specdec_core.core.errors import RuleInputError
from specdec_core.core.sampling import tv_distance
from specdec_core.rules.acceptance import acceptance_total, final_distribution
from specdec_core.rules.lab.rows import as_tensor

__all__ = [
    "DEFAULT_DELTA",
    "DEFAULT_EPSILON",
    "DEFAULT_TOP_K",
    "DELTA_GRID",
    "LOSSY_RULES",
    "MAX_TOP_K",
    "LossyName",
    "LossyResult",
    "LossyRules",
    "LossySweep",
    "accept_set",
    "check_lossy",
    "compare_lossy",
    "entropy_nats",
    "lossy_final",
    "lossy_sweep",
    "rule_result",
    "typical_threshold",
]

LossyName = Literal["exact", "typical", "threshold"]
LOSSY_RULES: tuple[LossyName, ...] = ("exact", "typical", "threshold")
DEFAULT_DELTA = 0.3  # Medusa's posterior_alpha (sqrt of its default threshold 0.09)
DEFAULT_EPSILON = 0.09  # Medusa's posterior_threshold
DEFAULT_TOP_K = 1  # threshold rule: the target's argmax always passes
MAX_TOP_K = 8  # the lab's rows have at most 8 tokens
DELTA_GRID = np.round(np.linspace(0.0, 1.0, 41), 3)  # the sweep over δ, step 0.025


@dataclass(frozen=True)
class LossyRules:
    """The knobs of the two lossy rules: ``delta`` (δ, both rules, in [0, 1]),
    ``epsilon`` (ε, typical, in (0, 1]) and ``top_k`` (threshold, 0..8)."""

    delta: float = DEFAULT_DELTA
    epsilon: float = DEFAULT_EPSILON
    top_k: int = DEFAULT_TOP_K


def check_lossy(delta: object, epsilon: object, top_k: object) -> LossyRules:
    """The knobs as a :class:`LossyRules`, refusing values out of range.

    Raises:
        RuleInputError: codes ``lossy_delta`` (δ not a number in [0, 1]),
            ``lossy_epsilon`` (ε not a number in (0, 1]), ``lossy_top_k`` (top-k not a
            whole number 0..8); ``params`` has ``value``.
    """

    def number(x: object) -> float | None:
        if isinstance(x, bool) or not isinstance(x, int | float):
            return None
        x = float(x)
        return x if math.isfinite(x) else None

    d, e = number(delta), number(epsilon)
    if d is None or not 0.0 <= d <= 1.0:
        raise RuleInputError(f"δ must be in [0, 1], got {delta!r}", "lossy_delta", value=d)
    if e is None or not 0.0 < e <= 1.0:
        raise RuleInputError(f"ε must be in (0, 1], got {epsilon!r}", "lossy_epsilon", value=e)
    k = number(top_k)
    if k is None or not k.is_integer() or not 0 <= k <= MAX_TOP_K:
        msg = f"top-k must be a whole number 0..{MAX_TOP_K}, got {top_k!r}"
        raise RuleInputError(msg, "lossy_top_k", value=k)
    return LossyRules(d, e, int(k))


def entropy_nats(p: np.ndarray) -> float:
    """``H(p) = −Σ p log p`` in nats, ``0·log 0 = 0``. ``p``: ``[V]``."""
    p = np.asarray(p, dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def typical_threshold(p: np.ndarray, delta: float, epsilon: float) -> float:
    """Medusa's typical-acceptance bar ``min(ε, δ·exp(−H(p)))`` (Cai et al. 2024,
    Eq. in §2.3.1; ``posterior_threshold`` = ε, ``posterior_alpha`` = δ)."""
    return min(epsilon, delta * math.exp(-entropy_nats(p)))


def accept_set(p: np.ndarray, rule: LossyName, knobs: LossyRules) -> np.ndarray:
    """Which tokens a lossy rule accepts when drafted: ``[V]`` bool.

    ``typical``: ``p > min(ε, δ·exp(−H(p)))``; ``threshold``: ``p ≥ δ`` or among the
    ``top_k`` largest ``p`` (stable order: on a tie the lower index ranks first), and never
    a token with ``p = 0``.

    Raises:
        RuleInputError: ``rule`` is ``exact`` or unknown (code ``lossy_rule``): the exact
            rule accepts at random, it has no accept set.
    """
    p = np.asarray(p, dtype=np.float64)
    if rule == "typical":
        return p > typical_threshold(p, knobs.delta, knobs.epsilon)
    if rule == "threshold":
        top = np.zeros(p.shape, dtype=bool)
        top[np.argsort(-p, kind="stable")[: knobs.top_k]] = True
        return ((p >= knobs.delta) | top) & (p > 0)
    raise RuleInputError(f"no accept set for rule {rule!r}", "lossy_rule", rule=rule)


@dataclass(frozen=True)
class LossyResult:
    """One rule's exact output on one pair of rows.

    Attributes:
        rule: ``exact``, ``typical`` or ``threshold``.
        final: ``[V]`` float64, the law of the emitted token.
        tv_to_p: ``TV(final, p)`` (0 for the exact rule, up to rounding).
        acceptance: ``P(the draft is accepted)`` = ``Σ min(p, q)`` (exact) or
            ``Σ_{x∈S} q(x)`` (lossy).
        accepted: ``[V]`` bool, the accept set ``S`` (``None`` for the exact rule).
    """

    rule: LossyName
    final: np.ndarray
    tv_to_p: float
    acceptance: float
    accepted: np.ndarray | None


def lossy_final(p: np.ndarray, q: np.ndarray, accepted: np.ndarray) -> np.ndarray:
    """``P(x) = q(x)·[x ∈ S] + (1 − Σ_S q)·p(x)``: ``[V]`` float64 (see the module doc)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    kept = np.where(accepted, q, 0.0)
    return kept + (1.0 - kept.sum()) * p


def rule_result(p: np.ndarray, q: np.ndarray, rule: LossyName, knobs: LossyRules) -> LossyResult:
    """The exact output of ``rule`` on rows ``p``, ``q`` (``[V]`` float64 each)."""
    pt = as_tensor(p)
    if rule == "exact":
        final = final_distribution(pt, as_tensor(q))  # the engine's own rule: p
        return LossyResult(
            "exact",
            final.numpy(),
            float(tv_distance(final, pt)),
            float(acceptance_total(pt, as_tensor(q))),
            None,
        )
    accepted = accept_set(p, rule, knobs)
    final = lossy_final(p, q, accepted)
    return LossyResult(
        rule,
        final,
        float(tv_distance(as_tensor(final), pt)),
        float(np.asarray(q, dtype=np.float64)[accepted].sum()),
        accepted,
    )


def compare_lossy(
    p: np.ndarray, q: np.ndarray, knobs: LossyRules = LossyRules()
) -> dict[LossyName, LossyResult]:
    """Every rule of :data:`LOSSY_RULES` on one pair of rows, in that order.

    Textbook ``p = [.6, .3, .1]``, ``q = [.2, .5, .3]``: exact → ``p`` (A = 0.6);
    typical (δ = 0.3, ε = 0.09; bar 0.09) accepts all three → ``q`` (TV 0.4, A = 1);
    threshold (δ = 0.5, top-1) accepts only t1 → ``[.68, .24, .08]`` (TV 0.08, A = 0.2).
    """
    return {rule: rule_result(p, q, rule, knobs) for rule in LOSSY_RULES}


@dataclass(frozen=True)
class LossySweep:
    """A lossy rule over a grid of δ (the other knobs fixed): ``deltas`` ``[G]``,
    ``tv_to_p`` ``[G]`` and ``acceptance`` ``[G]`` float64."""

    rule: LossyName
    deltas: np.ndarray
    tv_to_p: np.ndarray
    acceptance: np.ndarray


def lossy_sweep(
    p: np.ndarray,
    q: np.ndarray,
    rule: LossyName,
    knobs: LossyRules = LossyRules(),
    deltas: Sequence[float] = tuple(DELTA_GRID),
) -> LossySweep:
    """:func:`rule_result` of ``rule`` at every δ of ``deltas`` (each in [0, 1]).

    Raises:
        RuleInputError: a δ out of range (``lossy_delta``) or ``rule`` not lossy.
    """
    if rule not in ("typical", "threshold"):
        raise RuleInputError(f"no δ to sweep for rule {rule!r}", "lossy_rule", rule=rule)
    tv, acc = [], []
    for d in deltas:
        res = rule_result(p, q, rule, check_lossy(float(d), knobs.epsilon, knobs.top_k))
        tv.append(res.tv_to_p)
        acc.append(res.acceptance)
    return LossySweep(rule, np.asarray(deltas, dtype=np.float64), np.array(tv), np.array(acc))
