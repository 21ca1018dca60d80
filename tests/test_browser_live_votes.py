"""The teacher's answers chart in a real browser (Chromium, ``streamlit run app.py`` with the
dashboard's poll raised to 10 s): a student's answer reaches the projector through the
votes socket of the push route (``ui/live/push_votes``), not the dashboard's poll. The
browser's own messages to the server are read (Playwright's sync API hands them over while
it waits, so the test waits with ``page.wait_for_timeout``): right after a poll of the
dashboard the answer is stored; the count shows, the votes component asked for that run
(its ``changed`` trigger, a room version newer than before the answer) and no poll was sent
in between, in English and Chinese."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import REPO, _need_chromium, free_port

from specdec_core.server.room_types import Question
from specdec_core.server.rooms_sqlite import SQLiteStore

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def slow_poll_server(tmp_path_factory):
    """``streamlit run app.py`` with ``SPECDEC_LIVE_POLL_S=10`` and its own room file."""
    _need_chromium()
    folder = tmp_path_factory.mktemp("votes")
    db, port = folder / "rooms.sqlite3", free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SPECDEC_ROOM_DB": str(db)}
    env.update(SPECDEC_LIVE_POLL_S="10", SPECDEC_REDIS_URL="")
    with open(folder / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
            + ["--server.port", str(port), "--server.address", "127.0.0.1"]
            + ["--browser.gatherUsageStats", "false"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(180):
                try:
                    urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            yield url, SQLiteStore(db)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def _reruns(frames: list[tuple[float, bytes]]) -> list[tuple[float, str, bool, list]]:
    """(time, fragment id, is an automatic fragment rerun, the triggers it carries) of every
    rerun the browser sent; a trigger: ``(widget id, [{"event", "value"}])``."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    out = []
    for at, raw in frames:
        msg = BackMsg()
        try:
            msg.ParseFromString(raw)
        except Exception:  # noqa: BLE001 - not a BackMsg
            continue
        if msg.WhichOneof("type") != "rerun_script":
            continue
        run = msg.rerun_script
        triggers = [
            (w.id, json.loads(w.json_trigger_value))
            for w in run.widget_states.widgets
            if w.WhichOneof("value") == "json_trigger_value"
        ]
        out.append((at, run.fragment_id, bool(run.is_auto_rerun), triggers))
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_answer_reaches_the_teachers_chart_through_the_votes_socket(
    slow_poll_server, new_page, lang
):
    url, store = slow_poll_server
    code, key = store.create()
    page = new_page(1024, 768)
    frames: list[tuple[float, bytes]] = []
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framesent", lambda p: frames.append((time.time(), p)) if isinstance(p, bytes) else 0
        ),
    )
    page.goto(f"{url}/?room={code}&teacher={key}&lang={lang}")
    store.join(code, "a" * 16)
    store.ask(code, key, Question("q1", "accept", (("r", "0"), ("k", "1")), ("Yes", "No")))
    zero = "0 of 1" if lang == "en" else "已有 0 人"
    one = "1 of 1" if lang == "en" else "已有 1 人"
    page.get_by_text(zero).first.wait_for(timeout=WAIT_MS)  # the dashboard drew the vote
    page.wait_for_timeout(1000)  # the votes component's socket is open

    def votes(runs) -> list:  # (fragment id, value) of the votes component's triggers
        return [
            (frag, event["value"])
            for _, frag, _, triggers in runs
            for wid, events in triggers
            if wid.endswith("live_votes_push__events")
            for event in events
            if event.get("event") == "changed"
        ]

    def polls() -> list:  # the dashboard's timer (the one fragment with run_every here)
        return [r for r in _reruns(frames) if r[2]]

    deadline = time.time() + 30  # answer just after a poll: the next one is 10 s away
    while not polls() and time.time() < deadline:
        page.wait_for_timeout(50)  # Playwright's sync API hands events over while it waits
    dashboard = polls()[0][1]
    page.wait_for_timeout(500)
    before = store.version(code)
    answered = time.time()
    store.answer(code, "a" * 16, "q1", 0)
    page.get_by_text(one).first.wait_for(timeout=WAIT_MS)
    shown = time.time()
    sent = [r for r in _reruns(frames) if answered <= r[0] <= shown]
    asked = [v for frag, v in votes(sent) if frag == dashboard]
    assert asked and max(asked) > before, _reruns(frames)  # the socket asked for the run
    timeline = [(round(r[0] - answered, 2), r[2], r[3]) for r in _reruns(frames)]
    assert not [r for r in sent if r[2]], (shown - answered, timeline)  # no poll in between
    store.close(code, key)
