"""What every round record has, chain (``engine/chain/records.py``) or tree
(``engine/tree/records.py``), and the statistics both shapes derive the same way (the
accepted-length histogram, per-position shares, the token strip's order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from specdec_core.core.words import STRIP_WORDS, CheckStatus, RoundKind, StripState, VerdictKind

CHECKED: tuple[CheckStatus, ...] = ("accepted", "rejected")


class Record(Protocol):
    """What every round record has, chain (:class:`RoundRecord`) or tree
    (:class:`~specdec_core.engine.tree.records.TreeRoundRecord`): the ids the round
    ``appended``, how it ended (``kind``) and how many drafted tokens it committed
    (``accepted``)."""

    @property
    def appended(self) -> tuple[int, ...]: ...

    @property
    def kind(self) -> RoundKind: ...

    @property
    def accepted(self) -> int: ...


def accepted_histogram(records: Sequence[Record]) -> tuple[int, ...]:
    """``[n]`` rounds that committed exactly ``n`` drafted tokens, ``n = 0..max`` (empty
    for no rounds)."""
    accepted = [r.accepted for r in records]
    histogram = [0] * (max(accepted, default=0) + 1) if records else []
    for a in accepted:
        histogram[a] += 1
    return tuple(histogram)


def share_by_index(marks: Iterable[Sequence[bool | None]]) -> tuple[float, ...]:
    """Per index ``i``: the share of ``True`` among the rows whose mark ``i`` is not
    ``None`` (0.0 where no row counts); one row per round, rows of any length. The chain's
    per-position acceptance and the tree's per-depth acceptance."""
    seen: list[int] = []
    hits: list[int] = []
    for row in marks:
        for i, mark in enumerate(row):
            if i == len(seen):
                seen.append(0)
                hits.append(0)
            if mark is not None:
                seen[i] += 1
                hits[i] += mark
    return tuple(h / n if n else 0.0 for h, n in zip(hits, seen, strict=True))


def mean(total: float, count: int) -> float:
    """``total / count``, 0.0 for no count (a statistic of no rounds)."""
    return total / count if count else 0.0


def round_kind(rule_accepted: int, appended: int, rule_kind: VerdictKind) -> RoundKind:
    """The round's kind, chain or tree: ``stopped`` when a stop cut the commit short (it
    appended fewer than the ``rule_accepted + 1`` tokens the rule proposed), else the
    rule's ``rule_kind`` (``correction`` | ``bonus``)."""
    return "stopped" if appended < rule_accepted + 1 else rule_kind


#: States a token of a chain round's strip can have (the first seven :data:`StripState`):
#: a draft's :data:`CheckStatus`, or the target's own token of the round: ``correction`` /
#: ``bonus``, or ``committed`` in a round where the drafter proposed nothing.
STRIP_STATES: tuple[StripState, ...] = STRIP_WORDS[:7]


def strip_order(statuses: Sequence[str], target_token: bool) -> list[int | None]:
    """The order a round's tokens are shown in, one house convention for every strip:
    the committed drafts, the rejected draft, the target's own token (correction or bonus;
    ``None`` in the list), then the discarded and cut drafts. Ints are 0-based drafted
    positions; ``target_token`` is false when a stop on a draft left no target token."""
    first = [i for i, s in enumerate(statuses) if s in CHECKED]
    rest = [i for i, s in enumerate(statuses) if s not in CHECKED]
    return first + ([None] if target_token else []) + rest
