"""AppTest of the speed page on the embedded pair: the cost model's textbook numbers, a tiny
real measurement whose displayed values agree with each other, the sweeps, Stop, and the
Chinese UI. No timing is asserted — only consistency."""

from __future__ import annotations

import itertools
import json
import operator
import re
import statistics
from pathlib import Path

import pytest
import torch
from conftest import TEXTBOOK, click, html_tables, like_the_app
from streamlit.testing.v1 import AppTest

from specdec_core.rules.costmodel import best_gamma

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "pages/speed.py"


def start(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


PV_TABLES = ("runs", "tokens", "speedup")  # predicted vs measured, per drafter


def position_chart(at: AppTest, title: str) -> list[dict]:
    """The traces of the chart titled ``title`` (the per-position acceptance chart)."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    [spec] = [s for s in specs if s["layout"].get("title", {}).get("text") == title]
    return spec["data"]


def metric(at: AppTest, label: str) -> str:
    [value] = [m.value for m in at.metric if m.label == label]
    return value


def test_the_cost_delta_has_one_sign_and_lower_is_green():
    """ "↓ 9.0 ms" in green when a token costs less than a target step (it read "↓ -9.0
    ms": the arrow and a minus sign), "↑ 13.0 ms" in red when more, grey at equal."""
    at = start()
    Metric = at.metric[0].proto.__class__

    def delta() -> tuple[str, int, int, str]:
        [m] = [m.proto for m in at.metric if m.proto.body.endswith(" ms")]
        return m.delta, m.direction, m.color, m.delta_description

    vs = "vs one target step"
    assert delta() == ("9.0 ms", Metric.DOWN, Metric.GREEN, vs)  # 11.0 ms vs 20 ms
    at.number_input(key="sp_adv").set_value(1).run()  # 33.0 ms
    assert delta() == ("13.0 ms", Metric.UP, Metric.RED, vs)
    at.number_input(key="sp_tstep").set_value(33.0).run()
    assert delta() == ("0.0 ms", Metric.NONE, Metric.GRAY, vs)


def test_the_cost_delta_in_chinese():
    from specdec_core.ui.i18n import in_language
    from specdec_core.ui.speed.calculators import cost_delta

    with in_language("zh"):
        faster, slower = cost_delta(11.0, 20.0), cost_delta(33.0, 20.0)

    def shown(kw: dict[str, str]) -> tuple[str, str, str]:
        return kw["delta"], kw["delta_color"], kw["delta_arrow"]

    assert shown(faster) == ("9.0 ms", "green", "down")
    assert shown(slower) == ("13.0 ms", "red", "up")
    assert faster["delta_description"] == slower["delta_description"] == "相比目标单步"


def small_budget(at: AppTest, n: int = 8) -> None:
    at.slider(key="sp_n").set_value(n)
    at.slider(key="sp_repeats").set_value(1)
    at.run()


def test_cost_model_section_shows_the_textbook_cases(embedded_pair, monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # read by the page only
    at = start()
    captions = " ".join(c.value for c in at.caption)
    assert "(the app uses 1 CPU thread);" in captions  # singular, not "1 CPU threads"
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


def not_busy(monkeypatch) -> None:
    """A verdict that does not depend on this machine's load (a seeded run has one
    outcome): the timings are judged fine; the busy case has its own test."""
    from specdec_core.bench import summary
    from specdec_core.bench.timing import Verdict

    monkeypatch.setattr(summary, "judge", lambda *a, **k: Verdict(False, ()))


def number_after(text: str, prefix: str) -> float:
    match = re.search(re.escape(prefix) + r"\s*([\d.]+)", text)
    assert match, (prefix, text)
    return float(match[1])


def test_tiny_measurement_is_consistent(embedded_pair, monkeypatch):
    not_busy(monkeypatch)
    at = start()
    assert any("Press **Measure**" in i.value for i in at.info)
    small_budget(at)
    # the count the app set (one thread on a ≤ 2-core machine), as a fresh thread reads it
    threads = like_the_app(torch.get_num_threads)
    click(at, "Measure")
    assert like_the_app(torch.get_num_threads) == threads  # no page changes it
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
    # side by side: target-only, speculative, HF greedy, HF assisted
    [side] = html_tables(at, "sp-side")
    assert list(side.columns) == ["", "target-only", "speculative", "HF greedy", "HF assisted"]
    assert list(side.iloc[3, 1:]) == ["8", "8", "8", "8"]  # new tokens: EOS ignored
    assert side.iloc[4, 1] == "8"  # target-only: one target forward per token
    [predicted] = [
        d.value for d in at.dataframe if list(d.value.columns) == ["estimate", "speed-up"]
    ]
    assert predicted.iloc[0, 1] == f"{speedup:.2f}×"  # the measured row repeats the metric
    click(at, "Use the measured α and c")
    assert at.slider(key="sp_alpha").value == pytest.approx(round(alpha, 2), abs=0.006)
    # why: the verify-cost curve, the round timeline, predicted vs measured per drafter
    assert any("Why: verify is not free" in h.value for h in at.subheader)
    assert any("A round timeline from real forwards" in h.value for h in at.subheader)
    assert len(at.get("plotly_chart")) >= 6  # cost, γ curve, breakdown, hist, position, +2
    assert any("single steps" in c.value for c in at.caption)
    # one measured step time feeds every number: the breakdown's target step
    # is the curve's t(1), c is the curve's draft step over it
    captions = " ".join(c.value for c in at.caption)
    t1 = number_after(captions, "t(1) =")
    assert number_after(captions, "One target step") == pytest.approx(t1, abs=0.006)
    draft = number_after(captions, "one draft step =")
    assert number_after(captions, "c =") == pytest.approx(draft / t1, abs=0.006 / t1 + 0.0006)
    measured = at.session_state["sp_measured"]
    assert measured.summary.cost_model.target_step_ms == measured.curve.target_ms[0]
    # the verification: t(g + 1) at each round's drafts, × the in-round level, as stated
    level = measured.curve.verify_level()
    verify = measured.summary.cost_model.verify_ms
    assert f"× {level:.2f} (a verification timed inside a round" in captions
    assert f"= {verify:.3f} ms." in captions and f"{verify / level:.3f} ms on average" in captions
    shares = re.findall(r"ms \(([\d.]+) %\)", captions)  # draft, verify, overhead: one format
    assert len(shares) == 3 and all(re.fullmatch(r"\d+\.\d", x) for x in shares)
    assert "median (min–max) over 1 repeats" in captions and "UTC" in captions
    assert "interleaved, after 2 untimed warm-up passes" in captions  # the curve's label
    # tokens per round predicted from the run's own per-position rates, which it shows
    cm = measured.summary.cost_model
    rates = ", ".join(f"{a:.2f}" for a in cm.conditional_acceptance)
    shown = f"vs {cm.expected_tokens_per_round:.2f} predicted from the conditional acceptance"
    assert cm.conditional_acceptance and f"{shown} rates α_n = {rates} (draft n's" in captions
    # the position chart: measured shares, α^i and the rates' running product Π_{j≤i} α_j
    bars, power, product = position_chart(at, "Per-position acceptance")
    sp = measured.summary.speculative
    assert bars["y"] == pytest.approx(list(sp.per_position_acceptance))
    assert power["y"] == pytest.approx([cm.alpha**i for i in bars["x"]])
    assert product["name"] == "Π α_j, j ≤ i (conditional rates; cost model)"
    assert product["y"] == pytest.approx(
        list(itertools.accumulate(cm.conditional_acceptance, operator.mul))
    )
    assert product["x"] == list(range(1, len(cm.conditional_acceptance) + 1))
    [runs], [tokens], [speedups] = (html_tables(at, f"sp-pv-{n}") for n in PV_TABLES)
    assert list(runs["drafter"]) == list(tokens["drafter"]) == ["draft model"]
    assert list(runs.columns) == ["drafter", "γ", "drafts / round", "drafting priced as"]
    assert list(tokens.columns)[1:] == ["tokens/round (pred.)", "tokens/round (meas.)", "error"]
    assert speedups["speed-up (meas.)"][0] == f"{speedup:.2f}×"
    at.selectbox(key="sp_drafter").set_value("ngram").run()
    click(at, "Measure")
    [runs] = html_tables(at, "sp-pv-runs")
    assert list(runs["drafter"]) == ["draft model", "prompt lookup (n-gram)"]
    assert float(runs["drafts / round"][1]) <= 4.0
    cm = at.session_state["sp_measured"].summary.cost_model  # prompt lookup's, in Chinese
    rates = ", ".join(f"{a:.2f}" for a in cm.conditional_acceptance) or "—"
    at.session_state["lang"] = "zh"
    at.run()
    captions = " ".join(c.value for c in at.caption)
    assert f"预测 {cm.expected_tokens_per_round:.2f}——由条件接受率 α_n = {rates}（" in captions
    product = position_chart(at, "各位置接受率")[2]
    assert product["name"] == "Π α_j，j ≤ i（条件接受率之积；成本模型）"
    assert product["y"] == pytest.approx(
        list(itertools.accumulate(cm.conditional_acceptance, operator.mul))
    )


def test_sweeps_stop_and_chinese(embedded_pair):
    at = start()
    small_budget(at, 6)
    click(at, "Sweep γ = 1…8")
    speedups, sweep = html_tables(at, "sp-gamma-speedups") + html_tables(at, "sp-gamma-runs")
    assert list(speedups.columns) == ["γ", "speed-up", "cost model", "Leviathan"]
    runs = ["γ", "speculative tokens/s", "α", "mean accepted", "greedy equal"]
    assert list(sweep.columns) == runs
    assert list(sweep["γ"]) == list(speedups["γ"]) == [str(g) for g in range(1, 9)]
    assert set(sweep["greedy equal"]) == {"✓"}
    points = at.session_state["sp_gamma"]["points"]
    assert list(speedups["speed-up"]) == [f"{q.speedup:.2f}×" for q in points]
    assert list(sweep["α"]) == [f"{q.alpha:.3f}" for q in points]
    click(at, "Sweep batch size 1, 2, 4, 8")
    [batch] = html_tables(at, "sp-batch")
    assert list(batch["B"]) == ["1", "2", "4", "8"]
    assert list(batch.columns)[1:] == [
        "batched target-only tokens/s",
        "sequential speculative tokens/s",
        "sequential target-only tokens/s",
    ]
    assert any("B = " in m.value for m in at.markdown)
    # a job in flight is stopped by Stop: nothing more runs, finished points stay
    at.session_state["sp_job"] = {
        "kind": "gamma",
        "tasks": [("sp", 3)],
        "total": 9,
        "params": {},
        "out": {},
    }
    at.session_state["sp_gamma"]["partial"] = True
    at.button(key="sp_stop_btn").click().run()
    assert not at.exception and "sp_job" not in at.session_state
    assert any("Stopped" in i.value for i in at.info)
    assert len(html_tables(at, "sp-gamma-runs")[0]) == 8  # the γ sweep's points are kept
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    assert at.title[0].value == "速度与成本：投机解码什么时候划算？"
    assert "每 token 成本" in [m.label for m in at.metric]


def test_busy_machine_says_so_instead_of_drawing_the_curve(embedded_pair, monkeypatch):
    """A crafted non-monotone curve (t(2)/t(1) = 0.38, seen on a busy machine): the page says
    the machine is too busy, in both languages, and draws no curve and no best γ."""
    from specdec_core.bench.curve import ForwardCurve
    from specdec_core.bench.timing import HowMeasured, Spread
    from specdec_core.server import jobs
    from specdec_core.server import tasks as job_tasks

    monkeypatch.setenv(jobs.WORKER_ENV, "thread")  # the crafted curve is measured here
    target = (2.13, 0.81, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9)
    crafted = ForwardCurve(
        target,
        0.42,
        11,
        tuple(Spread.of([ms] * 11) for ms in target),
        Spread.of([0.42] * 11),
        HowMeasured(0.0, 11, 2, 9, 1.5, 2),
    )
    monkeypatch.setattr(job_tasks, "measure_forward_curve", lambda *a, **k: crafted)
    at = start()
    small_budget(at)
    click(at, "Measure")
    warnings = " ".join(w.value for w in at.warning)
    assert "too busy to measure this now" in warnings
    assert "a forward over more tokens measured cheaper than one over fewer" in warnings
    assert "The round timeline below is still drawn: it is the record of one run" in warnings
    captions = " ".join(c.value for c in at.caption)
    assert "best γ" not in captions and "One target step" not in captions  # nothing concluded
    charts = {c.key for c in at.get("plotly_chart")}  # the runs' timeline stays: a measurement
    assert charts == {"sp_cost_fig", "sp_curve_fig", "sp_hist_fig", "sp_pos_fig", "sp_tl_fig"}
    assert any("Why: verify is not free" in h.value for h in at.subheader)
    assert "00:00:00 UTC" in captions  # the curve's label: when it was measured
    [rows] = html_tables(at, "sp-pv-speedup")  # no prediction from a busy machine
    assert rows["speed-up (pred.)"][0] == "—"
    # the headline metrics: the busy warning above them, the timed ones marked uncertain
    labels = [m.label for m in at.metric]
    assert "Speed-up (uncertain: too busy)" in labels and "α measured" in labels
    assert "Target-only (tokens/s) (uncertain: too busy)" in labels
    order = [n for n in at.main if getattr(n, "type", "") in ("warning", "metric")]
    first_busy = next(i for i, n in enumerate(order) if "too busy to measure" in str(n.value))
    first_speedup = next(
        i for i, n in enumerate(order) if n.type == "metric" and "Speed-up" in n.label
    )
    assert first_busy < first_speedup
    # α and c together or neither: c is inconclusive here, so neither is taken
    at.slider(key="sp_alpha").set_value(0.33).run()
    click(at, "Use the measured α and c")
    assert at.slider(key="sp_c").value == 0.05 and at.slider(key="sp_alpha").value == 0.33
    assert any("Neither α nor c was taken" in w.value for w in at.warning)
    at.session_state["sp_use_refused"] = True  # what the click sets, shown in Chinese
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception
    zh_warnings = " ".join(w.value for w in at.warning)
    assert "这台机器现在太忙，无法测量这一项" in zh_warnings
    assert "下方的轮次时间线仍会绘制" in zh_warnings
    assert "加速比（不确定：机器太忙）" in [m.label for m in at.metric]
    assert any("α 和 c 都没有采用" in w.value for w in at.warning)
    assert at.slider(key="sp_alpha").value == 0.33


def _regime_app(device: str, lang: str) -> AppTest:
    def app(device: str, lang: str) -> None:
        import streamlit as st

        from specdec_core.ui.speed.device import show_device_regime

        st.session_state["lang"] = lang
        show_device_regime(device)

    at = AppTest.from_function(app, args=(device, lang), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_on_cuda_the_page_tells_the_gpu_story_with_the_reference_figures(lang):
    from specdec_core.rules.costmodel import REFERENCE_DEVICES

    (ref,) = REFERENCE_DEVICES
    gpu = _regime_app("cuda", lang)
    text = " ".join(m.value for m in gpu.markdown)
    assert "t(k)/t(1) = 1.15–1.24" in text and "c = 0.70" in text  # from the reference row
    assert "0.43×" in text and "1.89×" in text
    assert ("per-forward overhead" in text) == (lang == "en")
    assert ("每次前向的固定开销" in text) == (lang == "zh")
    [table] = html_tables(gpu, "sp-ref")
    assert list(table.iloc[:, 1]) == [f"{x:.2f}×" for _, x in ref.speedup]
    assert len(gpu.expander) == 0 and len(gpu.subheader) == 1  # shown, not folded
    cpu = _regime_app("cpu", lang)
    assert len(cpu.expander) == 1 and len(cpu.subheader) == 0  # folded on a CPU
    assert "c = 0.70" in " ".join(m.value for m in cpu.markdown)


def _predictions_app(lang: str, quiet: bool = False) -> None:
    import streamlit as st

    from specdec_core.bench.curve import ForwardCurve
    from specdec_core.bench.results import HFComparison
    from specdec_core.bench.runs import ignoring_eos
    from specdec_core.bench.summary import summarize
    from specdec_core.core.models import load_pair
    from specdec_core.core.settings import SessionConfig
    from specdec_core.engine.chain.generate import generate
    from specdec_core.server.tasks import Measurement
    from specdec_core.ui.speed.why import show_predictions

    st.session_state["lang"] = lang
    pair = ignoring_eos(load_pair("embedded", device="cpu"))
    config = SessionConfig(gamma=4, max_new_tokens=8)
    ar = generate(pair, "ROMEO:", config, "autoregressive")
    sp = generate(pair, "ROMEO:", config, "speculative")
    by = {}
    for name, cost in (("model", "serial"), ("block", "one_forward"), ("mtp", "heads")):
        step = 2.0
        if quiet:  # the curve's t(1) is the run's own step: the verdict is not "too busy"
            a = ar.stats
            step = (a.target_forward_ms - a.prefill_ms) / (a.target_forwards - 1)
        curve = ForwardCurve((step,) * 9, step / 2, 1, draft_cost=cost, draft_round_ms=0.75 * step)
        summary = summarize(ar, sp, 4, curve)
        by[name] = Measurement({}, summary, HFComparison(), None, ("", ""), curve)
    show_predictions(by)


@pytest.mark.parametrize(
    "lang, column, expected",
    [
        (
            "en",
            "drafting priced as",
            ["one step per draft", "one forward per round", "one head evaluation per draft"],
        ),
        ("zh", "草稿定价方式", ["每个草稿一步", "每轮一次前向", "每个草稿一次头计算"]),
    ],
)
def test_the_prediction_table_says_how_each_drafter_is_priced(lang, column, expected):
    at = AppTest.from_function(_predictions_app, args=(lang,), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    [table] = html_tables(at, "sp-pv-runs")
    assert list(table[column]) == expected


#: What each kind of drafting round runs (``Drafter.draft_cost``), as the intro says it.
INTRO_COST_WORDS = {
    "serial": {"en": "γ serial steps", "zh": "γ 次串行步"},
    "heads": {"en": "one head evaluation per token", "zh": "每个 token 一次头计算"},
    "one_forward": {"en": "one forward for the block drafter", "zh": "块草稿器一次前向"},
    "none": {"en": "no forward at all", "zh": "完全不需要前向"},
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_intro_prices_drafting_for_every_draft_source_not_only_serial_ones(lang):
    """The intro once said "γ serial draft steps" for every drafter: each kind of drafting
    cost in the drafter table is named (a new kind fails here until the intro says it)."""
    from specdec_core.drafters.registry import DRAFTERS
    from specdec_core.ui.i18n import tr

    intro = tr("sp_intro", lang)
    kinds = {spec.draft_cost for spec in DRAFTERS.values()}
    assert kinds <= set(INTRO_COST_WORDS), kinds - set(INTRO_COST_WORDS)
    for kind in kinds:
        assert INTRO_COST_WORDS[kind][lang] in intro, (kind, intro)
    assert "γ serial draft steps and" not in intro


@pytest.mark.parametrize("lang, words", [("en", "Median |error|"), ("zh", "误差绝对值的中位数")])
def test_the_prediction_table_states_the_median_error_over_the_drafters(lang, words):
    at = AppTest.from_function(_predictions_app, args=(lang, True), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    [table] = html_tables(at, "sp-pv-speedup")
    shown = [abs(float(v.split()[0])) for v in table.iloc[:, -1] if v != "—"]
    assert len(shown) == 3  # three drafters, none too busy: every error shown
    [caption] = [c.value for c in at.caption if words in c.value]
    median, largest = (float(x) for x in re.findall(r"(\d+\.\d) %", caption))
    # the table shows each error to 0.1 %, the caption their exact median and largest
    assert median == pytest.approx(statistics.median(shown), abs=0.1)
    assert largest == pytest.approx(max(shown), abs=0.1)
