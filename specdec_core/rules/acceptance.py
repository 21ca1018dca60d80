"""The verification rules of speculative decoding — the heart of the lessons.

Notation (Leviathan et al. 2023 "Fast Inference from Transformers via Speculative
Decoding"; Chen et al. 2023 "Accelerating LLM Decoding with Speculative Sampling"):

* ``p`` — target model distribution (``target_probs``), ``q`` — draft model distribution
  (``draft_probs``); both *after* temperature / top-k / top-p (see ``core/sampling.py``).
* acceptance probability of a drafted token ``y``: ``a = min(1, p(y) / q(y))``.
* residual distribution after a rejection: ``r = norm([p − q]+)``.
* Each round emits the accepted prefix plus one token: the *correction* drawn from ``r``
  at the first rejection, or the *bonus* token drawn from ``p_{γ+1}`` when all γ drafts
  are accepted. Either way the emitted tokens follow ``p`` exactly (Leviathan Thm 3.5).

A one-hot ``q`` (greedy draft, prompt lookup, or a student's edit) is a valid proposal:
``a = p(y)`` and ``r = p`` with ``y`` removed, still exactly ``p``.

Beyond the papers, for teaching: ``resample_from="target"`` implements the *wrong* rule
(resample from ``p`` after a rejection), which is biased — the lab page shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

ResampleFrom = Literal["residual", "target"]


@dataclass(frozen=True)
class Verdict:
    """What one verification decided.

    Attributes:
        accepted: accepted length ``n`` (0..γ): drafts ``y_1..y_n`` are kept.
        next_token: the correction token (``kind == "correction"``) or the bonus token.
        kind: ``"correction"`` (first rejection at position ``n + 1``) or ``"bonus"``.
        accept_probs: ``a_i`` for every drafted position 1..γ (greedy: 1.0 on a match,
            0.0 otherwise).
        u: the uniform draws actually used, one per position checked (positions 1..n+1,
            or 1..γ when all are accepted). Empty in greedy mode.
    """

    accepted: int
    next_token: int
    kind: Literal["correction", "bonus"]
    accept_probs: tuple[float, ...]
    u: tuple[float, ...]


def acceptance_total(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``A = Σ min(p, q) = 1 − TV(p, q)``: the chance a draft from ``q`` is accepted.

    ``p, q``: ``[..., V]`` → ``[...]`` (Leviathan et al. 2023, Def. 3.1 / Lemma 3.3).
    """
    return torch.minimum(p, q).sum(dim=-1)


def acceptance_probability(p_y: float, q_y: float) -> float:
    """``a = min(1, p(y) / q(y))`` for a drafted token ``y``.

    Raises:
        ValueError: if ``q(y) <= 0`` — the draft could never have proposed ``y``.
    """
    if q_y <= 0.0:
        raise ValueError(f"q(y) must be > 0 for a proposed token, got {q_y}")
    return min(1.0, p_y / q_y)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor | None:
    """``r = norm([p − q]+)``, the distribution a correction token is drawn from.

    Args:
        p, q: ``[V]`` probability rows, float32 or float64.

    Returns:
        ``[V]`` same dtype, or ``None`` when ``[p − q]+`` has no mass (then ``p ≤ q``
        everywhere, i.e. ``p == q``, a rejection is impossible and the 0/0 is never
        evaluated).
    """
    positive = (p - q).clamp_min(0.0)
    mass = positive.sum()
    if mass.item() <= 0.0:
        return None
    return positive / mass


def final_distribution(
    p: torch.Tensor, q: torch.Tensor, resample_from: ResampleFrom = "residual"
) -> torch.Tensor:
    """Exact distribution of the token one verification step emits, enumerated.

    ``P(x) = q(x)·a(x) + β·s(x)`` with ``q(x)·a(x) = min(p(x), q(x))``,
    ``β = 1 − Σ min(p, q)`` and ``s = r`` (correct rule, gives ``p``) or ``s = p``
    (the wrong "resample from the target" rule). ``[V] → [V]``, same dtype.
    """
    accept_path = torch.minimum(p, q)
    beta = 1.0 - accept_path.sum()
    if resample_from == "target":
        return accept_path + beta * p
    residual = residual_distribution(p, q)
    if residual is None:
        return accept_path
    return accept_path + beta * residual


def accepted_token_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Distribution of the drafted token *given that it was accepted*: ``min(p, q) / A``.

    Not ``p``: the accepted tokens alone are biased towards where the draft is confident;
    only together with the corrections do they give ``p``. ``[V] → [V]``.
    """
    accept_path = torch.minimum(p, q)
    return accept_path / accept_path.sum()


def greedy_accepted_length(draft_ids: Sequence[int], target_argmax: Sequence[int]) -> int:
    """The greedy rule itself: ``n`` = how many leading drafts equal the target's argmax
    (``y_i == argmax p_i`` for ``i ≤ n``; ``n == γ`` when all match).

    Args:
        draft_ids: ``[γ]`` ids. target_argmax: ``[≥ γ]`` ids ``argmax p_1..``.
    """
    for i, (y, a) in enumerate(zip(draft_ids, target_argmax, strict=False)):
        if y != a:
            return i
    return len(draft_ids)


def greedy_overlaps(draft_ids: Sequence[int], target_argmax: Sequence[int]) -> list[float]:
    """``Σ min(p_i, q_i)`` per drafted position when both rows are one-hot (temperature
    0: ``p_i`` on ``argmax p_i``, ``q_i`` on ``y_i``): 1.0 where they agree, else 0.0.
    The fast path uses it to skip building ``[γ, V]`` one-hot rows."""
    return [1.0 if y == a else 0.0 for y, a in zip(draft_ids, target_argmax, strict=False)]


def verify_greedy(draft_ids: torch.Tensor, target_probs: torch.Tensor) -> Verdict:
    """Greedy verification: accept while ``y_i == argmax p_i``; replace the first mismatch.

    Args:
        draft_ids: ``[γ]`` int64 drafted tokens ``y_1..y_γ`` (γ may be 0).
        target_probs: ``[γ + 1, V]`` target rows ``p_1..p_{γ+1}`` (logits also work:
            only the argmax is used).

    Returns:
        :class:`Verdict`; the correction is ``argmax p_k`` at the first mismatch ``k``, the
        bonus ``argmax p_{γ+1}``.
    """
    gamma = draft_ids.shape[0]
    target_argmax = target_probs.argmax(dim=-1).tolist()
    drafts = draft_ids.tolist()
    n = greedy_accepted_length(drafts, target_argmax)
    return Verdict(
        accepted=n,
        next_token=target_argmax[n],
        kind="bonus" if n == gamma else "correction",
        accept_probs=tuple(greedy_overlaps(drafts, target_argmax)),
        u=(),
    )


def verify_sampling(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
    resample_from: ResampleFrom = "residual",
) -> Verdict:
    """Speculative sampling (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2).

    For ``i = 1..γ``: draw ``u_i ~ U[0, 1)`` and accept ``y_i`` while
    ``u_i < a_i = min(1, p_i(y_i) / q_i(y_i))``. At the first rejection ``k`` draw the
    correction from ``r_k = norm([p_k − q_k]+)`` and discard ``y_{k+1}..y_γ`` unchecked; if
    all are accepted draw the bonus token from ``p_{γ+1}``.

    Args:
        draft_ids: ``[γ]`` int64, on CPU.
        draft_probs: ``[γ, V]`` float32 rows ``q_1..q_γ`` the drafts were proposed from
            (one-hot rows for deterministic proposals).
        target_probs: ``[γ + 1, V]`` float32 rows ``p_1..p_{γ+1}``.
        generator: CPU ``torch.Generator``; every draw comes from it, in order
            ``u_1, u_2, …`` then the correction/bonus draw, so a round replays exactly.
        resample_from: ``"residual"`` (correct) or ``"target"`` (the biased rule, for
            teaching only).

    Returns:
        :class:`Verdict`. The emitted token is always a valid id in ``[0, V)``.
    """
    gamma = draft_ids.shape[0]
    rows = torch.arange(gamma)
    p_y = target_probs[rows, draft_ids].tolist()
    q_y = draft_probs[rows, draft_ids].tolist()
    accept_probs = tuple(acceptance_probability(p, q) for p, q in zip(p_y, q_y, strict=True))
    draws: list[float] = []
    for i in range(gamma):
        u = torch.rand((), generator=generator).item()
        draws.append(u)
        if not u < accept_probs[i]:
            source = target_probs[i]
            if resample_from == "residual":
                residual = residual_distribution(target_probs[i], draft_probs[i])
                # ``None`` only when p == q up to rounding: a probability-0 event, use p.
                source = target_probs[i] if residual is None else residual
            token = int(torch.multinomial(source, 1, generator=generator).item())
            return Verdict(i, token, "correction", accept_probs, tuple(draws))
    token = int(torch.multinomial(target_probs[gamma], 1, generator=generator).item())
    return Verdict(gamma, token, "bonus", accept_probs, tuple(draws))
