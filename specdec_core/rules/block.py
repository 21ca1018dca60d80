"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, *Block
Verification Accelerates Speculative Decoding*, ICLR 2025, arXiv 2403.10444, Alg. 2).

Token-wise verification (``rules/acceptance.py``) decides each draft on its own ratio and
stops at the first rejection. Block verification decides the drafted block jointly, on
the same rows ``p_1..p_{γ+1}`` (target) and ``q_1..q_γ`` (draft), after
temperature/top-k/top-p: it carries a *weight* ``p'_i`` along the block (how much of the
target's mass the prefix ``y_1..y_i`` still has after the draft's), and keeps the longest
prefix whose backward test passes. Notation (``p'`` is the paper's ``p_i``; ``p_i`` here
is the target's row at position ``i``, as everywhere in this project)::

    p'_0 = 1,   p'_i = min(1, p'_{i-1} · p_i(y_i) / q_i(y_i))            i = 1..γ
    S_i  = Σ_x [p'_i · p_{i+1}(x) − q_{i+1}(x)]+                          i = 0..γ
           (q_{γ+1} ≡ 0: no draft after the block, so S_γ = p'_γ)
    h_i  = S_i / (S_i + 1 − p'_i)     (h_i = 0 when S_i = 0)              i = 1..γ
    draw η_1..η_γ ~ U[0, 1);   τ = max{ i ≥ 1 : η_i < h_i },  τ = 0 if none
    keep y_1..y_τ, then draw one token from
    r_τ = norm([p'_τ · p_{τ+1} − q_{τ+1}]+)   (τ = γ: r_γ = p_{γ+1}, the bonus row)

So ``P(τ = i) = h_i · Π_{j > i} (1 − h_j)``. With ``p'_0 = 1`` the residual after keeping
nothing is token-wise's ``norm([p_1 − q_1]+)``. The paper proves that the emitted tokens
follow the target exactly (checked here by exact enumeration over small vocabularies,
``tests/test_block_verification.py``) and that the expected number kept is the largest any
valid verifier reaches from these rows (so never fewer than token-wise, in expectation;
not round by round with the same draws). The paper's {a, b} example (context-free
``p = (1/3, 2/3)``, ``q = (2/3, 1/3)``, γ = 2): 10/9 kept token-wise, 11/9 with block
verification, 12/9 for a verifier that knew the joint probabilities
(``rules/lab/block.py`` computes all three as fractions).

Deviations: none in the rule. Edits and deterministic drafters are one-hot ``q`` rows
(still exact). At temperature 0 (one-hot ``p`` and ``q``) ``p'_i`` is 1 up to the first
mismatch and 0 after, ``h_i`` is 1 exactly at the last matching position before a
mismatch (at γ when all match) and 0 elsewhere: the same decision as the greedy token-wise
rule, so greedy rounds use that rule.
Random draws, in order: ``η_1..η_γ`` (all of them, whatever they decide), then the one
draw from ``r_τ``; the arithmetic is in float64 (each row renormalised there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec_core.rules.acceptance import BlockDecision, Verdict, acceptance_probability

#: Residual entries kept in :attr:`BlockDecision.residual_ids`.
RESIDUAL_TOP = 5


@dataclass(frozen=True)
class BlockWeights:
    """What the rule computes before any draw, for a block of ``γ`` drafts (float64).

    Attributes:
        weights: ``p'_1..p'_γ``. masses: ``S_0..S_γ`` (``S_γ = p'_γ``). stop_probs:
            ``h_1..h_γ``. keep_probs: ``P(τ = i)`` for ``i = 0..γ`` (sums to 1).
        excess: ``[γ + 1, V]`` float64, row ``i`` = ``[p'_i · p_{i+1} − q_{i+1}]+``
            (:meth:`residual` normalises one row, :attr:`residuals` all of them).
        accept_probs: token-wise ``a_i = min(1, p_i(y_i) / q_i(y_i))``, for comparison.
    """

    weights: tuple[float, ...]
    masses: tuple[float, ...]
    stop_probs: tuple[float, ...]
    keep_probs: tuple[float, ...]
    excess: torch.Tensor
    accept_probs: tuple[float, ...]

    def residual(self, i: int) -> torch.Tensor:
        """``r_i = norm(excess_i)``, ``[V]`` float64 (all-zero where ``S_i = 0``)."""
        mass = self.masses[i]
        return self.excess[i] / mass if mass > 0.0 else torch.zeros_like(self.excess[i])

    @property
    def residuals(self) -> torch.Tensor:
        """Every ``r_i``, ``[γ + 1, V]`` float64."""
        return torch.stack([self.residual(i) for i in range(len(self.masses))])


def block_weights(
    draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> BlockWeights:
    """``p'_i``, ``S_i``, ``h_i``, ``P(τ = i)`` and the residual rows of the module
    docstring.

    Args:
        draft_ids: ``[γ]`` int64 (γ may be 0). draft_probs: ``[γ, V]`` rows ``q_1..q_γ``.
        target_probs: ``[γ + 1, V]`` rows ``p_1..p_{γ+1}``.

    Raises:
        ValueError: ``q_i(y_i) <= 0`` (the draft could not have proposed ``y_i``).
    """
    gamma = draft_ids.shape[0]
    p = target_probs.double()
    p = p / p.sum(dim=-1, keepdim=True)  # [γ+1, V], float32 rows summed to 1 in float64
    q = draft_probs.double()
    q = torch.cat([q / q.sum(dim=-1, keepdim=True), torch.zeros_like(p[:1])])  # q_{γ+1} ≡ 0
    rows = torch.arange(gamma)
    p_y, q_y = p[rows, draft_ids].tolist(), q[rows, draft_ids].tolist()  # [γ] each
    accept = tuple(acceptance_probability(a, b) for a, b in zip(p_y, q_y, strict=True))
    weights = [1.0]
    for a, b in zip(p_y, q_y, strict=True):
        weights.append(min(1.0, weights[-1] * a / b))
    w = torch.tensor(weights, dtype=torch.float64)  # [γ+1], p'_0..p'_γ
    excess = (w[:, None] * p - q).clamp_min(0.0)  # [γ+1, V]
    masses = excess.sum(dim=-1).tolist()  # S_0..S_γ
    stop = []
    for i in range(1, gamma + 1):
        den = masses[i] + 1.0 - weights[i]
        stop.append(masses[i] / den if masses[i] > 0.0 and den > 0.0 else 0.0)
    keep = []
    for i in range(gamma + 1):
        later = 1.0
        for h in stop[i:]:
            later *= 1.0 - h
        keep.append((1.0 if i == 0 else stop[i - 1]) * later)
    return BlockWeights(tuple(weights[1:]), tuple(masses), tuple(stop), tuple(keep), excess, accept)


def verify_block(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> tuple[Verdict, BlockDecision]:
    """Block verification of one drafted block (Sun et al. 2025, Alg. 2; module docstring).

    Args:
        draft_ids: ``[γ]`` int64 CPU. draft_probs: ``[γ, V]`` float32 ``q_1..q_γ`` (one-hot
            rows for deterministic proposals). target_probs: ``[γ + 1, V]`` float32.
        generator: CPU ``torch.Generator``; draws ``η_1..η_γ`` then one token from
            ``r_τ``, in that order, so a round replays exactly.

    Returns:
        ``(verdict, decision)``: the :class:`Verdict` (``accepted`` = τ, ``accept_probs``
        token-wise ``a_i``, ``u`` = η) and the :class:`BlockDecision`.
    """
    gamma = draft_ids.shape[0]
    bw = block_weights(draft_ids, draft_probs, target_probs)
    draws = tuple(torch.rand((), generator=generator).item() for _ in range(gamma))
    tau = max(
        (i + 1 for i, (u, h) in enumerate(zip(draws, bw.stop_probs, strict=True)) if u < h),
        default=0,
    )
    source = bw.residual(tau)
    if bw.masses[tau] <= 0.0:  # τ = 0 with p_1 == q_1: a probability-0 event, use p
        source = target_probs[tau].double()
    token = int(torch.multinomial(source.float(), 1, generator=generator).item())
    token_wise = next(
        (i for i, (u, a) in enumerate(zip(draws, bw.accept_probs, strict=True)) if not u < a), gamma
    )
    top = torch.topk(source, min(RESIDUAL_TOP, source.shape[0]))
    shown = [
        (int(t), float(v))
        for t, v in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        if v > 0
    ]
    decision = BlockDecision(
        weights=bw.weights,
        stop_probs=bw.stop_probs,
        u=draws,
        kept=tau,
        token_wise=token_wise,
        resample_position=tau + 1,
        residual_mass=float(bw.masses[tau]),
        residual_ids=tuple(t for t, _ in shown),
        residual_probs=tuple(v for _, v in shown),
    )
    kind = "bonus" if tau == gamma else "correction"
    return Verdict(tau, token, kind, bw.accept_probs, draws), decision
