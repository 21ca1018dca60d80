"""Lessons chapter 5's speed measurement: a warm-up run of each variant
before timing, the variants interleaved and repeated, the spread shown, one measured target
step behind every ``c``, and "too busy" instead of a conclusion. Crafted timings; no
timing asserted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_page_lessons import answer, open_lessons

from specdec_core.bench import lesson_speed as ch_speed
from specdec_core.bench.timing import REPEATS_DISAGREE, HowMeasured, Spread, Verdict


def fake_generate(ms_per_token: dict[str, list[float]], calls: list):
    """A ``generate`` whose run of variant v (told apart by its drafter) takes the next of
    ``ms_per_token[v]`` per token; target step 2 ms alone, draft step 0.5 ms."""

    def run(pair, prompt, config, mode, drafter=None):
        if drafter is None:
            name = "alone"
        else:
            name = "self" if drafter.kv.model is pair.target else "model"
        calls.append((name, config.max_new_tokens))
        ms = ms_per_token[name][len([c for c in calls if c[0] == name]) - 1]
        n = config.max_new_tokens
        stats = SimpleNamespace(
            new_tokens=n,
            total_ms=ms * n,
            acceptance_rate=1.0 if name == "self" else 0.5,
            target_forwards=n if name == "alone" else n // 3,
            target_forward_ms=2.0 * n + 8.0 if name == "alone" else 30.0,
            prefill_ms=10.0,
            draft_forward_ms=0.5 * 40 if name == "model" else 2.0 * 40,
            draft_forwards=40,
        )
        return SimpleNamespace(stats=stats)

    return run


def test_warm_up_then_interleaved_repeats_and_one_target_step(embedded_pair, monkeypatch):
    calls: list = []
    times = {
        "alone": [99.0, 10.0, 10.4, 10.2],
        "model": [50.0, 6.0, 6.1, 6.2],
        "self": [70.0, 12.0, 12.2, 11.9],
    }  # the first run of each: cold, untimed
    monkeypatch.setattr(ch_speed, "generate", fake_generate(times, calls))
    run = ch_speed.measure(embedded_pair, repeats=3)
    n = ch_speed.TOKENS
    # one full-length warm-up run of each variant, then the variants interleaved
    assert (
        calls
        == [("alone", n), ("model", n), ("self", n)] + [("alone", n), ("model", n), ("self", n)] * 3
    )
    alone, model, self_ = run.rows
    assert alone["spread"] == Spread.of([10.0, 10.4, 10.2])  # the cold 99 ms is not in it
    assert alone["ms_token"] == 10.2 and model["ms_token"] == 6.1 and self_["ms_token"] == 12.0
    # one target step (the alone runs' steady step, 2 ms) behind every c
    assert run.target_step_ms == pytest.approx(2.0)
    assert model["c"] == pytest.approx(0.5 / 2.0) and self_["c"] == 1.0 and alone["c"] is None
    assert self_["predicted"] == pytest.approx(1.0)  # α = 1, c = 1: nothing saved
    assert run.verdict == Verdict(False, ()) and run.how.repeats == 3 and run.how.warmup == 1


def test_repeats_that_disagree_are_too_busy(embedded_pair, monkeypatch):
    times = {
        "alone": [99.0, 10.0, 31.0, 12.0, 45.0, 9.0],
        "model": [50.0] + [6.0] * 5,
        "self": [70.0] + [12.0] * 5,
    }
    monkeypatch.setattr(ch_speed, "generate", fake_generate(times, []))
    assert ch_speed.measure(embedded_pair, repeats=5).verdict == Verdict(True, (REPEATS_DISAGREE,))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_5_says_too_busy_instead_of_concluding(embedded_pair, lang):
    rows = tuple(
        {
            "name": name,
            "alpha": alpha,
            "forwards": 32,
            "ms_token": 131.0,
            "spread": Spread.of([10.5, 131.0, 250.0]),
            "c": c,
            "predicted": 1.0,
        }
        for name, alpha, c in (("alone", None, None), ("model", 0.6, 0.3), ("self", 1.0, 1.0))
    )
    busy = ch_speed.SpeedRun(
        rows, 2.0, HowMeasured(0.0, 3, 1, 32, 9.5, 2), Verdict(True, (REPEATS_DISAGREE,))
    )
    at = open_lessons(lang, "5")
    at.session_state["ls_c5_run"] = busy  # a measurement kept in the session: shown as is
    answer(at, "c5_faster", "no", lang)
    warnings = " ".join(w.value for w in at.warning)
    assert ("too busy to measure this now" if lang == "en" else "这台机器现在太忙") in warnings
    markdown = " ".join(m.value for m in at.markdown)
    assert "131.00 ms/token" not in markdown and "131.00 ms" not in markdown  # no conclusion
    table = at.dataframe[0].value
    assert list(table.iloc[:, 3]) == ["131.00 (10.50–250.00)"] * 3  # median (min–max)
    assert "00:00:00" in " ".join(c.value for c in at.caption)  # labelled: when measured
