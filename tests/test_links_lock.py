"""The lesson state written into the URL (and published to a live class) is read under
the session's engine lock (``ui/step/links.current_state``)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from specdec_core.ui.step import lesson as L
from specdec_core.ui.step import links


def test_the_state_on_screen_is_read_while_holding_the_engine_lock(monkeypatch):
    state: dict = {"lang": "en", "pair": SimpleNamespace(name="embedded")}
    ns = SimpleNamespace(session_state=state)
    monkeypatch.setattr(links, "st", ns)
    monkeypatch.setattr(L, "st", ns)
    lesson = SimpleNamespace(pair_name="embedded", session="the session", prompt="ROMEO:")
    monkeypatch.setattr(links.TL, "mode", lambda: "chain")
    monkeypatch.setattr(L, "current", lambda mode="chain": lesson)
    free_while_reading = []

    def state_of(session, base, prompt):
        other = []  # another thread of the tab (a click's step) tries the lock meanwhile
        t = threading.Thread(target=lambda: other.append(L.engine_lock(state).acquire(timeout=0)))
        t.start()
        t.join()
        free_while_reading.append(other[0])
        return (session, base.pair, prompt)

    monkeypatch.setattr(links, "state_of", state_of)
    assert links.current_state("step_through") == ("the session", "embedded", "ROMEO:")
    assert free_while_reading == [False]
    assert L.engine_lock(state).acquire(timeout=0)  # released after the read


def test_a_state_is_not_read_while_another_thread_keeps_the_engine(monkeypatch):
    import pytest

    state: dict = {"lang": "en", "pair": SimpleNamespace(name="embedded")}
    ns = SimpleNamespace(session_state=state)
    monkeypatch.setattr(links, "st", ns)
    monkeypatch.setattr(L, "st", ns)
    monkeypatch.setattr(L, "LOCK_WAIT_S", 0.05)
    monkeypatch.setattr(links, "state_of", lambda *a: pytest.fail("read during a step"))
    held, done = threading.Event(), threading.Event()

    def step() -> None:  # a click's step in another script thread of the tab
        with L.engine_lock(state):
            held.set()
            done.wait(5)

    t = threading.Thread(target=step)
    t.start()
    held.wait(5)
    try:
        with pytest.raises(links.Busy):
            links.current_state("step_through")
    finally:
        done.set()
        t.join()
