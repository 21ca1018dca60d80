"""A run's round timeline: when each model forward started and ended, and where each
round began and ended, measured by the fast path's own timers (``generate(...,
trace_timeline=True)``; the forwards are timed inside ``ModelCache`` as always, the list
is only kept when asked). Times in ms from the start of the run.

Everything on the time axis that is not a forward bar is the run's *overhead* (sampling
or argmax, the acceptance rule, commit, cache rollback, Python): the bars plus the
overhead are exactly the run's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

SpanKind = Literal["target", "draft", "verify"]


@dataclass(frozen=True)
class Span:
    """One model forward: ``target`` (a target-only step), ``draft`` (one timed step of
    the drafter: a draft-model forward, a head pass, a GRU step) or ``verify`` (the
    target's verification forward of a round)."""

    kind: SpanKind
    start_ms: float
    end_ms: float
    round: int  # 0-based round (target-only: the token's index)

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass(frozen=True)
class RoundSpan:
    """One round (target-only: one token) from its first clock read to its commit."""

    start_ms: float
    end_ms: float
    drafted: int  # drafts proposed (0 in target-only mode)
    committed: int  # tokens committed by the round


@dataclass(frozen=True)
class Timeline:
    """The forwards and rounds of one run on one time axis (``mode``: ``speculative`` or
    ``autoregressive``); ``total_ms`` is the run's measured wall time; ``drafter`` the
    draft source's name and ``draft_forwards`` the forwards it counted (``""`` / 0 in
    target-only mode)."""

    mode: str
    total_ms: float
    forwards: tuple[Span, ...]
    rounds: tuple[RoundSpan, ...]
    drafter: str = ""
    draft_forwards: int = 0

    @property
    def forward_ms(self) -> float:
        """Sum of the forward bars."""
        return sum(s.ms for s in self.forwards)

    @property
    def overhead_ms(self) -> float:
        """Wall time that is not a forward bar."""
        return self.total_ms - self.forward_ms


class ForwardClock:
    """The time a drafter spends in its own model calls, for a drafter without a
    :class:`~specdec_core.core.kvcache.ModelCache` (which keeps the same two fields):
    ``forward_ms`` in ms and, when a caller sets ``spans`` to a list (the run's timeline),
    the ``(start, end)`` ``perf_counter`` pair of each call."""

    def __init__(self) -> None:
        self.forward_ms = 0.0
        self.spans: list[tuple[float, float]] | None = None

    def add(self, started: float) -> None:
        """Count the call that began at ``started`` (read the clock after a device sync)."""
        ended = time.perf_counter()
        self.forward_ms += (ended - started) * 1e3
        if self.spans is not None:
            self.spans.append((started, ended))


def _round_of(start: float, marks: Sequence[tuple[float, float, int, int]]) -> int:
    for i, (lo, hi, _, _) in enumerate(marks):
        if lo <= start <= hi:
            return i
    return max(0, len(marks) - 1)


def build_timeline(
    mode: str,
    started: float,
    total_ms: float,
    target_spans: Sequence[tuple[float, float]],
    draft_spans: Sequence[tuple[float, float]],
    marks: Sequence[tuple[float, float, int, int]],
    drafter: str = "",
    draft_forwards: int = 0,
) -> Timeline:
    """A :class:`Timeline` from ``perf_counter`` pairs: the target's forwards and the
    drafter's timed steps, and ``(start, end, drafted, committed)`` per round, all relative
    to ``started``."""

    def ms(t: float) -> float:
        return (t - started) * 1e3

    target_kind: SpanKind = "target" if mode == "autoregressive" else "verify"
    spans = [
        Span(kind, ms(a), ms(b), _round_of(a, marks))
        for kind, pairs in ((target_kind, target_spans), ("draft", draft_spans))
        for a, b in pairs
    ]
    spans.sort(key=lambda s: s.start_ms)
    rounds = tuple(RoundSpan(ms(a), ms(b), d, c) for a, b, d, c in marks)
    return Timeline(mode, total_ms, tuple(spans), rounds, drafter, draft_forwards)
