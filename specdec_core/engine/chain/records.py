"""The chain round as the statistics see it, and every statistic derived from a list of
them. Both the step machine (``engine/chain/session.py``) and the fast path
(``engine/chain/generate.py``) end each round with :func:`make_record`; the acceptance
rate, mean accepted length, histogram, per-position rates and the token strip are all
computed here from records, and nowhere else, so a number on any page can be recomputed
from the trace.

Status of each drafted position ``i`` (1..γ'):

* ``accepted`` — the rule accepted ``y_i`` and it was committed;
* ``rejected`` — the first position the rule rejected (its correction replaces it);
* ``discarded`` — after the first rejection: never checked by the rule;
* ``cut`` — after a stop (end-of-text, a stop string, ``max_new_tokens``, the context)
  that fell on an earlier *committed* draft of the same round, whatever the rule said of
  it: it was never committed and does not count as checked.

``accepted + rejected + discarded + cut = drafted``. A position is *checked* when its
status is ``accepted`` or ``rejected``: the acceptance rate α is the mean of
``overlap_i = Σ_x min(p_i(x), q_i(x))`` over checked positions only (Leviathan et al. 2023,
Def. 3.1: α = E[Σ min(p, q)] = 1 − TV(p, q); positions after a rejection have a prefix the
target never agreed to, so they do not estimate it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdec_core.core.records import (
    CHECKED,
    accepted_histogram,
    mean,
    round_kind,
    share_by_index,
    strip_order,
)
from specdec_core.core.words import CheckStatus, RoundKind, StripState, VerdictKind
from specdec_core.rules.acceptance import BlockDecision


@dataclass(frozen=True)
class RoundRecord:
    """The per-round record (plain values; pickles and serialises to JSON).

    Attributes:
        gamma: γ the drafter was asked for in this round (after shortening near
            ``max_new_tokens`` or the context end).
        drafted: ``[γ']`` drafted ids ``y_1..y_γ'`` (``γ' ≤ γ``: a drafter may propose
            fewer, prompt lookup may propose none).
        statuses: ``[γ']`` :data:`CheckStatus` per drafted position.
        overlaps: ``[γ']`` ``Σ_x min(p_i(x), q_i(x))`` per drafted position (float).
        appended: ids committed this round (accepted drafts + correction/bonus, cut short by
            a stop).
        kind: ``correction`` | ``bonus`` | ``stopped`` (a stop cut the commit short).
        block: what block verification computed and decided (``rules/block.py``); ``None``
            under the token-wise rule and in greedy rounds.
    """

    gamma: int
    drafted: tuple[int, ...]
    statuses: tuple[CheckStatus, ...]
    overlaps: tuple[float, ...]
    appended: tuple[int, ...]
    kind: RoundKind
    block: BlockDecision | None = None

    @property
    def accepted(self) -> int:
        """Committed drafts (0..γ')."""
        return self.statuses.count("accepted")

    @property
    def checked_overlaps(self) -> tuple[float, ...]:
        """``overlap`` of the checked positions (accepted or rejected)."""
        return tuple(o for o, s in zip(self.overlaps, self.statuses, strict=True) if s in CHECKED)


def round_statuses(drafted: int, rule_accepted: int, appended: int) -> tuple[CheckStatus, ...]:
    """Statuses of ``drafted`` positions when the rule accepted ``rule_accepted`` drafts and
    the commit appended ``appended`` tokens (≥ 1).

    The commit proposes ``rule_accepted + 1`` tokens (the accepted drafts and the
    correction/bonus). When a stop leaves ``appended ≤ rule_accepted``, the stop fell on
    committed draft ``appended``: drafts ``1..appended`` are accepted and every later one is
    ``cut``. Otherwise: ``accepted``·n, then ``rejected`` and ``discarded``·rest (if n < γ').

    Raises:
        ValueError: counts out of range.
    """
    if not 0 <= rule_accepted <= drafted or not 1 <= appended <= rule_accepted + 1:
        raise ValueError(
            f"inconsistent round: drafted={drafted}, accepted={rule_accepted}, appended={appended}"
        )
    if appended <= rule_accepted:
        return ("accepted",) * appended + ("cut",) * (drafted - appended)
    rest = drafted - rule_accepted
    return ("accepted",) * rule_accepted + (("rejected",) + ("discarded",) * (rest - 1))[:rest]


def make_record(
    gamma: int,
    drafted: Sequence[int],
    rule_accepted: int,
    overlaps: Sequence[float],
    appended: Sequence[int],
    rule_kind: VerdictKind,
    block: BlockDecision | None = None,
) -> RoundRecord:
    """The record of a finished round (see :func:`round_statuses`); ``kind`` becomes
    ``stopped`` when the commit appended fewer than ``rule_accepted + 1`` tokens;
    ``block``: block verification's decision, when that rule decided."""
    statuses = round_statuses(len(drafted), rule_accepted, len(appended))
    kind = round_kind(rule_accepted, len(appended), rule_kind)
    return RoundRecord(
        gamma=int(gamma),
        drafted=tuple(int(t) for t in drafted),
        statuses=statuses,
        overlaps=tuple(float(o) for o in overlaps),
        appended=tuple(int(t) for t in appended),
        kind=kind,
        block=block,
    )


@dataclass(frozen=True)
class AcceptanceStats:
    """Statistics of a list of rounds (all derived by :func:`summarize`).

    Attributes:
        rounds: rounds (= target verification forwards).
        drafted: drafted positions, summed. checked: positions accepted or rejected.
        accepted: committed drafts, summed. cut: drafts cut by a stop.
        acceptance_rate: α, mean ``overlap`` over checked positions (0.0 when none).
        mean_accepted: committed drafts per round (0..γ).
        tokens_per_round: committed tokens per round (mean accepted + 1 except in a round
            cut by a stop).
        accepted_histogram: ``[n]`` rounds that committed exactly ``n`` drafts.
        per_position_acceptance: ``[i]`` share of rounds whose draft ``i + 1`` was committed,
            among rounds that drafted position ``i + 1`` and did not cut it.
        conditional_acceptance: ``[n − 1]`` α_n, draft ``n``'s rate given drafts ``< n``
            were accepted (:func:`conditional_acceptance`).
        empty_rounds: rounds asked for γ > 0 drafts that proposed none.
    """

    rounds: int
    drafted: int
    checked: int
    accepted: int
    cut: int
    acceptance_rate: float
    mean_accepted: float
    tokens_per_round: float
    accepted_histogram: tuple[int, ...]
    per_position_acceptance: tuple[float, ...]
    conditional_acceptance: tuple[float, ...]
    empty_rounds: int


def summarize(records: Sequence[RoundRecord]) -> AcceptanceStats:
    """Every acceptance statistic of ``records``, by the definitions above."""
    n_rounds = len(records)
    overlaps = [o for r in records for o in r.checked_overlaps]
    accepted = sum(r.accepted for r in records)
    marks = ([None if s == "cut" else s == "accepted" for s in r.statuses] for r in records)
    return AcceptanceStats(
        rounds=n_rounds,
        drafted=sum(len(r.drafted) for r in records),
        checked=len(overlaps),
        accepted=accepted,
        cut=sum(r.statuses.count("cut") for r in records),
        acceptance_rate=mean(sum(overlaps), len(overlaps)),
        mean_accepted=mean(accepted, n_rounds),
        tokens_per_round=mean(sum(len(r.appended) for r in records), n_rounds),
        accepted_histogram=accepted_histogram(records),
        per_position_acceptance=share_by_index(marks),
        conditional_acceptance=conditional_acceptance(records),
        empty_rounds=sum(1 for r in records if r.gamma > 0 and not r.drafted),
    )


def conditional_acceptance(records: Sequence[RoundRecord]) -> tuple[float, ...]:
    """Per draft position ``n`` (``[n − 1]``): ``α_n``, the mean ``overlap`` at ``n`` over the
    rounds whose drafts ``1..n − 1`` were accepted and whose draft ``n`` was checked
    (accepted or rejected; a cut one does not count). Unlike ``per_position_acceptance``
    (committed among all rounds that drafted ``n``) it conditions on the accepted prefix:
    the per-position rate EAGLE reports as ``(n − 1)``-α (Li et al. 2024). Greedy overlaps
    are 0 or 1, so ``α_n`` is then the share accepted. Empty when no position was checked."""
    total: list[float] = []
    seen: list[int] = []
    for r in records:
        for i, (overlap, status) in enumerate(zip(r.overlaps, r.statuses, strict=True)):
            if status not in CHECKED:
                break
            if i == len(seen):
                total.append(0.0)
                seen.append(0)
            total[i] += overlap
            seen[i] += 1
            if status != "accepted":
                break
    return tuple(t / n for t, n in zip(total, seen, strict=True))


def strip_states(record: RoundRecord) -> list[tuple[int, StripState]]:
    """``(token id, state)`` of one round in :func:`strip_order`; the target's token has
    state ``correction``/``bonus``, or ``committed`` when the round had no drafts."""
    target = record.kind != "stopped"
    out: list[tuple[int, StripState]] = []
    for i in strip_order(record.statuses, target):
        if i is None:
            out.append((record.appended[-1], record.kind if record.drafted else "committed"))
        else:
            out.append((record.drafted[i], record.statuses[i]))
    return out
