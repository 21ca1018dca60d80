"""Long measurements under a time budget, and whether a result supports a conclusion.

A measurement that a lesson waits for is a list of passes (a warm-up, then timed passes);
:class:`Budget` decides before each pass whether it still fits: it stops when the time
spent plus one more pass at the mean pace so far would pass the budget, so a run ends
near its budget instead of past it, and the passes already done are the (partial) result.
:func:`conclusive` is the one decision "may the page rank or conclude from these times".

Pure: no torch, no Streamlit; the clock is injected (tests use a fake one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specdec_core.bench.timing import Verdict

Clock = Callable[[], float]


@dataclass
class Budget:
    """``seconds`` of wall time (``None``: unbounded) for ``clock`` (seconds, monotonic),
    counted from :meth:`start` (the first :meth:`allows` starts it)."""

    seconds: float | None
    clock: Clock = field(default=time.monotonic)
    started: float | None = None

    def start(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (0 before it)."""
        return 0.0 if self.started is None else self.clock() - self.started

    def allows(self, done: int) -> bool:
        """Whether the next pass may start after ``done`` passes: ``elapsed + elapsed /
        done ≤ seconds`` (the mean pass so far fits in what is left); always for the first
        pass and for an unbounded budget."""
        if self.started is None:
            self.start()
        if self.seconds is None or done <= 0:
            return True
        spent = self.elapsed()
        return spent + spent / done <= self.seconds


def conclusive(verdict: Verdict, passes: int) -> bool:
    """Whether timings support a ranking or a conclusion: the repeats agree
    (:func:`bench.timing.judge` found nothing, ``not verdict.busy``) and at least two
    timed passes ran (one pass has no spread to judge the load by)."""
    return not verdict.busy and passes >= 2
