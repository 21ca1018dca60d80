"""Whether a set of timings supports a conclusion: the spread of repeats, how a timing was
measured, and the verdict "this machine is too busy to measure this now".

A timing on a shared machine is a sample of the machine's load as much as of the model:
on a busy 2-core CPU the verify-cost curve's ``t(2) / t(1)`` was seen anywhere from 0.38
to 10.98 and its best γ jumped from 1 to 4 between two runs. Every timing the app shows is
therefore a median over interleaved repeats after a warm-up, shown with its spread, and
checked here before anything is concluded from it:

- **repeats disagree**: the median of one timing's repeats is uncertain by more than
  :data:`BUSY_SPREAD` of itself. Its standard error is estimated from the interquartile
  range, so one stray repeat does not condemn the rest: ``σ ≈ (q3 − q1) / 1.349`` and
  ``SE(median) ≈ 1.2533 · σ / √n`` (the large-sample error of a normal sample's median),
  i.e. ``0.929 · (q3 − q1) / √n``. More repeats make the median firmer: at n = 3 the
  middle half may span ≈ 28 % of the median, at n = 15 (the curve) ≈ 63 %. (A first
  version judged the raw spread, ``(q3 − q1) / median > 0.25``, and called every curve on
  this 2-core machine "too busy" even at load ≈ 2, where five curves in a row agreed on
  t(k)/t(1) within ±10 % and all gave the same best γ.)
- **not monotone**: a forward over more new tokens measured cheaper than one over fewer,
  ``t(k) < (1 − MONOTONE_TOL) · max_{j<k} t(j)`` (a wider forward does at least the work of
  a narrower one);
- **superlinear**: ``t(k) > (1 + MONOTONE_TOL) · k · t(1)`` (one forward over ``k`` tokens
  costs at most ``k`` single steps: it does their work with fewer weight reads);
- **load changed**: the same step measured twice in one measurement (the target-only run's
  steady step, over a context that grows through the run, and the curve's ``t(1)``, over
  the prompt) differs by more than :data:`SAME_STEP_SPREAD` of the smaller (a
  run seen: 7.7 ms against 2.13 ms).

Pure: no torch, no Streamlit; tested with crafted timings (``tests/test_timing.py``).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

BUSY_SPREAD = 0.15  # the median of one timing's repeats may be uncertain by this fraction
MONOTONE_TOL = 0.10  # t(k) may dip this far below an earlier t(j) (and exceed k·t(1)) by noise
SAME_STEP_SPREAD = 0.5  # one step measured twice (different contexts) may differ this much
_IQR_TO_MEDIAN_SE = 1.2533 / 1.349  # SE(median) per unit of IQR, times √n (module doc)

# reasons for a "too busy" verdict (string keys sp_busy_<reason> name them on screen)
REPEATS_DISAGREE = "repeats"
NOT_MONOTONE = "monotone"
SUPERLINEAR = "superlinear"
LOAD_CHANGED = "load"


@dataclass(frozen=True)
class Spread:
    """Summary of the repeats of one timing (ms, or any unit): ``median``, ``low`` (min),
    ``high`` (max), the quartiles ``q1`` / ``q3`` (``statistics.quantiles``, inclusive
    method) and ``n`` repeats. One repeat: every field is that value."""

    median: float
    low: float
    high: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        """The spread of ``samples``.

        Raises:
            ValueError: no samples.
        """
        xs = sorted(float(x) for x in samples)
        if not xs:
            raise ValueError("a spread needs at least one sample")
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else xs * 3
        return cls(statistics.median(xs), xs[0], xs[-1], q1, q3, len(xs))

    @property
    def rel_iqr(self) -> float:
        """``(q3 − q1) / median``: how far the middle half of the repeats disagree (0 with
        one repeat or a zero median)."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0

    @property
    def rel_median_error(self) -> float:
        """The standard error of the median as a fraction of it, from the quartiles:
        ``0.929 · (q3 − q1) / (√n · median)`` (module doc; 0 with one repeat)."""
        return _IQR_TO_MEDIAN_SE * self.rel_iqr / math.sqrt(self.n) if self.n > 1 else 0.0

    def disagrees(self, fraction: float = BUSY_SPREAD) -> bool:
        """The repeats leave the median uncertain by more than ``fraction`` of itself."""
        return self.rel_median_error > fraction


@dataclass(frozen=True)
class HowMeasured:
    """How a timing was measured, for the label next to it: ``at`` (seconds since the
    epoch, when it finished), ``repeats`` timed per variant after ``warmup`` untimed
    passes, ``tokens`` (new tokens per run, or the widest forward of a curve), ``load``
    (the 1-minute load average when it finished; ``None`` where the OS has none) and
    ``cpus`` (logical CPUs)."""

    at: float
    repeats: int
    warmup: int
    tokens: int
    load: float | None
    cpus: int

    @classmethod
    def now(cls, repeats: int, warmup: int, tokens: int) -> HowMeasured:
        """Stamp a measurement that just finished (reads ``os.getloadavg`` once)."""
        try:
            load: float | None = round(os.getloadavg()[0], 2)
        except (OSError, AttributeError):  # not on this OS
            load = None
        return cls(time.time(), repeats, warmup, tokens, load, os.cpu_count() or 1)


@dataclass(frozen=True)
class Verdict:
    """``busy``: the timings do not support a conclusion; ``reasons``: which checks failed
    (:data:`REPEATS_DISAGREE`, :data:`NOT_MONOTONE`, :data:`SUPERLINEAR`,
    :data:`LOAD_CHANGED`), in that order, each once."""

    busy: bool
    reasons: tuple[str, ...] = ()

    @classmethod
    def from_reasons(cls, reasons: Sequence[str]) -> Verdict:
        order = (REPEATS_DISAGREE, NOT_MONOTONE, SUPERLINEAR, LOAD_CHANGED)
        found = tuple(r for r in order if r in reasons)
        return cls(bool(found), found)


def curve_reasons(target_ms: Sequence[float], tol: float = MONOTONE_TOL) -> list[str]:
    """Shape checks of a verify-cost curve ``t(1) … t(K)`` (ms, medians): not monotone
    non-decreasing within ``tol``, or a ``k``-token forward dearer than ``k`` single
    steps by more than ``tol``. Empty list: the shape is physically sensible."""
    t1 = target_ms[0] if target_ms else 0.0
    dips = any(ms < (1.0 - tol) * max(target_ms[:i]) for i, ms in enumerate(target_ms) if i)
    steep = t1 > 0 and any(ms > (1.0 + tol) * k * t1 for k, ms in enumerate(target_ms, 1))
    return [r for r, bad in ((NOT_MONOTONE, dips), (SUPERLINEAR, steep)) if bad]


def judge(
    spreads: Sequence[Spread] = (),
    curve_ms: Sequence[float] = (),
    same_step: tuple[float, float] | None = None,
    fraction: float = BUSY_SPREAD,
    same_fraction: float = SAME_STEP_SPREAD,
) -> Verdict:
    """The verdict on one measurement: every timing's repeats (``spreads``) agree within
    ``fraction``, the curve (``curve_ms``, may be empty) passes :func:`curve_reasons`, and
    the same step measured twice (``same_step``: two ms values, e.g. the target-only run's
    steady step and the curve's ``t(1)``) agrees within ``same_fraction`` of the smaller."""
    reasons = [REPEATS_DISAGREE] if any(s.disagrees(fraction) for s in spreads) else []
    reasons += curve_reasons(curve_ms) if curve_ms else []
    if same_step is not None:
        a, b = same_step
        if min(a, b) > 0 and abs(a - b) > same_fraction * min(a, b):
            reasons.append(LOAD_CHANGED)
    return Verdict.from_reasons(reasons)
