"""Whether timings support a conclusion (``bench.timing``), with crafted timings, and the
one-step-time rule of the summary: with a verify-cost curve, every step time shown derives
from that one measurement. No timing is asserted, only consistency."""

from __future__ import annotations

import pytest

from specdec_core.bench.curve import ForwardCurve
from specdec_core.bench.results import RunSpread
from specdec_core.bench.runs import ignoring_eos
from specdec_core.bench.summary import summarize
from specdec_core.bench.timing import (
    BUSY_SPREAD,
    LOAD_CHANGED,
    NOT_MONOTONE,
    REPEATS_DISAGREE,
    SUPERLINEAR,
    HowMeasured,
    Spread,
    Verdict,
    curve_reasons,
    judge,
)
from specdec_core.core.settings import SessionConfig
from specdec_core.engine.chain.generate import generate
from specdec_core.rules.costmodel import best_gamma_on_curve, curve_ms

PROMPT = "First Citizen:\nWe are"
HOW = HowMeasured(at=0.0, repeats=5, warmup=2, tokens=9, load=0.5, cpus=2)


def tight(ms: float, n: int = 5) -> Spread:
    """Repeats that agree: ms ± 1 %."""
    return Spread.of([ms * f for f in (0.99, 1.0, 1.0, 1.0, 1.01)][:n])


def crafted_curve(target_ms, draft_ms=0.4, spreads=None) -> ForwardCurve:
    return ForwardCurve(
        tuple(target_ms),
        draft_ms,
        5,
        tuple(spreads) if spreads is not None else tuple(tight(ms) for ms in target_ms),
        tight(draft_ms),
        HOW,
    )


# ------------------------------------------------------------------ Spread
def test_spread_table():
    s = Spread.of([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (s.median, s.low, s.high, s.q1, s.q3, s.n) == (3.0, 1.0, 5.0, 2.0, 4.0, 5)
    assert s.rel_iqr == pytest.approx(2.0 / 3.0)
    one = Spread.of([2.5])
    assert (one.median, one.low, one.high, one.q1, one.q3, one.n) == (2.5, 2.5, 2.5, 2.5, 2.5, 1)
    assert one.rel_iqr == 0.0 and not one.disagrees()
    with pytest.raises(ValueError):
        Spread.of([])


def test_repeats_that_disagree_by_more_than_the_fraction_are_too_busy():
    # middle half 2.0 … 2.2 ms around 2.1, n = 5: SE(median) ≈ 0.929 · 0.2 / (√5 · 2.1) = 4 %
    agree = Spread.of([1.9, 2.0, 2.1, 2.2, 2.9])  # one stray repeat does not condemn the rest
    assert agree.rel_median_error == pytest.approx(0.929 * 0.2 / (5**0.5 * 2.1), rel=1e-3)
    assert not agree.disagrees() and judge([agree]) == Verdict(False, ())
    # middle half 2 … 7 ms around 3, n = 5: 0.929 · 5 / (√5 · 3) = 69 % -> too busy
    apart = Spread.of([1.0, 2.0, 3.0, 7.0, 9.0])
    assert apart.rel_median_error == pytest.approx(0.6925, rel=1e-3)
    assert apart.disagrees(BUSY_SPREAD)
    assert judge([agree, apart]) == Verdict(True, (REPEATS_DISAGREE,))
    # the limit on the middle half grows with √n: exactly at it is still a conclusion
    for n in (3, 5, 15):
        limit = BUSY_SPREAD * n**0.5 / (1.2533 / 1.349)  # largest (q3 − q1) / median
        assert not Spread(1.0, 0.8, 1.2, 0.9, 0.9 + limit - 1e-9, n).disagrees()
        assert Spread(1.0, 0.8, 1.2, 0.9, 0.9 + limit + 1e-6, n).disagrees()
    # this machine at load ≈ 2 (curve 4 of benchmarks/verify_curve_spread.py, k = 6, 11
    # repeats: the middle half spans 43 % of the median) is a conclusion; at n = 3 it is not
    assert not Spread(1.0, 0.5, 2.0, 0.8, 1.23, 11).disagrees()
    assert Spread(1.0, 0.5, 2.0, 0.8, 1.23, 3).disagrees()


# ------------------------------------------------------------------ the curve's shape
@pytest.mark.parametrize(
    ("curve", "reasons"),
    [
        ([2.0, 2.1, 2.3, 2.6, 3.0], []),  # rising: a conclusion
        ([2.0, 2.0, 2.0, 2.0, 2.0], []),  # flat (a GPU): a conclusion
        ([2.0, 1.9, 2.2, 2.1, 2.4], []),  # dips within 10 %: noise
        ([2.13, 0.81, 2.2, 2.3, 2.5], [NOT_MONOTONE]),  # t(2)/t(1) = 0.38, seen on a busy machine
        ([2.0, 2.4, 3.0, 2.5, 3.1], [NOT_MONOTONE]),  # t(4) 17 % below t(3)
        ([2.0, 21.96, 22.0, 23.0, 24.0], [SUPERLINEAR]),  # t(2)/t(1) = 10.98: > 2 single steps
        ([2.0, 9.0, 3.0, 4.0, 5.0], [NOT_MONOTONE, SUPERLINEAR]),
    ],
)
def test_curve_shape_checks(curve, reasons):
    assert curve_reasons(curve) == reasons
    verdict = crafted_curve(curve).verdict()
    assert verdict.busy == bool(reasons) and list(verdict.reasons) == reasons


def test_curve_repeats_that_disagree_make_it_too_busy_even_when_monotone():
    target = [2.0, 2.2, 2.4]
    wild = Spread.of([1.0, 2.2, 2.2, 5.0, 9.0])  # median 2.2, middle half 2.2 … 5.0
    curve = crafted_curve(target, spreads=[tight(2.0), wild, tight(2.4)])
    assert curve.verdict() == Verdict(True, (REPEATS_DISAGREE,))
    draft_wild = ForwardCurve(
        (2.0, 2.2), 0.4, 5, (tight(2.0), tight(2.2)), Spread.of([0.1, 0.2, 0.4, 0.9, 1.0]), HOW
    )
    assert draft_wild.verdict().reasons == (REPEATS_DISAGREE,)


def test_the_same_step_measured_twice_must_agree():
    assert judge(same_step=(2.0, 2.9)) == Verdict(False, ())  # 45 %: another context, noise
    assert judge(same_step=(2.0, 3.1)) == Verdict(True, (LOAD_CHANGED,))  # 55 %
    assert judge(same_step=(7.7, 2.13)) == Verdict(True, (LOAD_CHANGED,))  # a measured run
    assert judge(same_step=(0.0, 2.13)) == Verdict(False, ())  # no run step: nothing to compare


# ------------------------------------------------------------------ one step time
@pytest.fixture(scope="module")
def runs(tiny_pair):
    config = SessionConfig(gamma=3, max_new_tokens=16)
    pair = ignoring_eos(tiny_pair)
    return generate(pair, PROMPT, config, "autoregressive"), generate(
        pair, PROMPT, config, "speculative"
    )


def run_step(ar) -> float:
    """The target-only run's steady step (after the prompt's forward)."""
    a = ar.stats
    return (a.target_forward_ms - a.prefill_ms) / (a.target_forwards - 1)


def test_every_step_time_shown_derives_from_the_one_curve(runs):
    ar, sp = runs
    t1 = run_step(ar)  # a curve taken at the same load as the runs
    target = [t1 * (1 + 0.2 * (k - 1)) for k in range(1, 8)]
    curve = crafted_curve(target, draft_ms=0.4 * t1)
    spread = RunSpread(tight(ar.stats.ms_per_token), tight(sp.stats.ms_per_token), HOW)
    s = summarize(ar, sp, 3, curve, spread)
    cm, bd = s.cost_model, s.breakdown
    drafts = [len(r.drafted) for r in sp.records]
    # the shown target step IS t(1) of the same measurement; c = its draft step / t(1)
    assert cm.target_step_ms == target[0] == s.autoregressive.target_step_ms
    assert cm.draft_step_ms == curve.draft_step_ms
    assert cm.c == pytest.approx(curve.draft_step_ms / target[0]) == pytest.approx(0.4)
    # the verification: t(g + 1) off the same curve, in ms and in target steps
    verify = sum(curve_ms(curve.by_tokens(), g + 1) for g in drafts) / len(drafts)
    assert cm.verify_ms == pytest.approx(verify) == pytest.approx(cm.verify_ms_from_curve)
    assert cm.verify_over_target_step == pytest.approx(verify / target[0])
    # the breakdown is made of the same step times (+ the run's measured overhead)
    per_round = s.speculative.drafts_per_round
    assert bd.round.draft == pytest.approx(per_round * curve.draft_step_ms)
    assert bd.round.verify == pytest.approx(verify)
    assert bd.target_only.target == pytest.approx(target[0] * bd.tokens_per_round)
    assert bd.shares_pct.draft + bd.shares_pct.verify + bd.shares_pct.overhead == pytest.approx(100)
    # predictions and best γ: the same numbers again
    assert cm.forward_time_speedup == pytest.approx(
        target[0] * cm.expected_tokens_per_round / (bd.round.draft + verify)
    )
    assert cm.best_gamma == best_gamma_on_curve(cm.alpha, cm.c, curve.by_tokens())
    assert s.timing is not None and s.timing.source == "curve"
    assert s.timing.target_step == curve.target_spread[0] and not s.timing.busy
    assert s.timing.ar_ms_per_token == spread.ar_ms_per_token and s.timing.curve_how == HOW


def test_a_curve_taken_at_another_load_than_the_runs_is_too_busy(runs):
    ar, sp = runs
    t1 = run_step(ar) / 3.6  # one target step 7.7 ms next to t(1) = 2.13 ms
    curve = crafted_curve([t1 * (1 + 0.2 * k) for k in range(7)])
    timing = summarize(ar, sp, 3, curve).timing
    assert timing is not None and timing.busy and timing.reasons == (LOAD_CHANGED,)
    assert timing.run_target_step_ms == pytest.approx(run_step(ar))


def test_non_monotone_curve_and_disagreeing_runs_in_the_summary(runs):
    ar, sp = runs
    t1 = run_step(ar)
    bumpy = crafted_curve([t1, 0.38 * t1, 1.2 * t1, 1.3 * t1, 1.4 * t1, 1.5 * t1, 1.6 * t1])
    assert summarize(ar, sp, 3, bumpy).timing.reasons == (NOT_MONOTONE,)
    wild = RunSpread(Spread.of([1.0, 2.0, 3.0, 7.0, 9.0]), tight(1.0), HOW)
    smooth = crafted_curve([t1 * (1 + 0.2 * k) for k in range(7)])
    assert summarize(ar, sp, 3, smooth, wild).timing.reasons == (REPEATS_DISAGREE,)
    # no curve (a γ-sweep point): the runs' own forwards, nothing to judge but the repeats
    plain = summarize(ar, sp, 3)
    assert plain.timing.source == "runs" and not plain.timing.busy
    assert plain.cost_model.target_step_ms == pytest.approx(t1)
