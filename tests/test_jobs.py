"""The speed page's measurement queue running its tasks in the worker process (embedded
pair, tiny budgets): real values that equal an in-thread run, errors that come back as
themselves, Stop while a task runs, the in-thread fallback, a killed worker and a task
that overruns its time. One worker serves the module (starting one imports torch and
transformers, ≈ 5 s); the two tests that end a worker come last."""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import replace

import pytest

from specdec_core.errors import ModelLoadError
from specdec_core.session import SessionConfig
from specdec_core.ui import job_worker, jobs

PROMPT = "ROMEO:\nBut soft, what light"


@pytest.fixture(scope="module")
def queue():
    q = jobs.JobQueue()
    q.alive = lambda _sid: True
    yield q
    q.process.stop()


def wait(job: jobs.Job, timeout: float = 180.0) -> jobs.Job:
    deadline = time.monotonic() + timeout
    while not job.finished:
        assert time.monotonic() < deadline, f"job still {job.state} after {timeout} s"
        time.sleep(0.02)
    return job


def wait_until(check, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


def test_measure_runs_in_the_worker_process(queue, embedded_pair):
    cfg = SessionConfig()  # greedy
    job = jobs.make_job("measure", "m1", embedded_pair, PROMPT, 12, 1, True, True, cfg)
    assert jobs.in_process(job)
    before = queue.process.tasks_run
    wait(queue.submit(job))
    assert job.state == "done", job.error
    assert job.done == job.total == 4 and queue.process.tasks_run - before == 4
    pid = queue.process.pid
    assert pid not in (None, os.getpid()) and queue.process.alive()
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(
        19, os.getpriority(os.PRIO_PROCESS, 0) + job_worker.WORKER_NICE
    )
    m = job.result
    s = m.summary
    assert s.autoregressive.new_tokens == s.speculative.new_tokens == 12  # EOS ignored
    assert s.greedy_equal and s.gamma == cfg.gamma
    for x in (s.autoregressive.tokens_per_s, s.autoregressive.ms_per_token,
              s.speculative.tokens_per_s, s.speedup, s.cost_model.target_step_ms,
              s.cost_model.draft_step_ms, s.cost_model.verify_ms):  # fmt: skip
        assert positive(x), s
    assert 0.0 <= s.speculative.acceptance_rate <= 1.0
    assert m.hf_error is None and m.hf.greedy.equal_to_target and m.hf.assisted.equal_to_target
    assert len(m.curve.target_ms) == 2 * cfg.gamma + 1 and all(map(positive, m.curve.target_ms))
    assert m.timelines is not None and m.params["pair"] == "embedded"
    # the same task in this thread: greedy, so the same texts
    direct = jobs.make_job("measure", "m1", embedded_pair, PROMPT, 12, 1, True, True, cfg)
    jobs.run_task(direct, ("pair", cfg.gamma))
    assert (direct.out["ar"].text, direct.out[("sp", cfg.gamma)].text) == m.texts
    assert direct.out["ar"].output_ids == job.out["ar"].output_ids


def test_an_error_in_the_worker_comes_back_as_itself(queue, embedded_pair):
    # a preset this server does not offer: the worker's allow-list refuses to load it
    pair = replace(embedded_pair, name="gpt2-xl")
    job = jobs.make_job("gamma", "e1", pair, PROMPT, 4, 1, True, False, SessionConfig())
    assert jobs.in_process(job)
    wait(queue.submit(job))
    assert job.state == "failed" and job.done == 0
    assert isinstance(job.error, ModelLoadError) and job.error.code == "not_offered"
    assert queue.process.alive()  # an error in a task leaves the worker running


def test_stop_while_a_task_runs_drops_its_result(queue, embedded_pair):
    job = jobs.make_job("gamma", "c1", embedded_pair, PROMPT, 64, 2, True, False,
                        SessionConfig())  # fmt: skip
    before = queue.process.tasks_run
    queue.submit(job)
    wait_until(lambda: job.done >= 1 and queue.process.busy)
    queue.cancel(job)
    wait(job)
    assert job.state == "cancelled" and queue.position(job) == -1 and queue.pending() == 0
    assert queue.process.tasks_run - before == job.done + 1  # the running one finished there
    assert [p.gamma for p in job.points] == list(range(1, job.done + 1))  # … and was dropped


def test_custom_pairs_and_the_switch_run_in_the_thread(queue, tiny_pair, embedded_pair,
                                                       monkeypatch):  # fmt: skip
    cfg = SessionConfig()
    job = jobs.make_job("gamma", "t1", tiny_pair, "ab", 3, 1, True, False, cfg)
    assert not jobs.in_process(job)  # not a named preset: the worker could not load it
    before = queue.process.tasks_run
    wait(queue.submit(job))
    assert job.state == "done" and len(job.points) == 8
    assert queue.process.tasks_run == before
    monkeypatch.setenv(jobs.WORKER_ENV, "thread")
    assert not jobs.in_process(jobs.make_job("gamma", "t2", embedded_pair, "x", 3, 1, True,
                                             False, cfg))  # fmt: skip


def test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_new_one(queue, embedded_pair):
    cfg = SessionConfig()
    first = jobs.make_job("measure", "k1", embedded_pair, PROMPT, 64, 2, True, False, cfg)
    second = jobs.make_job("gamma", "k2", embedded_pair, PROMPT, 4, 1, True, False, cfg)
    queue.submit(first)
    queue.submit(second)
    wait_until(lambda: first.state == "running" and queue.process.busy)
    time.sleep(0.3)  # inside the task
    pid, starts = queue.process.pid, queue.process.starts
    os.kill(pid, signal.SIGKILL)
    wait(first)
    assert first.state == "failed" and first.result is None
    err = first.error
    assert isinstance(err, jobs.WorkerError) and err.code == "job_worker"
    assert "worker process stopped (exit code -9)" in str(err)
    assert "next measurement starts a new worker" in str(err)
    from specdec_core.ui.errors import error_message

    message = error_message(err)
    assert "worker process stopped" in message and "Press Measure again" in message
    wait(second)
    assert second.state == "done", second.error
    assert [p.gamma for p in second.points] == list(range(1, 9))
    assert queue.process.pid != pid and queue.process.starts == starts + 1


def test_a_task_that_overruns_is_stopped(queue, embedded_pair, monkeypatch):
    monkeypatch.setattr(job_worker, "TASK_TIMEOUT_S", 0.3)
    job = jobs.make_job("measure", "o1", embedded_pair, PROMPT, 64, 2, True, False,
                        SessionConfig())  # fmt: skip
    started = time.monotonic()
    wait(queue.submit(job), timeout=30)
    assert time.monotonic() - started < 15
    assert job.state == "failed" and isinstance(job.error, jobs.WorkerError)
    assert "overran" in str(job.error) and not queue.process.alive()
