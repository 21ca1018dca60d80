"""The analytic cost model of speculative decoding (Leviathan et al. 2023, §3.3–3.4).

Symbols: α — expected acceptance probability per drafted token (``Σ min(p, q)`` averaged);
γ — draft length; ``c`` — cost ratio: one draft-model step / one target step.

Beyond the paper: measured rounds advance by per-position rates ``α_n``
(:func:`expected_tokens_given_position_rates`; what-if curves over γ keep one α); a round
is priced by what its drafter runs (:func:`draft_round_ms`) and its verification at the
measured cost ``t(g + 1)`` of a forward over ``g + 1`` tokens, not one target step; a
reference device (:data:`REFERENCE_DEVICES`) keeps figures measured on a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


def expected_tokens_per_round(alpha: float, gamma: int) -> float:
    """``E[tokens advanced per round] = (1 − α^{γ+1}) / (1 − α)`` (Leviathan Eq. 1);
    ``γ + 1`` at ``α = 1``.

    Raises:
        ValueError: ``alpha`` outside [0, 1] or ``gamma < 0``.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if gamma < 0:
        raise ValueError(f"gamma must be ≥ 0, got {gamma}")
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def walltime_improvement(alpha: float, gamma: int, c: float) -> float:
    """Expected walltime improvement factor ``(1 − α^{γ+1}) / ((1 − α)(γc + 1))``
    (Leviathan et al. 2023, Thm 3.8), assuming verification costs one target step."""
    if c < 0:
        raise ValueError(f"cost ratio c must be ≥ 0, got {c}")
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + 1.0)


def best_gamma(alpha: float, c: float, max_gamma: int = 16) -> int:
    """γ in ``1..max_gamma`` maximising :func:`walltime_improvement` (smallest on ties)."""
    return max(range(1, max_gamma + 1), key=lambda g: (walltime_improvement(alpha, g, c), -g))


def per_token_cost_ms(
    draft_ms: float, verify_ms: float, overhead_ms: float, advanced: float
) -> float:
    """Per-token cost of one round: ``(draft + verify + overhead) / tokens advanced`` (ms).

    Raises:
        ValueError: ``advanced ≤ 0`` (every round advances at least one token).
    """
    if advanced <= 0:
        raise ValueError(f"tokens advanced must be > 0, got {advanced}")
    return (draft_ms + verify_ms + overhead_ms) / advanced


def predicted_speedup(
    alpha: float,
    gamma: int,
    target_step_ms: float,
    draft_step_ms: float,
    verify_ms: float,
    overhead_ms: float = 0.0,
) -> float:
    """Speed-up over target-only decoding predicted from measured times:
    ``target_step_ms / per_token_cost_ms(γ·draft_step, verify, overhead, E[tokens])``.
    With ``verify_ms == target_step_ms`` and no overhead this equals
    :func:`walltime_improvement` with ``c = draft_step_ms / target_step_ms``."""
    advanced = expected_tokens_per_round(alpha, gamma)
    cost = per_token_cost_ms(gamma * draft_step_ms, verify_ms, overhead_ms, advanced)
    return target_step_ms / cost


# Reference cases of the walltime-improvement formula (α, γ, c): the textbook table the
# speed page reproduces (values computed by :func:`walltime_improvement`; the test suite
# pins them to the hand-worked numbers of ``cases/textbook.json``).
WALLTIME_CASES: tuple[tuple[float, int, float], ...] = (
    (0.6, 2, 0.0),
    (0.7, 3, 0.0),
    (0.8, 5, 0.0),
    (0.9, 10, 0.0),
    (0.8, 4, 0.05),
    (0.6, 4, 0.2),
)


def cost_ratio(draft_step_ms: float, target_step_ms: float) -> float:
    """``c = draft step / target step`` (Leviathan et al. 2023, §3.3), both in ms.

    Raises:
        ValueError: ``target_step_ms ≤ 0`` or ``draft_step_ms < 0``.
    """
    if target_step_ms <= 0 or draft_step_ms < 0:
        raise ValueError(
            f"step times must be target > 0 and draft ≥ 0 ms, got {target_step_ms}, {draft_step_ms}"
        )
    return draft_step_ms / target_step_ms


def improvement_curve(
    alpha: float, c: float, gammas: range | list[int] = range(1, 9)
) -> list[tuple[int, float, float]]:
    """``[(γ, E[tokens per round], walltime improvement)]`` for each γ in ``gammas``
    (Leviathan et al. 2023, Eq. 1 and Thm 3.8). Raises ``ValueError`` like its parts."""
    return [
        (g, expected_tokens_per_round(alpha, g), walltime_improvement(alpha, g, c)) for g in gammas
    ]


def forward_time_speedup(
    alpha: float,
    gamma: int,
    target_step_ms: float,
    draft_step_ms: float,
    verify_ms: float,
) -> float:
    """Speed-up predicted from model-forward times alone (no overhead): what a perfectly
    lean loop would reach. ``verify_ms`` is the measured ``γ + 1``-token verification
    forward (usually dearer than one target step, which Thm 3.8 assumes)."""
    return predicted_speedup(alpha, gamma, target_step_ms, draft_step_ms, verify_ms, 0.0)


def speedup_from_cost(target_step_ms: float, per_token_ms: float) -> float:
    """``target step / per-token cost``: > 1 means the round beats target-only decoding.

    Raises:
        ValueError: a cost ≤ 0.
    """
    if target_step_ms <= 0 or per_token_ms <= 0:
        raise ValueError(f"costs must be > 0 ms, got {target_step_ms}, {per_token_ms}")
    return target_step_ms / per_token_ms


# ------------------------------------------------------------------ measured inputs
def expected_tokens_given_drafts(alpha: float, drafts: Sequence[int]) -> float:
    """Expected tokens advanced per round when round ``r`` proposed ``g_r`` drafts (a
    drafter may propose fewer than γ: prompt lookup often proposes none):

    ``E = (1/R) Σ_r (1 − α^{g_r+1}) / (1 − α)``.

    Leviathan et al. 2023, Eq. 1 (γ drafts accepted independently with probability α)
    per round with its own draft count, averaged over rounds (linearity of expectation);
    with every ``g_r = γ``, :func:`expected_tokens_per_round`. Empty ``drafts``: 0.
    Computed as :func:`expected_tokens_given_position_rates` with one rate, α.

    Raises:
        ValueError: ``alpha`` outside [0, 1].
    """
    return expected_tokens_given_position_rates((alpha,), drafts)


def expected_tokens_given_position_rates(alphas: Sequence[float], drafts: Sequence[int]) -> float:
    """Expected tokens advanced per round, round ``r`` having proposed ``g_r`` drafts, from
    per-position acceptance rates: ``E = (1/R) Σ_r (1 + Σ_{i=1..g_r} Π_{j≤i} α_j)`` (0 for
    no round), ``α_j`` the rate at draft position ``j`` given drafts ``< j`` were accepted
    (``records.conditional_acceptance``; EAGLE's ``(j − 1)``-α, Li et al. 2024); a position
    past ``alphas`` holds the last rate. Leviathan et al.'s Eq. 1 assumes one α at every
    position, which a drafter whose acceptances come in runs breaks (prompt lookup: a copied
    span matches until it diverges). With one rate ``(α,)`` this is
    :func:`expected_tokens_given_drafts`.

    Raises:
        ValueError: a rate outside [0, 1], or a round with drafts and no rate.
    """
    if any(not 0.0 <= a <= 1.0 for a in alphas) or (not alphas and any(g > 0 for g in drafts)):
        raise ValueError(f"need rates in [0, 1] for every drafted position, got {list(alphas)}")
    total = 0.0
    for g in drafts:
        reach = tokens = 1.0
        for i in range(int(g)):
            reach *= alphas[min(i, len(alphas) - 1)]
            tokens += reach
        total += tokens
    return total / len(drafts) if drafts else 0.0


def curve_ms(curve: Mapping[int, float], k: float) -> float:
    """The forward time for ``k`` new tokens read off a measured curve ``{k: ms}``,
    linearly interpolated between measured ``k`` (a fractional ``k`` is a mean draft count
    + 1) and held at the ends.

    Raises:
        ValueError: an empty curve.
    """
    if not curve:
        raise ValueError("the forward-time curve is empty")
    ks = sorted(curve)
    if k <= ks[0]:
        return float(curve[ks[0]])
    for lo, hi in zip(ks, ks[1:], strict=False):
        if k <= hi:
            share = (k - lo) / (hi - lo)
            return float(curve[lo] + share * (curve[hi] - curve[lo]))
    return float(curve[ks[-1]])


def curve_improvement(alpha: float, gamma: int, c: float, curve: Mapping[int, float]) -> float:
    """Walltime improvement with a measured verification cost:
    ``E[tokens] / (γc + t(γ+1)/t(1))``. With a flat curve (``t(k) = t(1)``) this is
    Leviathan et al.'s Thm 3.8, :func:`walltime_improvement`."""
    verify_ratio = curve_ms(curve, gamma + 1) / curve_ms(curve, 1)
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + verify_ratio)


def best_gamma_on_curve(alpha: float, c: float, curve: Mapping[int, float]) -> int:
    """γ maximising :func:`curve_improvement` over the γ the curve covers
    (``γ + 1 ≤ max k``; smallest on ties; 1 when the curve is shorter)."""
    top = max(1, max(curve) - 1)
    return max(range(1, top + 1), key=lambda g: (curve_improvement(alpha, g, c, curve), -g))


def speedup_from_measured(
    tokens_per_round: float,
    target_ms_per_token: float,
    draft_ms_per_round: float,
    verify_ms: float,
    overhead_ms_per_round: float,
) -> float:
    """Speed-up over target-only decoding whose cost per token (model forward *and* loop
    overhead) is ``target_ms_per_token``: ``target_ms_per_token / per-token cost`` of a round
    of ``draft + verify + overhead`` ms advancing ``tokens_per_round``. The seed lesson:
    ``speedup_from_measured(3, 20, 8, 25, 0) = 20 / 11``.

    Raises:
        ValueError: like :func:`per_token_cost_ms` and :func:`speedup_from_cost`.
    """
    cost = per_token_cost_ms(draft_ms_per_round, verify_ms, overhead_ms_per_round, tokens_per_round)
    return speedup_from_cost(target_ms_per_token, cost)


def predicted_run_ms(
    new_tokens: int,
    tokens_per_round: float,
    prefill_ms: float,
    draft_ms_per_round: float,
    verify_ms: float,
    overhead_ms_per_round: float,
    extra_target_forwards: float = 0.0,
) -> float:
    """Predicted wall time (ms) of a speculative run of ``new_tokens``: ``R = max(1, N /
    tokens_per_round)`` rounds of ``draft + verify + overhead``, except that the first
    round's verification is the prompt's forward, ``prefill_ms`` (measured on the
    target-only lane, the same forward over the prompt):

    ``T = prefill + R · (draft + overhead) + (R − 1 + extra) · verify``.

    ``extra_target_forwards``: target forwards the drafter runs beyond one per round (the
    EAGLE head's own prefill in the first round: that round's verification is then a
    forward of its own, priced as one more ``verify``).

    Beyond the per-token formula (:func:`per_token_cost_ms`): on a short run the prompt's
    forward is a large share, and a run of ``R < N`` rounds spreads it over fewer rounds
    than target-only decoding spreads it over tokens; leaving it in the per-round verify
    over-predicts the speed-up of drafters that advance little per round.

    Raises:
        ValueError: ``tokens_per_round ≤ 0`` or ``new_tokens < 1``.
    """
    if tokens_per_round <= 0 or new_tokens < 1:
        raise ValueError(
            f"need tokens per round > 0 and ≥ 1 new token, got {tokens_per_round}, {new_tokens}"
        )
    rounds = max(1.0, new_tokens / tokens_per_round)
    return (
        prefill_ms
        + rounds * (draft_ms_per_round + overhead_ms_per_round)
        + (rounds - 1 + extra_target_forwards) * verify_ms
    )


# ------------------------------------------------------------------ what a drafter runs
#: How a drafter spends its drafting time (``Drafter.draft_cost``): ``serial`` one step per
#: draft (draft model, early exit, the EAGLE head's own step); ``one_forward`` one forward
#: for the whole block (PARD: γ − 1 mask tokens); ``heads`` one head evaluation per draft,
#: no model forward (MTP); ``none`` no forward, only the lookup (prompt lookup).
DraftCost = Literal["serial", "one_forward", "heads", "none"]
DRAFT_COSTS: tuple[str, ...] = ("serial", "one_forward", "heads", "none")


def draft_round_ms(cost: str, drafts: int, step_ms: float, proposal_ms: float = 0.0) -> float:
    """Milliseconds one drafting round of ``drafts`` tokens costs, by what runs:
    ``serial`` / ``heads``: ``drafts × step_ms`` (a draft step, or one head evaluation);
    ``one_forward``: ``proposal_ms``, one measured forward whatever ``drafts`` (≥ 1);
    ``none``: ``proposal_ms``, the measured lookup, in every round (a lookup that finds
    no match has still scanned the context). Otherwise a round that drafts nothing costs 0.

    Raises:
        ValueError: an unknown ``cost`` or a negative time.
    """
    if cost not in DRAFT_COSTS:
        raise ValueError(f"draft cost must be one of {', '.join(DRAFT_COSTS)}, got {cost!r}")
    if step_ms < 0 or proposal_ms < 0:
        raise ValueError(f"draft times must be ≥ 0 ms, got {step_ms}, {proposal_ms}")
    if cost == "none":
        return proposal_ms
    if drafts <= 0:
        return 0.0
    return proposal_ms if cost == "one_forward" else drafts * step_ms


def mean_draft_round_ms(
    cost: str, drafts: Sequence[int], step_ms: float, proposal_ms: float = 0.0
) -> float:
    """:func:`draft_round_ms` averaged over rounds that drafted ``drafts[r]`` each (0 for
    no round)."""
    if not drafts:
        return 0.0
    return sum(draft_round_ms(cost, int(g), step_ms, proposal_ms) for g in drafts) / len(drafts)


@dataclass(frozen=True)
class ReferenceDevice:
    """Figures measured on a device other than this one (embedded pair, greedy, γ = 4,
    128 tokens, the app's own ``bench``): the target alone's tokens/s and step, the draft
    model's step and ``c``, the range of ``t(k)/t(1)`` for ``k = 2 … 9``, and the measured
    speed-up per drafter (HF assisted as a low–high range)."""

    device: str
    software: str
    target_tokens_per_s: float
    target_step_ms: float
    draft_step_ms: float
    c: float
    verify_ratio: tuple[float, float]
    speedup: tuple[tuple[str, float], ...]
    hf_assisted: tuple[float, float]


#: An NVIDIA H200 (torch 2.11 + CUDA 13, transformers 5.24): launch-bound, every forward
#: costs about the same whatever its width, so a 2-layer draft step is 0.70 of a 4-layer
#: target step and only prompt lookup (no forward) pays.
REFERENCE_DEVICES: tuple[ReferenceDevice, ...] = (
    ReferenceDevice(
        device="NVIDIA H200",
        software="torch 2.11 + CUDA 13, transformers 5.24",
        target_tokens_per_s=570.0,
        target_step_ms=1.69,
        draft_step_ms=1.18,
        c=0.70,
        verify_ratio=(1.15, 1.24),
        speedup=(("ngram", 1.89), ("model", 0.43), ("eagle", 0.81), ("mtp", 0.82), ("block", 0.94)),
        hf_assisted=(0.26, 0.37),
    ),
)
