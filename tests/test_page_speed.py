"""AppTest of the speed page on the embedded pair: the cost model's textbook numbers, a tiny
real measurement whose displayed values agree with each other, the sweeps, Stop, and the
Chinese UI. No timing is asserted — only consistency."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import TEXTBOOK
from streamlit.testing.v1 import AppTest

from specdec_core.costmodel import best_gamma

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "pages/speed.py"


def start(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def click(at: AppTest, label: str) -> None:
    [button] = [b for b in at.button if b.label == label]
    assert not button.disabled, f"{label} is disabled"
    button.click().run()
    assert not at.exception, at.exception


def metric(at: AppTest, label: str) -> str:
    [value] = [m.value for m in at.metric if m.label == label]
    return value


def small_budget(at: AppTest, n: int = 8) -> None:
    at.slider(key="sp_n").set_value(n)
    at.slider(key="sp_repeats").set_value(1)
    at.run()


def test_cost_model_section_shows_the_textbook_cases(embedded_pair):
    at = start()
    faster, slower = TEXTBOOK["cost_cases"]
    assert metric(at, "Per-token cost") == f"{faster['per_token_ms']:.1f} ms"  # 11.0 ms
    assert any("**Faster**" in s.value for s in at.success)
    at.number_input(key="sp_adv").set_value(slower["advanced"]).run()
    assert metric(at, "Per-token cost") == f"{slower['per_token_ms']:.1f} ms"  # 33.0 ms
    assert any("**Slower**" in e.value for e in at.error)
    click(at, "Textbook example")
    assert metric(at, "Per-token cost") == "11.0 ms"
    assert metric(at, "Best γ") == str(best_gamma(0.8, 0.05, 16))
    table = at.dataframe[0].value  # the reference walltime cases
    cases = TEXTBOOK["walltime_improvement"]["cases"]
    assert list(table["walltime improvement"]) == pytest.approx(
        [c["walltime_improvement"] for c in cases], abs=1e-6
    )
    assert "Use the measured α and c" in [b.label for b in at.button if b.disabled]


def test_tiny_measurement_is_consistent(embedded_pair):
    at = start()
    assert any("Press **Measure**" in i.value for i in at.info)
    small_budget(at)
    threads = torch.get_num_threads()
    click(at, "Measure")
    assert torch.get_num_threads() == threads  # no page changes the process-wide setting
    assert any(f"CPU threads {threads}" in c.value for c in at.caption)
    # greedy (the sidebar default): the speculative and HF assisted texts equal target-only
    assert any("Greedy check passed" in s.value and "Hugging Face" in s.value for s in at.success)
    assert not [e.value for e in at.error]
    ar, sp = (
        float(metric(at, "Target-only (tokens/s)")),
        float(metric(at, "Speculative (tokens/s)")),
    )
    speedup = float(metric(at, "Speed-up").rstrip("×"))
    assert speedup == pytest.approx(sp / ar, rel=0.02, abs=0.01)
    alpha, accepted = float(metric(at, "α measured")), float(metric(at, "Mean accepted length"))
    assert 0.0 <= alpha <= 1.0 and 0.0 <= accepted <= 4.0
    side = at.dataframe[1].value  # side by side: target-only, speculative, HF greedy, HF assisted
    assert list(side.columns) == ["", "target-only", "speculative", "HF greedy", "HF assisted"]
    assert list(side.iloc[3, 1:]) == ["8", "8", "8", "8"]  # new tokens: EOS ignored
    assert side.iloc[4, 1] == "8"  # target-only: one target forward per token
    predicted = at.dataframe[2].value
    assert predicted.iloc[0, 1] == f"{speedup:.2f}×"  # the measured row repeats the metric
    click(at, "Use the measured α and c")
    assert at.slider(key="sp_alpha").value == pytest.approx(round(alpha, 2), abs=0.006)
    # why: the verify-cost curve, the round timeline, predicted vs measured per drafter
    assert any("Why: verify is not free" in h.value for h in at.subheader)
    assert any("A round timeline from real forwards" in h.value for h in at.subheader)
    assert len(at.get("plotly_chart")) >= 6  # cost, γ curve, breakdown, hist, position, +2
    assert any("single steps" in c.value for c in at.caption)
    rows = at.dataframe[-1].value
    assert list(rows["drafter"]) == ["draft model"]
    assert rows["speed-up (meas.)"][0] == f"{speedup:.2f}×"
    at.selectbox(key="sp_drafter").set_value("ngram").run()
    click(at, "Measure")
    rows = at.dataframe[-1].value
    assert list(rows["drafter"]) == ["draft model", "prompt lookup (n-gram)"]
    assert float(rows["drafts / round"][1]) <= 4.0


def test_sweeps_stop_and_chinese(embedded_pair):
    at = start()
    small_budget(at, 6)
    click(at, "Sweep γ = 1…8")
    sweep = at.dataframe[-1].value
    assert list(sweep["γ"]) == list(range(1, 9))
    assert set(sweep["greedy equal"]) == {"✓"}
    click(at, "Sweep batch size 1, 2, 4, 8")
    batch = at.dataframe[-1].value
    assert list(batch["B"]) == [1, 2, 4, 8]
    assert any("B = " in m.value for m in at.markdown)
    # a job in flight is stopped by Stop: nothing more runs, finished points stay
    at.session_state["sp_job"] = {
        "kind": "gamma", "tasks": [("sp", 3)], "total": 9, "params": {}, "out": {},
    }  # fmt: skip
    at.session_state["sp_gamma"]["partial"] = True
    at.button(key="sp_stop_btn").click().run()
    assert not at.exception and "sp_job" not in at.session_state
    assert any("Stopped" in i.value for i in at.info)
    assert len(at.dataframe[-2].value) == 8  # the γ sweep's points are kept
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    assert at.title[0].value == "速度与成本：投机解码什么时候划算？"
    assert "每 token 成本" in [m.label for m in at.metric]
