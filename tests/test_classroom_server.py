"""One student must not stall the class, checked against a real
``streamlit run app.py`` on 127.0.0.1 with a hand-made websocket client
(``benchmarks/classroom_ws.py``, the protocol of ``benchmarks/load_test.py``).

Timing bounds are generous (seconds, where the unfixed server took minutes); the exact
refusals are checked by message and by counting work, not by the clock."""

from __future__ import annotations

import asyncio
import io
import logging
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import classroom_ws as W  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with W.app_server(log, SPECDEC_TEACHER_ADDRS=W.TEACHER_ADDR) as proc:
        yield proc, log, f"ws://127.0.0.1:{proc.server_port}/_stcore/stream"


async def _clicks(victim: W.Client, n: int) -> list[float]:
    return await W._victim_clicks(victim, n)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))


def test_oversized_table_state_is_refused_before_any_work(server):
    _, _, url = server

    async def scenario():
        victim, vws = await W.open_client(url)
        attacker, aws = await W.open_client(url)
        base = await _clicks(victim, 4)
        await attacker.rerun(page="acceptance_lab")
        key = next(k for k in attacker.ids if k.startswith("rl_editor_"))
        attack = asyncio.ensure_future(attacker.rerun(**{key: W.oversized_table(20_000)}))
        during = await _clicks(victim, 4)
        attack_ms = await attack
        await vws.close()
        await aws.close()
        return base, during, attack_ms, attacker

    base, during, attack_ms, attacker = _run(scenario())
    assert not attacker.exceptions
    assert any("table was reset" in a for a in attacker.alerts), attacker.alerts
    assert attack_ms < 10_000  # unfixed: minutes of CPU for 20,000 rows
    assert statistics.median(during) < 3 * statistics.median(base) + 1500


def test_huge_prompts_are_refused(server):
    _, _, url = server
    port = url.split(":")[2].split("/")[0]

    async def scenario():
        victim, vws = await W.open_client(url)
        base = await _clicks(victim, 3)
        attacker, aws = await W.open_client(url)
        started = time.perf_counter()
        ms = await attacker.rerun(st_prompt="To be or not to be. " * 50_000)  # 1 MB
        again = await attacker.rerun(click="① Propose")  # blocked, not tokenized again
        during = await _clicks(victim, 3)
        big, bws = await W.open_client(url)
        closed = False
        try:  # 3 MB: over server.maxMessageSize, the server drops the message
            await big.rerun(st_prompt="x" * 3_000_000)
        except Exception:  # noqa: BLE001 - websockets.ConnectionClosed
            closed = True
        await vws.close()
        await aws.close()
        await bws.close()
        return base, during, ms, again, attacker, closed, time.perf_counter() - started

    base, during, ms, again, attacker, closed, _ = _run(scenario())
    assert not attacker.exceptions
    assert any("at most" in a for a in attacker.alerts), attacker.alerts
    assert ms < 10_000 and again < 10_000
    assert closed
    urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10)
    assert statistics.median(during) < 3 * statistics.median(base) + 1500


def test_forged_cache_clear_leaves_the_models_loaded_once(server):
    _, log, url = server

    async def scenario():
        attacker, aws = await W.open_client(url)
        for _ in range(3):
            await attacker.clear_cache()
            await asyncio.sleep(0.2)
            fresh, fws = await W.open_client(url)
            assert not fresh.exceptions and "committed length" in fresh.metrics
            await fws.close()
        await aws.close()

    _run(scenario())
    assert log.read_text().count("specdec-pair-load embedded") == 1


def test_a_prompt_is_tokenized_once_per_change(embedded_pair, monkeypatch):
    from specdec_core.ui import guards

    calls: list[int] = []
    real = guards.encode_prompt

    def counting(pair, prompt):
        calls.append(len(prompt))
        return real(pair, prompt)

    monkeypatch.setattr(guards, "encode_prompt", counting)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    at.text_area(key="st_prompt").set_value("To be or not to be. " * 1000).run()
    for _ in range(3):
        at.run()
    assert not at.exception
    assert len(calls) == 2  # the default prompt, then the long one: never per rerun
    assert at.error and "at most" in at.error[0].value


def _guarded(guard) -> tuple[logging.Logger, io.StringIO, list]:
    """A private logger whose one handler carries ``guard``: (logger, text out, records)."""
    out, passed = io.StringIO(), []

    class Keep(logging.StreamHandler):
        def emit(self, record):
            passed.append(record)
            super().emit(record)

    handler = Keep(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    handler.addFilter(guard)
    logger = logging.Logger("test.logguard")  # not registered: no other handlers
    logger.addHandler(handler)
    return logger, out, passed


def _error(logger: logging.Logger, text: str = "x" * 1300, huge: bool = False) -> None:
    try:
        if huge:
            raise ValueError(text)
        int(text)  # Python quotes at most 200 characters of it
    except ValueError:
        logger.error("Uncaught app execution", exc_info=True)


def test_the_log_guard_collapses_1000_identical_errors():
    from specdec_core.ui import logguard

    now = [0.0]
    logger, out, passed = _guarded(logguard.RepeatGuard(clock=lambda: now[0]))
    for i in range(1000):  # 50 a second: 20 s, one window
        now[0] = i / 50
        _error(logger)
    assert len(passed) == logguard.FULL_PER_WINDOW + 1 == 6
    assert all(r.exc_text and "ValueError" in r.exc_text for r in passed[:5])
    assert passed[5].exc_info is None and passed[5].getMessage().startswith(
        "[logguard] more records like this are suppressed for up to 60 s"
    )
    first_window = len(out.getvalue())
    assert first_window < 6 * 2_000  # unguarded: 1,000 × ≈ 1.7 KB
    for i in range(1000):  # the next minute: the first record says what was dropped
        now[0] = 60 + i / 50
        _error(logger)
    assert len(passed) == 12
    assert passed[6].getMessage().startswith("[logguard] 995 more like this suppressed")
    logger.warning("another signature %s", "here")  # counted on its own
    logger.info("profile lines pass %d", 1)
    assert len(passed) == 14 and passed[13].getMessage() == "profile lines pass 1"
    for _ in range(100):
        logger.info("info is never suppressed")
    assert len(passed) == 114


def test_the_log_guard_caps_huge_records_and_installs_on_streamlit_handlers():
    from streamlit.logger import get_logger

    from specdec_core.ui import logguard

    logger, out, passed = _guarded(logguard.RepeatGuard())
    _error(logger, "y" * 1_000_000, huge=True)  # a 1 MB exception message
    logger.error("big %s", "z" * 1_000_000)
    assert len(out.getvalue()) < logguard.MAX_MESSAGE + logguard.MAX_TRACEBACK + 2_000
    assert "characters cut by logguard" in passed[0].exc_text
    assert len(passed[1].getMessage()) < logguard.MAX_MESSAGE + 100
    st_logger = get_logger("streamlit.test_logguard")  # Streamlit's: no propagation
    assert not st_logger.propagate and logguard.GUARD not in st_logger.handlers[0].filters
    assert logguard.install(force=True) >= 1
    assert logguard.GUARD in st_logger.handlers[0].filters
    assert logguard.install(force=True) == 0  # idempotent


def test_fifty_malformed_messages_write_a_bounded_log(server):
    """A student's 50 malformed reruns (1.3 KB each: letters in the seed box) on the real
    server: 5 tracebacks in full and one line (was 50 rich tracebacks, ≈ 4 KB each)."""
    _, log, url = server

    async def scenario() -> int:
        attacker, aws = await W.open_client(url)  # the app ran once: the guard is on
        msg = W.malformed(attacker)
        size = len(log.read_bytes())
        before = log.read_text().count("Uncaught app execution\nTraceback")
        for _ in range(50):
            await attacker.send(msg)
            await attacker._read()
        await asyncio.sleep(1)
        await aws.close()
        text = log.read_bytes()[size:].decode("utf-8", "replace")
        full = log.read_text().count("Uncaught app execution\nTraceback") - before
        assert full == 5, text[-3000:]
        assert text.count("[logguard] more records like this are suppressed") == 1
        assert "─" not in text  # no rich panel printed around the logging
        return len(text.encode())

    grown = _run(scenario())
    assert grown < W.LOG_BOUND // 2, grown


def test_one_student_holds_one_measurement_place_and_the_teacher_gets_one(server):
    """Three tabs from one address (127.0.0.2) press "Sweep γ" on the real server: one is
    queued, two are told why; the teacher (127.0.0.3, SPECDEC_TEACHER_ADDRS) still gets a
    place. The client is the websocket's address, as the page sees it (st.context)."""
    proc, log, url = server
    port = url.split(":")[2].split("/")[0]

    async def scenario() -> dict:
        ctx = W.ProbeContext(f"http://127.0.0.1:{port}", url, proc.pid, log)
        task = asyncio.ensure_future(W.queue_fill(ctx, tabs=3))
        await asyncio.wait_for(ctx.ready.wait(), 240)
        ctx.release.set()
        return await task

    result = _run(scenario())
    assert result["ok"], result["facts"]
    assert result["facts"] == (
        "3 tabs of one student: 1 queued, 2 refused (one per computer); the teacher: queued"
    )
