"""The lossy verification rules: typical acceptance (Medusa) and threshold ("relaxed")
acceptance, one position at a time on the target's rows. They trade the output
distribution for speed, so they are **never** a default: only from
``SessionConfig.acceptance`` ``"typical"`` or ``"threshold"`` (the CLI's ``--acceptance``),
reached through ``rules/verification.py``.

Each accepts draft ``y_i`` by a deterministic test on ``p_i`` alone (no ``u_i``, no ``q``):

* **typical** (Cai et al. 2024, "Medusa", §2.3.1): ``p(y) > min(ε, δ·exp(−H(p)))``,
  ``H(p) = −Σ p log p`` in nats (``0·log 0 = 0``); Medusa's defaults ε = 0.09
  (``posterior_threshold``), δ = 0.3 (``posterior_alpha``).
* **threshold**: ``p(y) ≥ δ``, or ``y`` among the target's ``top_k`` most likely tokens
  (on a tie the lower id first, like the argmax); never a token with ``p(y) = 0``.

At the first rejected position ``k`` the next token is a fresh draw from ``p_k`` (it may
redraw ``y_k``; the residual ``[p − q]+`` belongs to the exact rule's test and means
nothing for one that ignores ``q``); when all pass, the bonus comes from ``p_{γ+1}``.
Deviation: Medusa draws from the truncated ``p`` of its typical sampler; ``p`` keeps the
comparison with the exact rule about the test alone (as ``rules/lab/lossy.py``). One
position then emits ``x`` with probability

    P(x) = q(x)·[x ∈ S]  +  (1 − Σ_{x∈S} q(x)) · p(x),     S = the accept set,

not ``p`` in general (:func:`lossy_final_distribution`; ``TV(P, p)`` is the price). At
temperature 0 both rules accept exactly the argmax for every δ ∈ [0, 1], ε ∈ (0, 1)
(typical with ε = δ = 1 accepts nothing and still emits the argmax), so greedy paths never
consult them. Rows are torch ``[V]``, float32 or float64; ``rules/lab/lossy.py`` enumerates
the same rules in numpy and ``tests/test_lossy.py`` checks that the two agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from specdec_core.rules.acceptance import Verdict

if TYPE_CHECKING:
    from specdec_core.core.settings import SessionConfig

LossyName = Literal["typical", "threshold"]
LOSSY_NAMES: tuple[LossyName, ...] = ("typical", "threshold")


@dataclass(frozen=True)
class LossyRule:
    """A lossy verification rule and its knobs (validated by ``SessionConfig.validate``).

    Attributes:
        name: ``typical`` or ``threshold``.
        delta: δ in [0, 1] (typical: the entropy-scaled bar ``δ·exp(−H)``; threshold: the
            probability bar).
        epsilon: ε in (0, 1], typical only (the hard cap of the bar).
        top_k: threshold only: the target's ``top_k`` most likely tokens always pass
            (0: no top-k clause).
    """

    name: LossyName
    delta: float = 0.3
    epsilon: float = 0.09
    top_k: int = 1

    def to_json(self) -> dict:
        """The CLI's top-level ``"acceptance"`` object (docs/ARCHITECTURE.md)."""
        knobs: dict = {"delta": self.delta}
        knobs.update({"epsilon": self.epsilon} if self.name == "typical" else {})
        knobs.update({"top_k": self.top_k} if self.name == "threshold" else {})
        return {"rule": self.name, "lossy": True, **knobs}


def lossy_rule(config: SessionConfig) -> LossyRule | None:
    """The session's lossy rule, or ``None`` for the exact rule (the default)."""
    if config.acceptance == "exact":
        return None
    return LossyRule(
        config.acceptance,  # type: ignore[arg-type]
        float(config.acceptance_delta),
        float(config.acceptance_epsilon),
        int(config.acceptance_top_k),
    )


def entropy_nats(p: torch.Tensor) -> float:
    """``H(p) = −Σ p log p`` in nats, ``0·log 0 = 0``. ``p``: ``[V]`` probabilities."""
    p64 = p.double()
    nz = p64[p64 > 0]
    return float(-(nz * nz.log()).sum())


def typical_bar(p: torch.Tensor, delta: float, epsilon: float) -> float:
    """Medusa's bar ``min(ε, δ·exp(−H(p)))`` (Cai et al. 2024, §2.3.1), a probability."""
    return min(epsilon, delta * math.exp(-entropy_nats(p)))


def accept_mask(p: torch.Tensor, rule: LossyRule) -> torch.Tensor:
    """The accept set ``S``: which tokens ``rule`` accepts when drafted against the target
    row ``p`` (``[V]`` float32/float64) → ``[V]`` bool. Raises ValueError for an unknown
    rule name."""
    p64 = p.double().cpu()
    if rule.name == "typical":
        return p64 > typical_bar(p64, rule.delta, rule.epsilon)
    if rule.name == "threshold":
        top = torch.zeros(p64.shape, dtype=torch.bool)
        if rule.top_k > 0:
            order = torch.sort(-p64, stable=True).indices  # ties: the lower id first
            top[order[: rule.top_k]] = True
        return ((p64 >= rule.delta) | top) & (p64 > 0)
    raise ValueError(f"unknown lossy rule {rule.name!r}")


def accepts(p: torch.Tensor, token: int, rule: LossyRule) -> bool:
    """Whether ``rule`` accepts drafted ``token`` against row ``p`` (``[V]``): the same
    test as :func:`accept_mask` for one token, without building the mask when it can."""
    p_y = float(p[token])
    if rule.name == "typical":
        return p_y > typical_bar(p, rule.delta, rule.epsilon)
    if rule.name == "threshold" and p_y > 0 and p_y >= rule.delta:
        return True
    return bool(accept_mask(p, rule)[token])


def verify_lossy(
    draft_ids: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
    rule: LossyRule,
) -> Verdict:
    """One round under a lossy rule (module doc): accept ``y_i`` while ``rule`` passes it;
    at the first rejection ``k`` draw the next token from ``p_k``, else the bonus from
    ``p_{γ+1}`` (the one draw from ``generator``, the round's verification stream).
    ``draft_ids`` ``[γ]`` int64 CPU, ``target_probs`` ``[γ + 1, V]`` float32. The
    :class:`Verdict` has ``accept_probs`` 1.0 / 0.0 (the test is certain) and ``u = ()``."""
    gamma = draft_ids.shape[0]
    passed = tuple(
        1.0 if accepts(target_probs[i], int(draft_ids[i]), rule) else 0.0 for i in range(gamma)
    )
    n = next((i for i, a in enumerate(passed) if a == 0.0), gamma)
    token = int(torch.multinomial(target_probs[n], 1, generator=generator).item())
    return Verdict(n, token, "bonus" if n == gamma else "correction", passed, ())


def lossy_final_distribution(p: torch.Tensor, q: torch.Tensor, rule: LossyRule) -> torch.Tensor:
    """The exact law of the token one position emits under ``rule``,
    ``P(x) = q(x)·[x ∈ S] + (1 − Σ_S q)·p(x)`` (module doc): ``[V]`` rows ``p, q``
    (float32/float64, each summing to 1) → ``[V]`` float64 CPU."""
    p64, q64 = p.double().cpu(), q.double().cpu()
    kept = torch.where(accept_mask(p64, rule), q64, torch.zeros_like(q64))
    return kept + (1.0 - kept.sum()) * p64
