"""Long measurements never freeze a lesson: a time budget that stops a run with partial
results labelled partial (a fake clock), Lessons chapter 5's measurement on the server's
queue while its checkpoints work (header and footer agree), Cancel with a message and the
session usable, and "compare every source" that hides its ranking when the timings are not
conclusive. Jobs run in the queue's thread here (``SPECDEC_JOB_WORKER=thread``)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from test_page_lessons import answer, open_lessons

from specdec_core.bench import source_compare as sc
from specdec_core.bench.bounded import Budget, conclusive
from specdec_core.bench.source_results import SOURCE_PROMPTS
from specdec_core.bench.timing import REPEATS_DISAGREE, HowMeasured, Spread, Verdict
from specdec_core.core.settings import SessionConfig
from specdec_core.server import jobs, long_tasks
from specdec_core.server import tasks as T
from specdec_core.ui.background import progress_text


class FakeClock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_budget_stops_when_one_more_pass_at_the_mean_pace_would_not_fit():
    clock = FakeClock()
    budget = Budget(30.0, clock)
    assert budget.allows(0)  # starts the count
    clock.now += 10.0  # one pass took 10 s: 10 + 10 ≤ 30
    assert budget.allows(1) and budget.elapsed() == 10.0
    clock.now += 10.0  # two passes, 20 s: 20 + 10 ≤ 30
    assert budget.allows(2)
    clock.now += 6.0  # three passes, 26 s: 26 + 8.7 > 30
    assert not budget.allows(3)
    assert Budget(None, clock).allows(99)  # unbounded
    busy = Verdict(True, (REPEATS_DISAGREE,))
    assert [conclusive(Verdict(False), 3), conclusive(busy, 3), conclusive(Verdict(False), 1)] == [
        True,
        False,
        False,
    ]


def test_compare_sources_stops_at_the_budget_and_says_it_is_partial(embedded_pair, monkeypatch):
    """Every pass 'takes' 10 s of a fake clock; with a 25 s budget two of the four settings'
    passes run (20 s + a 10 s pace > 25), the result is labelled partial and holds exactly
    those settings, with the values an unbounded run gives them."""
    clock = FakeClock()
    real = sc.run_pass

    def slow_pass(pair, plan, setting, step=None):
        clock.now += 10.0
        return real(pair, plan, setting, step)

    monkeypatch.setattr(sc, "run_pass", slow_pass)
    config = SessionConfig(gamma=3, seed=1, max_new_tokens=4)
    names = ("model", "ngram")
    comp = sc.compare_sources(embedded_pair, config, names, repeats=1, budget_s=25.0, clock=clock)
    assert comp.partial and (comp.ran, comp.planned, comp.budget_s) == (2, 4, 25.0)
    assert comp.settings == (("repetitive", 0.0), ("repetitive", 1.0))  # novel: not measured
    assert [k for k, _ in comp.prompts] == ["repetitive"] and comp.how.repeats == 1
    assert not comp.conclusive  # one pass: nothing to judge the load by
    full = sc.compare_sources(embedded_pair, config, names, repeats=1)
    assert not full.partial and (full.ran, full.planned) == (4, 4)
    for got, want in zip(comp.rows, full.rows, strict=False):
        assert (got.prompt, got.temperature, got.name) == (want.prompt, want.temperature, want.name)
        assert (got.acceptance_rate, got.accepted, got.drafted) == (
            want.acceptance_rate,
            want.accepted,
            want.drafted,
        )


def test_the_queue_stops_a_job_at_its_budget_with_partial_results(embedded_pair, monkeypatch):
    """The speed page's queue runs a ``sources`` job task by task; each task 'takes' 10 s
    of a fake clock; a 25 s budget stops it after the warm-up and one pass: done, partial,
    the pass's values in the result."""
    monkeypatch.setenv(jobs.WORKER_ENV, "thread")
    clock = FakeClock()
    real = jobs.run_task

    def slow_task(job, task):
        clock.now += 10.0
        real(job, task)

    monkeypatch.setattr(jobs, "run_task", slow_task)
    q = jobs.JobQueue(clock=clock)
    config = SessionConfig(gamma=3, max_new_tokens=4)
    job = T.sources_job("s1", embedded_pair, config, ("ngram",), 2, budget_s=25.0)
    assert job.total == 1 + 2 * 4 and job.tasks[:2] == [("src_warm", 0), ("src_pass", (0, 0))]
    q.submit(job, "session:s1")
    deadline = time.monotonic() + 120
    while not job.finished:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert (job.state, job.done, job.partial) == ("done", 2, True)
    comp = job.result
    assert comp.partial and (comp.ran, comp.planned) == (1, 8)
    assert comp.settings == (("repetitive", 0.0),) and comp.budget_s == 25.0
    assert progress_text(job, "x").startswith("x: step 3 of 9")  # outside a page: English


# ------------------------------------------------------------------ chapter 5, pending
@pytest.fixture
def parked(monkeypatch):
    """Jobs run in the queue's thread, and a ``lesson5`` job waits at its first task until
    the test releases it (so it is pending while the page is used)."""
    monkeypatch.setenv(jobs.WORKER_ENV, "thread")
    gate = threading.Event()
    real = jobs.run_task

    def gated(job, task):
        if job.kind == "lesson5":
            assert gate.wait(120)
        real(job, task)

    monkeypatch.setattr(jobs, "run_task", gated)
    yield gate
    gate.set()


def progress_texts(at) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


def bars(at) -> list[str]:
    """The chapter's header and footer bars (not a measurement's)."""
    return [x for x in progress_texts(at) if x.startswith(("Checkpoints answered", "已回答检查点"))]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_5_checkpoints_work_while_its_measurement_runs(embedded_pair, parked, lang):
    at = open_lessons(lang, "5")
    answer(at, "c5_faster", "no", lang)
    job = at.session_state["ls_c5_run_job"]
    assert job.kind == "lesson5" and not job.finished  # queued, the page not waiting
    running = "Timing the three runs" if lang == "en" else "正在计时三种运行"
    deadline = time.monotonic() + 60
    while job.state != "running":  # taken by the queue's thread, parked at its first task
        assert time.monotonic() < deadline
        time.sleep(0.02)
    at.run()
    step = "step 1 of 4" if lang == "en" else "第 1/4 步"
    assert any(x.startswith(running) and step in x for x in progress_texts(at)), progress_texts(at)
    answer(at, "c5_source", "lookup", lang)
    answer(at, "c5_eval", 1.28, lang)
    answers = at.session_state["ls_answers"]
    assert {"c5_faster", "c5_source", "c5_eval"} <= set(answers)
    # the reveals show while the measurement is still pending
    assert len(at.dataframe) == 2 and not job.finished
    head, foot = bars(at)
    assert head == foot and ("3 of 3" if lang == "en" else "3 / 3") in head, (head, foot)
    parked.set()  # the measurement finishes; the next run shows its table
    deadline = time.monotonic() + 120
    while "ls_c5_run_job" in at.session_state:
        assert time.monotonic() < deadline
        time.sleep(0.2)
        at.run()
    assert not at.exception, at.exception
    run = at.session_state["ls_c5_run"]
    assert len(run.rows) == 3 and len(at.dataframe) == 3
    assert list(at.dataframe[0].value.iloc[:, 3])[0].startswith(f"{run.rows[0]['ms_token']:.2f}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cancel_says_so_and_leaves_the_chapter_usable(embedded_pair, parked, lang):
    at = open_lessons(lang, "5")
    answer(at, "c5_faster", "no", lang)
    job = at.session_state["ls_c5_run_job"]
    at.button(key="ls_c5_run_cancel").click().run()
    assert not at.exception, at.exception
    said = " ".join(i.value for i in at.info)
    assert ("measurement was cancelled" if lang == "en" else "测量已取消") in said
    assert "ls_c5_run_job" not in at.session_state and "ls_c5_run" not in at.session_state
    parked.set()
    deadline = time.monotonic() + 60
    while not job.finished:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert job.state == "cancelled"
    at.run()  # not started again by itself; the questions still work
    assert "ls_c5_run_job" not in at.session_state and not at.button(key="ls_c5_measure").disabled
    answer(at, "c5_source", "lookup", lang)
    head, foot = bars(at)
    assert head == foot and at.session_state["ls_answers"]["c5_source"]["correct"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_5_one_pass_or_busy_draws_no_conclusion(embedded_pair, lang):
    rows = tuple(
        {
            "name": name,
            "alpha": alpha,
            "forwards": 32,
            "ms_token": 10.0,
            "spread": Spread.of([10.0]),
            "c": c,
            "predicted": 1.0,
        }
        for name, alpha, c in (("alone", None, None), ("model", 0.6, 0.3), ("self", 1.0, 1.0))
    )
    from specdec_core.bench.lesson_speed import SpeedRun

    one = SpeedRun(rows, 2.0, HowMeasured(0.0, 1, 1, 32, 1.0, 2), Verdict(False), True, 30.0, 3)
    at = open_lessons(lang, "5")
    at.session_state["ls_c5_run"] = one
    answer(at, "c5_faster", "no", lang)
    warnings = " ".join(w.value for w in at.warning)
    assert ("1 of 3 timed passes" if lang == "en" else "完成 1 遍") in warnings  # partial
    assert ("Only one timed pass" if lang == "en" else "只完成了一遍计时") in warnings
    assert "ls_c5_run_job" not in at.session_state  # a kept result is reused, not re-measured
    assert not any("10.00 ms/token" in m.value for m in at.markdown)


# ------------------------------------------------------------------ compare every source
def _comparison(embedded_pair, busy: bool):
    config = SessionConfig(gamma=3, seed=1, max_new_tokens=4)
    comp = sc.compare_sources(embedded_pair, config, ("model", "ngram"), repeats=2)
    verdict = Verdict(True, (REPEATS_DISAGREE,)) if busy else Verdict(False)
    return (embedded_pair.name, config, ("model", "ngram")), replace(comp, verdict=verdict)


def _start_drafters(lang: str):
    from streamlit.testing.v1 import AppTest
    from test_page_lessons import APP

    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["lang"] = lang
    at.run()
    at.switch_page("pages/drafters.py").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_inconclusive_comparison_hides_the_speed_up_ranking(embedded_pair, lang):
    at = _start_drafters(lang)
    at.session_state["dr_sources"] = _comparison(embedded_pair, busy=True)
    at.run()
    assert not at.exception, at.exception
    charts = {c.proto.id for c in at.get("plotly_chart") if "src_fig" in str(c.proto.id)}
    assert charts == set()
    said = " ".join(i.value for i in at.info)
    assert ("No speed-up chart and no ranking" if lang == "en" else "不显示加速比图表") in said
    warnings = " ".join(w.value for w in at.warning)
    assert ("too busy" if lang == "en" else "太忙") in warnings
    assert len([d for d in at.dataframe if "draft_fwd" in d.value.columns]) == 2  # tables stay
    at.session_state["dr_sources"] = _comparison(embedded_pair, busy=False)
    at.run()
    assert [c for c in at.get("plotly_chart") if "src_fig" in str(c.proto.id)]  # conclusive


def test_compare_every_source_runs_in_the_background(embedded_pair, monkeypatch):
    """The button queues a ``sources`` job (the page does not wait); its progress shows;
    when done the result is kept under ``dr_sources`` with its settings."""
    monkeypatch.setenv(jobs.WORKER_ENV, "thread")
    at = _start_drafters("en")
    at.select_slider(key="dr_src_tokens").set_value(8)
    at.select_slider(key="dr_src_repeats").set_value(1)
    at.button(key="dr_src_run").click().run()
    assert not at.exception, at.exception
    deadline = time.monotonic() + 240
    while "dr_src_bg_job" in at.session_state:
        assert time.monotonic() < deadline
        time.sleep(0.3)
        at.run()
    key, comp = at.session_state["dr_sources"]
    assert key[0] == embedded_pair.name and key[1].max_new_tokens == 8
    assert comp.max_new_tokens == 8 and comp.how.repeats == 1 and comp.budget_s == 30.0
    assert long_tasks.SOURCES_BUDGET_S == 30.0
    # how many passes fit the 30 s budget depends on the machine; what is said of it does not
    assert comp.partial == (comp.ran < comp.planned) and comp.ran >= 1
    if not comp.partial:
        assert list(comp.prompts) == list(SOURCE_PROMPTS.items())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_refused_measurement_says_why_once_and_the_chapter_works(
    embedded_pair, monkeypatch, lang
):
    """A full queue refuses chapter 5's run: one translated message, no job, nothing
    measured, the other questions still answer, and the button offers to measure again."""
    from specdec_core.core.errors import BusyError

    def refuse(owner, pair):
        raise BusyError(
            "every student place in the measurement queue is taken", "busy_reserved", limit=3
        )

    monkeypatch.setattr(T, "lesson_job", refuse)
    at = open_lessons(lang, "5")
    answer(at, "c5_faster", "no", lang)
    errors = [e.value for e in at.error if not e.value.startswith("✗")]
    assert (
        len(errors) == 1
        and ("3 places for students" if lang == "en" else "学生共 3 个位置") in errors[0]
    )
    assert "ls_c5_run_job" not in at.session_state and "ls_c5_run" not in at.session_state
    answer(at, "c5_source", "lookup", lang)
    assert not [e for e in at.error if not e.value.startswith("✗")]  # said once, not again
    assert not at.button(key="ls_c5_measure").disabled
    head, foot = bars(at)
    assert head == foot
