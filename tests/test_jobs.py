"""The speed page's measurement queue running its tasks in the worker process (embedded
pair, tiny budgets): real values that equal an in-thread run, errors that come back as
themselves, Stop while a task runs, the in-thread fallback, a killed worker and a task
that overruns its time. One worker serves the module (starting one imports torch and
transformers, ≈ 5 s); the two tests that end a worker come last. The queue's places:
one per client address, one kept for the teacher (no worker needed)."""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import replace

import pytest

from specdec_core.core.errors import BusyError, ModelLoadError
from specdec_core.core.settings import SessionConfig
from specdec_core.server import jobs, tasks
from specdec_core.server import worker as job_worker

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


class _Parked:
    """Stands for the queue's thread: alive, never takes a job (they stay queued)."""

    def is_alive(self) -> bool:
        return True


def _parked_queue() -> jobs.JobQueue:
    q = jobs.JobQueue(worker=job_worker.Worker())
    q._worker = _Parked()  # submit() starts no thread: admission only
    return q


def _job(session: str) -> jobs.Job:
    return jobs.Job("gamma", session, None, "x", 4, 1, True, False, SessionConfig())


def _refused(q: jobs.JobQueue, session: str, client: str) -> str:
    with pytest.raises(BusyError) as caught:
        q.submit(_job(session), client)
    return caught.value.code


def test_six_tabs_of_one_client_hold_one_place_and_the_teacher_keeps_one(monkeypatch):
    monkeypatch.setenv(jobs.TEACHER_ENV, "10.0.0.1")
    monkeypatch.delenv(jobs.JOBS_ENV, raising=False)  # 4 places
    q = _parked_queue()
    student = jobs.client_key("10.0.0.66", {}, "tab1")
    assert student == "addr:10.0.0.66" and not jobs.is_teacher(student)
    first = q.submit(_job("tab1"), student)
    codes = [_refused(q, f"tab{i}", student) for i in range(2, 7)]  # five more tabs
    assert codes == ["client_has_job"] * 5 and q.pending() == 1
    assert _refused(q, "tab1", "addr:10.0.0.99") == "job_running"  # the session itself
    q.submit(_job("b"), "addr:10.0.0.67")
    q.submit(_job("c"), "addr:10.0.0.68")
    assert _refused(q, "d", "addr:10.0.0.69") == "busy_reserved"  # 3 student places taken
    teacher = jobs.client_key(None, {"X-Real-IP": "10.0.0.1"}, "t")  # through nginx
    assert teacher == "addr:10.0.0.1" and jobs.is_teacher(teacher)
    q.submit(_job("t"), teacher)
    assert q.pending() == 4 and [q.position(j) for j in q._queue] == [1, 2, 3, 4]
    assert _refused(q, "t2", teacher) == "client_has_job"  # the teacher's second tab
    q.cancel(first)  # a place frees when its job goes: the student may queue again
    q.submit(_job("tab2"), student)
    assert _refused(q, "e", "addr:10.0.0.70") == "busy"  # 3 students + the teacher
    from specdec_core.ui.errors import error_message

    message = error_message(BusyError("x", "busy_reserved", limit=3))
    assert "3 places for students" in message and "kept for the teacher" in message
    assert "one at a time per computer" in error_message(BusyError("x", "client_has_job"))


def test_the_teacher_has_a_place_when_students_fill_the_queue(monkeypatch):
    monkeypatch.delenv(jobs.TEACHER_ENV, raising=False)  # default: this machine
    monkeypatch.setenv(jobs.JOBS_ENV, "1")  # even then: one student place + the teacher's
    q = _parked_queue()
    assert (jobs.places(), jobs.student_places()) == (2, 1)
    q.submit(_job("s1"), "addr:192.168.1.20")
    assert _refused(q, "s2", "addr:192.168.1.21") == "busy_reserved"
    teacher = jobs.client_key(None, {"Host": "127.0.0.1:8501"}, "t")  # a loopback browser
    assert teacher == "addr:127.0.0.1" and jobs.is_teacher(teacher)
    q.submit(_job("t"), teacher)
    assert _refused(q, "s3", "addr:192.168.1.22") == "busy"
    assert _refused(q, "t2", "addr:::1") == "busy"  # a second teacher address: all taken
    q.cancel(q._queue[0])  # the student's job goes: another student, not a third place
    q.submit(_job("s4"), "addr:192.168.1.23")
    assert _refused(q, "s5", "addr:192.168.1.24") == "busy"


def test_client_key_trusts_x_real_ip_only_from_a_trusted_proxy(monkeypatch):
    monkeypatch.delenv(jobs.PROXIES_ENV, raising=False)
    key = jobs.client_key
    assert key(None, {}, "s9") == "session:s9"  # no browser connection: its own client
    assert key("10.1.2.3", {"Host": "h"}, "s") == "addr:10.1.2.3"
    assert key("10.1.2.3", {"X-Real-IP": "10.9.9.9"}, "s") == "addr:10.1.2.3"  # forged
    assert key(None, {"x-real-ip": " 10.9.9.9 "}, "s") == "addr:10.9.9.9"  # nginx, loopback
    assert key("::1", {"X-Real-IP": "2001:DB8::1"}, "s") == "addr:2001:db8::1"
    assert key(None, {"X-Real-IP": "junk" * 100}, "s") == "addr:127.0.0.1"
    assert key("::ffff:10.1.2.3", {"Host": "h"}, "s") == "addr:10.1.2.3"  # dual-stack peer
    assert key("not an address", {"Host": "h"}, "s7") == "session:s7"
    monkeypatch.setenv(jobs.PROXIES_ENV, "172.18.0.5")  # nginx in another container
    assert key("172.18.0.5", {"X-Real-IP": "10.9.9.9"}, "s") == "addr:10.9.9.9"
    assert key(None, {"X-Real-IP": "10.9.9.9"}, "s") == "addr:127.0.0.1"


def test_measure_runs_in_the_worker_process(queue, embedded_pair):
    cfg = SessionConfig()  # greedy
    job = tasks.make_job("measure", "m1", embedded_pair, PROMPT, 12, 1, True, True, cfg)
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
    for x in (
        s.autoregressive.tokens_per_s,
        s.autoregressive.ms_per_token,
        s.speculative.tokens_per_s,
        s.speedup,
        s.cost_model.target_step_ms,
        s.cost_model.draft_step_ms,
        s.cost_model.verify_ms,
    ):
        assert positive(x), s
    assert 0.0 <= s.speculative.acceptance_rate <= 1.0
    assert m.hf_error is None and m.hf.greedy.equal_to_target and m.hf.assisted.equal_to_target
    assert len(m.curve.target_ms) == 2 * cfg.gamma + 1 and all(map(positive, m.curve.target_ms))
    assert m.timelines is not None and m.params["pair"] == "embedded"
    # the same task in this thread: greedy, so the same texts
    direct = tasks.make_job("measure", "m1", embedded_pair, PROMPT, 12, 1, True, True, cfg)
    jobs.run_task(direct, ("pair", cfg.gamma))
    assert (direct.out["ar"].text, direct.out[("sp", cfg.gamma)].text) == m.texts
    assert direct.out["ar"].output_ids == job.out["ar"].output_ids


def test_an_error_in_the_worker_comes_back_as_itself(queue, embedded_pair):
    # a preset this server does not offer: the worker's allow-list refuses to load it
    pair = replace(embedded_pair, name="gpt2-xl")
    job = tasks.make_job("gamma", "e1", pair, PROMPT, 4, 1, True, False, SessionConfig())
    assert jobs.in_process(job)
    wait(queue.submit(job))
    assert job.state == "failed" and job.done == 0
    assert isinstance(job.error, ModelLoadError) and job.error.code == "not_offered"
    assert queue.process.alive()  # an error in a task leaves the worker running


def test_stop_while_a_task_runs_drops_its_result(queue, embedded_pair):
    job = tasks.make_job("gamma", "c1", embedded_pair, PROMPT, 64, 2, True, False, SessionConfig())
    before = queue.process.tasks_run
    queue.submit(job)
    wait_until(lambda: job.done >= 1 and queue.process.busy)
    queue.cancel(job)
    wait(job)
    assert job.state == "cancelled" and queue.position(job) == -1 and queue.pending() == 0
    assert queue.process.tasks_run - before == job.done + 1  # the running one finished there
    assert [p.gamma for p in job.points] == list(range(1, job.done + 1))  # … and was dropped


def test_custom_pairs_and_the_switch_run_in_the_thread(
    queue, tiny_pair, embedded_pair, monkeypatch
):
    cfg = SessionConfig()
    job = tasks.make_job("gamma", "t1", tiny_pair, "ab", 3, 1, True, False, cfg)
    assert not jobs.in_process(job)  # not a named preset: the worker could not load it
    before = queue.process.tasks_run
    wait(queue.submit(job))
    assert job.state == "done" and len(job.points) == 8
    assert queue.process.tasks_run == before
    monkeypatch.setenv(jobs.WORKER_ENV, "thread")
    assert not jobs.in_process(
        tasks.make_job("gamma", "t2", embedded_pair, "x", 3, 1, True, False, cfg)
    )


def test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_new_one(queue, embedded_pair):
    cfg = SessionConfig()
    first = tasks.make_job("measure", "k1", embedded_pair, PROMPT, 64, 2, True, False, cfg)
    second = tasks.make_job("gamma", "k2", embedded_pair, PROMPT, 4, 1, True, False, cfg)
    queue.submit(first)
    queue.submit(second)
    wait_until(lambda: first.state == "running" and queue.process.busy)
    time.sleep(0.3)  # inside the task
    pid, starts = queue.process.pid, queue.process.starts
    os.kill(pid, signal.SIGKILL)
    wait(first)
    assert first.state == "failed" and first.result is None
    err = first.error
    assert isinstance(err, job_worker.WorkerError) and err.code == "job_worker"
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
    # A 64-token measurement runs dozens of forwards (tens of ms on any device): 5 ms with a
    # 1 ms poll is an overrun on every machine, however fast (0.3 s no longer was).
    monkeypatch.setattr(job_worker, "TASK_TIMEOUT_S", 0.005)
    monkeypatch.setattr(job_worker, "POLL_S", 0.001)
    job = tasks.make_job(
        "measure", "o1", embedded_pair, PROMPT, 64, 2, True, False, SessionConfig()
    )
    started = time.monotonic()
    wait(queue.submit(job), timeout=30)
    assert time.monotonic() - started < 15
    assert job.state == "failed" and isinstance(job.error, job_worker.WorkerError)
    assert "overran" in str(job.error) and not queue.process.alive()
