"""Fast full-page reruns against a real ``streamlit run app.py``.

A client can send full reruns (no fragment id) faster than a step runs. With Streamlit's
``fastReruns`` each one starts a new script thread while the last is still inside its
callback: before the per-session engine lock this gave ``IndexError`` in verify, cache
size mismatches and a tab stuck until Reset. Bounded: 30 clicks over 3 s, then a settle."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import websockets

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import classroom_ws as W  # noqa: E402

RATE_HZ = 10
SECONDS = 3


async def storm(url: str, rate_hz: int = RATE_HZ, seconds: float = SECONDS) -> dict:
    """One tab sends ``rate_hz`` full reruns a second (each a "Run one round" click) for
    ``seconds`` without waiting for any to finish, then settles; returns what the tab saw
    and whether it still steps afterwards."""
    ws = await websockets.connect(
        url, subprotocols=["streamlit"], max_size=None, open_timeout=W.TIMEOUT_S
    )
    tab = W.Client(ws, fragment_reruns=False)
    await tab.rerun()
    seen_alerts: list[str] = []
    seen_exceptions: list[str] = []

    async def read() -> None:
        while True:
            tab.handle(await ws.recv())
            seen_alerts.extend(a for a in tab.alerts if a not in seen_alerts)
            seen_exceptions.extend(e for e in tab.exceptions if e not in seen_exceptions)

    reader = asyncio.ensure_future(read())
    for _ in range(int(rate_hz * seconds)):
        await tab.send(tab.rerun_msg(click="Run one round"))
        await asyncio.sleep(1 / rate_hz)
    await asyncio.sleep(6)  # the queued runs finish (each waits for the lock, bounded)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await tab.rerun(click="Reset")
    before = tab.metrics.get("committed length")
    await tab.rerun(click="Run one round")
    after = tab.metrics.get("committed length")
    await ws.close()
    return {
        "alerts": seen_alerts,
        "exceptions": seen_exceptions + tab.exceptions,
        "committed_before": before,
        "committed_after": after,
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with W.app_server(log) as proc:
        yield proc, log, f"ws://127.0.0.1:{proc.server_port}/_stcore/stream"


def test_full_reruns_at_ten_a_second_never_run_one_session_twice(server):
    _, log, url = server
    seen = asyncio.run(asyncio.wait_for(storm(url), 300))
    assert not seen["exceptions"], seen["exceptions"]
    assert not [a for a in seen["alerts"] if "went wrong" in a], seen["alerts"]
    assert "Traceback" not in log.read_text()
    assert int(seen["committed_after"]) > int(seen["committed_before"])  # still steps
