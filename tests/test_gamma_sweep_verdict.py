"""The γ sweep names a best γ only from times that support a conclusion: the verify-cost
curve's rule (``timing.judge`` over the repeats, ``bounded.conclusive``), read off crafted
points (no timing here), and the speed page says so in both languages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import html_tables
from streamlit.testing.v1 import AppTest

from specdec_core.bench.results import GammaPoint
from specdec_core.bench.sweeps import gamma_sweep_verdict
from specdec_core.bench.timing import REPEATS_DISAGREE, Spread

APP = str(Path(__file__).resolve().parents[1] / "app.py")
QUIET = Spread.of([10.0, 10.1, 10.2])  # median uncertain by ≈ 0.5 %
NOISY = Spread.of([6.0, 10.0, 16.0])  # the middle half spans 50 %: uncertain by ≈ 27 %
# the fresh user's sweep: speed-ups 1.07 / 1.87 / 1.10 / 0.95 / 0.98 / 0.96 / 1.23 / 0.84
SPEEDUPS = (1.07, 1.87, 1.10, 0.95, 0.98, 0.96, 1.23, 0.84)


def points(sp: Spread | None, ar: Spread | None = QUIET) -> list[GammaPoint]:
    base = GammaPoint(1, 30.0, 20.0, 1.0, 0.7, 2.0, 0.3, 1.4, 1.3, 1.2, True, ar, sp)
    return [
        replace(base, gamma=g, speedup=x, forward_time_speedup=2.0 - g / 10)
        for g, x in enumerate(SPEEDUPS, 1)
    ]


def test_verdict_of_a_sweep():
    verdict, conclusive = gamma_sweep_verdict(points(QUIET))
    assert not verdict.busy and conclusive
    # one noisy point (γ = 2, the "best") is enough: the curve's rule, not a new one
    noisy = points(QUIET)
    noisy[1] = replace(noisy[1], sp_ms_per_token=NOISY)
    verdict, conclusive = gamma_sweep_verdict(noisy)
    assert verdict.reasons == (REPEATS_DISAGREE,) and not conclusive
    # one pass: no spread to judge by; points without recorded repeats count as one pass
    one = Spread.of([10.0])
    verdict, conclusive = gamma_sweep_verdict(points(one, one))
    assert not verdict.busy and not conclusive
    assert gamma_sweep_verdict(points(None, None))[1] is False
    assert gamma_sweep_verdict([])[1] is False


def run_page(sweep: list[GammaPoint], lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["lang"] = lang
    at.run()
    at.session_state["sp_gamma"] = {"params": {}, "points": sweep, "partial": False}
    at.switch_page("pages/speed.py").run()
    assert not at.exception, at.exception
    return at


def test_page_names_no_best_gamma_from_uncertain_medians(embedded_pair):
    noisy = points(QUIET)
    noisy[1] = replace(noisy[1], sp_ms_per_token=NOISY)
    at = run_page(noisy, "en")
    warnings = " ".join(w.value for w in at.warning)
    assert "too busy to measure this now" in warnings
    assert "uncertain by more than 15 %" in warnings and "no best γ is named" in warnings
    text = " ".join(m.value for m in at.markdown)
    assert "Best measured γ" not in text and "1.87×" not in text
    [speedups] = html_tables(at, "sp-gamma-speedups")
    assert list(speedups["speed-up"])[1] == "1.87×"  # the data stay shown
    assert list(speedups.columns) == ["γ", "speed-up", "cost model", "Leviathan"]
    at.session_state["lang"] = "zh"
    at.run()
    warnings = " ".join(w.value for w in at.warning)
    assert "这台机器现在太忙" in warnings and "不给出最佳 γ" in warnings
    assert "实测最佳 γ" not in " ".join(m.value for m in at.markdown)


def test_page_names_the_best_gamma_from_agreeing_repeats(embedded_pair):
    at = run_page(points(QUIET), "zh")
    text = " ".join(m.value for m in at.markdown)
    assert "实测最佳 γ：**2**（1.87×）；成本模型的最佳：**1**（1.90×）" in text
    at = run_page(points(Spread.of([10.0])), "en")
    assert any("One timed pass per γ" in w.value for w in at.warning)
    assert "Best measured γ" not in " ".join(m.value for m in at.markdown)
