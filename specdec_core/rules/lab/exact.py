"""The exact picture of one verification step: ``p = min(p, q) + β·r``, and the exact
final distribution of each of the lab's three rules (correct, resample from ``p``,
one-hot draft), from the engine's own rule in :mod:`specdec_core.rules.acceptance`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from specdec_core.core.errors import RuleInputError
from specdec_core.core.sampling import tv_distance
from specdec_core.rules.acceptance import (
    ResampleFrom,
    acceptance_total,
    accepted_token_distribution,
    final_distribution,
    residual_distribution,
)
from specdec_core.rules.lab.rows import as_tensor

__all__ = [
    "RULES",
    "Decomposition",
    "RuleName",
    "RuleResult",
    "RuleSetup",
    "compare_rules",
    "decompose",
    "rule_setups",
]

RuleName = Literal["correct", "resample_p", "one_hot"]
RULES: tuple[RuleName, ...] = ("correct", "resample_p", "one_hot")


@dataclass(frozen=True)
class Decomposition:
    """``p = min(p, q) + β·r`` for one pair of rows (all arrays ``[V]`` float64).

    Attributes:
        min_pq: the accept path ``min(p, q)`` (= ``q(x)·a(x)``).
        excess: the reject path ``β·r = [p − q]+``.
        residual: ``r = norm([p − q]+)``, ``None`` when ``β = 0`` (never evaluated).
        acceptance: ``A = Σ min(p, q)``; ``beta = 1 − A``; ``excess_total = Σ [p − q]+``;
        tv: ``TV(p, q) = ½ Σ |p − q|``; ``one_minus_tv = 1 − TV`` (equals ``A``).
        reconstructed: ``min(p, q) + [p − q]+``, which is ``p`` token by token.
        accepted_only: ``min(p, q) / A``, the law of accepted drafts; ``None`` if ``A = 0``.
    """

    p: np.ndarray
    q: np.ndarray
    min_pq: np.ndarray
    excess: np.ndarray
    residual: np.ndarray | None
    acceptance: float
    beta: float
    excess_total: float
    tv: float
    one_minus_tv: float
    reconstructed: np.ndarray
    accepted_only: np.ndarray | None


def decompose(p: np.ndarray, q: np.ndarray) -> Decomposition:
    """The exact decomposition of one verification step (Leviathan et al. 2023, §3.1).

    Args:
        p, q: ``[V]`` probability rows (float64; each sums to 1).
    """
    pt, qt = as_tensor(p), as_tensor(q)
    acceptance = float(acceptance_total(pt, qt))
    residual = residual_distribution(pt, qt)
    excess = (pt - qt).clamp_min(0.0)
    min_pq = torch.minimum(pt, qt)
    tv = float(tv_distance(pt, qt))
    return Decomposition(
        p=pt.numpy(),
        q=qt.numpy(),
        min_pq=min_pq.numpy(),
        excess=excess.numpy(),
        residual=None if residual is None else residual.numpy(),
        acceptance=acceptance,
        beta=1.0 - acceptance,
        excess_total=float(excess.sum()),
        tv=tv,
        one_minus_tv=1.0 - tv,
        reconstructed=(min_pq + excess).numpy(),
        accepted_only=accepted_token_distribution(pt, qt).numpy() if acceptance > 0 else None,
    )


@dataclass(frozen=True)
class RuleSetup:
    """One rule: the draft row it proposes from and where a rejection resamples from."""

    rule: RuleName
    q: np.ndarray
    resample_from: ResampleFrom


def rule_setups(q: np.ndarray, one_hot_token: int) -> dict[RuleName, RuleSetup]:
    """The three rules of the lab, in order :data:`RULES`.

    * ``correct``: propose from ``q``, accept with ``min(1, p/q)``, else draw from ``r``.
    * ``resample_p``: the same, but draw from ``p`` after a rejection (biased).
    * ``one_hot``: a deterministic draft of ``one_hot_token`` (``q = e_y``): accepted with
      ``p(y)``, residual ``p`` without ``y`` — still exactly ``p``.

    Raises:
        RuleInputError: ``one_hot_token`` out of range (code ``token``).
    """
    if not 0 <= one_hot_token < len(q):
        raise RuleInputError(f"token {one_hot_token} out of range", "token", k=one_hot_token)
    e_y = np.zeros(len(q), dtype=np.float64)
    e_y[one_hot_token] = 1.0
    return {
        "correct": RuleSetup("correct", np.asarray(q, dtype=np.float64), "residual"),
        "resample_p": RuleSetup("resample_p", np.asarray(q, dtype=np.float64), "target"),
        "one_hot": RuleSetup("one_hot", e_y, "residual"),
    }


@dataclass(frozen=True)
class RuleResult:
    """A rule's exact output: ``final`` ``[V]`` (the law of the emitted token),
    ``tv_to_p = TV(final, p)`` (0 for a lossless rule) and its acceptance ``A``."""

    rule: RuleName
    final: np.ndarray
    tv_to_p: float
    acceptance: float


def compare_rules(p: np.ndarray, q: np.ndarray, one_hot_token: int) -> dict[RuleName, RuleResult]:
    """Exact final distribution of every rule via :func:`acceptance.final_distribution`.

    Textbook ``p = [.6, .3, .1]``, ``q = [.2, .5, .3]``: correct → ``p``; resample from p →
    ``[.44, .42, .14]`` (TV 0.16); one-hot on token 2 → ``p`` with ``A = 0.3``.
    """
    pt = as_tensor(p)
    out: dict[RuleName, RuleResult] = {}
    for name, setup in rule_setups(q, one_hot_token).items():
        qt = as_tensor(setup.q)
        final = final_distribution(pt, qt, resample_from=setup.resample_from)
        out[name] = RuleResult(
            rule=name,
            final=final.numpy(),
            tv_to_p=float(tv_distance(final, pt)),
            acceptance=float(acceptance_total(pt, qt)),
        )
    return out
