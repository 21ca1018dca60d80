# ruff: noqa: F811  (the store fixtures of test_rooms, imported by name)
"""The push route's refusals (``server/live_push``): a refused socket is closed before its
handshake (never an error page), whatever the refusal; a socket whose handling fails logs
through the route's guarded logger (5 records in full per kind and minute, then one
line); the sockets of a class that ended get the ``ended`` message and ``CLOSE_ENDED``
without costing their address a guess, so stale tabs never lock it out of the next class."""

from __future__ import annotations

import asyncio
import logging

from test_live_push import Socket, frame_of
from test_rooms import clock, make, redis_url, store  # noqa: F401

from specdec_core.server import live_push
from specdec_core.server.jobs import client_key
from specdec_core.server.live_push import CLOSE_ENDED, CLOSE_REFUSED, Hub, endpoint
from specdec_core.server.room_limits import RATES, Buckets, Rate
from specdec_core.server.rooms_sqlite import SQLiteStore
from specdec_core.ui.logguard import FULL_PER_WINDOW, RepeatGuard

HOST = "203.0.113.9"
WHO = client_key(HOST, {}, "ws")


def _buckets(monkeypatch, connects: float | None = None) -> Buckets:
    """A fresh set of rate buckets on a clock that stands still (no token comes back);
    ``connects``: the burst of connects to a live room, else the app's."""
    rates = dict(RATES) if connects is None else {**RATES, "connect": Rate(connects, 1.0)}
    fresh = Buckets(rates, clock=lambda: 1000.0)
    monkeypatch.setattr(live_push, "BUCKETS", fresh)
    return fresh


def _connect(hub: Hub, code: str, n: int) -> list[Socket]:
    async def scenario() -> list[Socket]:
        socks = [Socket({"room": code}, host=HOST) for _ in range(n)]
        await asyncio.gather(*(endpoint(x, hub) for x in socks))
        return socks

    return asyncio.run(scenario())


def test_made_up_rooms_past_the_guess_limit_are_refused_not_failed(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    reads = []
    version = store.version
    monkeypatch.setattr(store, "version", lambda code: reads.append(code) or version(code))
    buckets = _buckets(monkeypatch)
    socks = _connect(Hub(lambda: store, frame_of), "ZZZZZZ", 300)
    assert [x.closed_with for x in socks] == [CLOSE_REFUSED] * 300
    assert not any(x.accepted or x.sent for x in socks)
    assert len(reads) == 10  # the guess burst; then refused without a store read
    assert buckets.wait("guess", WHO) == 5.0  # one token every 5 s


def test_a_failing_socket_is_closed_and_logged_within_the_guard(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    code, _ = store.create()
    _buckets(monkeypatch, connects=1_000)  # 300 connects to a live room, none refused
    guard = RepeatGuard(clock=lambda: 50.0)
    monkeypatch.setattr(live_push.LOG, "filters", [guard])
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    live_push.LOG.addHandler(handler)
    monkeypatch.setattr(live_push.Listener, "__init__", _broken)
    try:
        socks = _connect(Hub(lambda: store, frame_of), code, 300)
    finally:
        live_push.LOG.removeHandler(handler)
    assert [x.closed_with for x in socks] == [CLOSE_REFUSED] * 300
    assert len(records) == FULL_PER_WINDOW + 1  # 5 in full, then one line
    assert [r.exc_info is not None for r in records] == [True] * FULL_PER_WINDOW + [False]
    assert records[-1].msg.startswith("[logguard] more records like this are suppressed")
    assert guard.suppressed_total == 300 - FULL_PER_WINDOW


def _broken(self, *args, **kwargs) -> None:
    raise KeyError("wait")


def test_an_ended_class_ends_its_tabs_at_no_guess(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    old, key = store.create()
    store.close(old, key)
    nxt, _ = store.create()
    buckets = _buckets(monkeypatch)
    hub = Hub(lambda: store, frame_of)
    stale = _connect(hub, old, 40)  # forty stale tabs reconnect to the ended class
    assert [x.sent for x in stale] == [[{"ended": True}]] * 40
    assert [x.closed_with for x in stale] == [CLOSE_ENDED] * 40
    assert buckets.wait("guess", WHO) == 0.0  # the address can still join the next class
    assert buckets._level("guess", WHO, 1000.0) == 10.0

    async def join_next() -> Socket:
        ws = Socket({"room": nxt}, host=HOST)
        task = asyncio.ensure_future(endpoint(ws, hub))
        await asyncio.sleep(0.1)
        await ws.close()
        await task
        return ws

    fresh = asyncio.run(join_next())
    assert fresh.accepted and fresh.sent[0]["page"] == "step"


def test_ended_names_a_closed_class_until_its_expiry(store, clock):
    live, key = store.create()
    other, _ = store.create()
    assert not store.ended(live) and not store.ended("ZZZZZZ") and not store.ended("<bad>")
    store.close(live, key)
    assert store.ended(live) and store.ended(live.lower()) and not store.ended(other)
    clock.now += 3601  # the room's expiry: its results are gone, and so is the word
    assert not store.ended(live)


def test_the_app_puts_its_log_guard_on_the_route(monkeypatch):
    from specdec_core.ui import logguard
    from specdec_core.ui.live import push_server

    monkeypatch.setattr(live_push, "ENABLED", False)  # restored: other tests poll
    monkeypatch.setattr(push_server, "HUB", None)
    monkeypatch.setattr(live_push.LOG, "filters", [])
    push_server.push_routes()
    push_server.push_routes()
    assert live_push.LOG.filters == [logguard.GUARD]


def test_connects_to_a_live_room_past_the_address_rate_are_refused(tmp_path, monkeypatch):
    """A connect/close loop to a real room: each connect costs the address a ``connect``
    token (each would read the room's view); past the burst it is refused before any read
    of the view, and another address still connects."""
    store = SQLiteStore(tmp_path / "r.sqlite3")
    code, _ = store.create()
    buckets = _buckets(monkeypatch, connects=3)
    hub = Hub(lambda: store, frame_of)

    async def connect_and_leave() -> list[Socket]:
        out = []
        for _ in range(5):
            x = Socket({"room": code}, host=HOST)
            task = asyncio.ensure_future(endpoint(x, hub))
            for _ in range(400):  # until the route accepted or refused it
                if x.accepted or x.closed_with is not None:
                    break
                await asyncio.sleep(0.005)
            x.gone.set()  # the client closes at once
            await asyncio.wait_for(task, 10)
            out.append(x)
        return out

    socks = asyncio.run(connect_and_leave())
    assert [x.accepted for x in socks] == [True, True, True, False, False]
    assert [x.closed_with for x in socks[3:]] == [CLOSE_REFUSED] * 2
    assert buckets.wait("connect", WHO) == 1.0  # one token a second at this rate
    assert buckets.wait("connect", client_key("198.51.100.7", {}, "ws")) == 0.0
