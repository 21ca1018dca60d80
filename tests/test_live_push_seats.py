# ruff: noqa: F811  (the store fixtures of test_rooms, imported by name)
"""The push hub keeps the seats of the follower screens it holds (``server/live_push_seats``):
a seat token is this process's, for one room, and cannot be forged or reused elsewhere; the
hub writes each room's heartbeats as one store call every ``BEAT_S``, keeps the tab in its
seat's fast place, tells a tab that lost the place (another tab claimed it) or whose seat the
store refused, and tells a socket with a token it did not make to beat on its own."""

from __future__ import annotations

import asyncio
import json

from test_live_push import Socket, frame_of, run
from test_rooms import clock, make, redis_url, store  # noqa: F401

from specdec_core.server import live_push_seats as seats
from specdec_core.server.live_push import Hub, Listener, endpoint
from specdec_core.server.room_limits import Tabs


def test_a_seat_token_names_its_room_seat_tab_and_client_and_cannot_be_forged():
    t = seats.token("abcdef", "0123456789abcdef", "tab1", "addr:10.0.0.1")
    assert seats.read(t, "ABCDEF") == ("0123456789abcdef", "tab1", "addr:10.0.0.1")
    assert seats.read(t, "ZZZZZZ") is None  # another room's
    # presented by a socket: good only from the address it names (a leaked link is not)
    assert seats.read(t, "ABCDEF", "addr:10.0.0.1") == ("0123456789abcdef", "tab1", "addr:10.0.0.1")
    assert seats.read(t, "ABCDEF", "addr:203.0.113.7") is None
    body, mac = t.split(".")
    other = seats.token("abcdef", "fedcba9876543210", "tab1", "addr:10.0.0.1").split(".")[0]
    for bad in (f"{other}.{mac}", f"{body}.{'0' * 32}", f"{body}.{mac}x", "", "a.b.c", "é.é"):
        assert seats.read(bad, "ABCDEF") is None
    assert seats.read(body + "A" * seats.MAX_TOKEN + "." + mac, "ABCDEF") is None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counted:
    """A store whose ``heartbeats`` calls are recorded (and refuse the seat ``bad``)."""

    def __init__(self, store) -> None:
        self.store, self.calls, self.holds = store, [], []

    def heartbeats(self, code, students):
        self.calls.append((code, list(students)))
        return self.store.heartbeats(code, students)

    def hold(self, code, holders):
        self.holds.append((code, dict(holders)))
        return self.store.hold(code, holders)


def test_the_hub_beats_each_rooms_seats_in_one_call_and_tells_tabs_that_lost_their_place(
    make, monkeypatch
):
    store = make(ttl_s=3600)
    code, key = store.create()
    other, _ = store.create()
    for s in ("a" * 16, "b" * 16, "c" * 16):
        store.join(code if s != "c" * 16 else other, s)
    store.remove(code, key, "b" * 16)
    tabs = Tabs(limit=10)
    monkeypatch.setattr(seats, "TABS", tabs)
    counted, clock = Counted(store), Clock()
    beats = seats.SeatBeats(lambda: counted, clock=clock)
    loop = asyncio.new_event_loop()
    try:

        def listener(room, student, tab):
            x = Listener(room, "en", "addr:1", loop)
            x.seat = (student, tab, "addr:1")
            return x

        a1, b1 = listener(code, "a" * 16, "t1"), listener(code, "b" * 16, "t2")
        c1 = listener(other, "c" * 16, "t3")
        plain = Listener(code, "en", "addr:9", loop)  # no seat: nothing is done for it
        rooms = {code: [a1, b1, plain], other: [c1]}
        beats.run(rooms)
        assert sorted(counted.calls) == sorted([(code, ["a" * 16, "b" * 16]), (other, ["c" * 16])])
        assert b1.personal == seats.SEAT_REFUSED and a1.personal is None  # b was removed
        # the hub holds each seat for its screens' address: another address is refused
        assert (code, {"a" * 16: "addr:1", "b" * 16: "addr:1"}) in counted.holds
        assert list(store.hold(code, {"a" * 16: "addr:2"})) == ["a" * 16]
        b1.personal = None
        clock.now += seats.TABS_S
        beats.run(rooms)  # within BEAT_S: no store call, the tabs checked
        assert len(counted.calls) == 2
        assert tabs.claim("a" * 16, "t9", "addr:1")  # a second tab of seat a claims the place
        clock.now += seats.TABS_S
        beats.run(rooms)
        assert a1.personal == seats.TAB_OTHER and not a1.fast
        a1.personal = None
        clock.now += seats.TABS_S
        beats.run(rooms)
        assert a1.personal is None  # told once
        clock.now += seats.BEAT_S
        beats.run(rooms)
        assert len(counted.calls) == 4  # one call per room per BEAT_S
        assert beats.writes == 4
        clock.now += seats.BEAT_S  # a screen of seat a from another address (a leaked
        a2 = listener(code, "a" * 16, "t8")  # cookie, signed by its own page run)
        a2.seat = ("a" * 16, "t8", "addr:2")
        rooms[code].append(a2)
        beats.run(rooms)
        assert a2.personal == seats.SEAT_REFUSED and a1.personal is None
    finally:
        loop.close()


def test_a_socket_with_a_token_of_another_process_or_address_is_told_to_beat_itself(tmp_path):
    from specdec_core.server.rooms_sqlite import SQLiteStore

    s = SQLiteStore(tmp_path / "r.sqlite3")
    code, _ = s.create()
    hub = Hub(lambda: s, frame_of, poll_s=0.02)
    good = seats.token(code, "a" * 16, "t1", "addr:203.0.113.7")  # the sockets' address
    forged = good.split(".")[0] + "." + "f" * 32
    leaked = seats.token(code, "b" * 16, "t2", "addr:10.0.0.5")  # signed for another one

    async def scenario():
        socks = [Socket({"room": code, "seat": t}) for t in (good, forged, leaked)]
        tasks = [asyncio.ensure_future(endpoint(x, hub)) for x in socks]
        await asyncio.sleep(0.2)
        held = {x.seat for ls in hub.rooms.values() for x in ls}
        for x in socks:
            await x.close()
        await asyncio.gather(*tasks)
        return socks, held

    (ok, bad, other), held = run(scenario())
    assert held == {("a" * 16, "t1", "addr:203.0.113.7"), None}
    assert {"seat": "unsigned"} not in ok.sent and "page" in ok.sent[0]
    for x in (bad, other):  # a forged token, a token from another address: beat yourself
        assert x.sent[0] == json.loads(seats.SEAT_UNSIGNED) and "page" in x.sent[1]


def test_a_failing_view_pass_does_not_stop_the_seats_heartbeats(tmp_path):
    """The hub's thread runs the views' pass and the seats' pass apart: a view pass that
    raises every time (a bad frame) still lets the seats be beaten on each pass."""
    from specdec_core.server.rooms_sqlite import SQLiteStore

    s = SQLiteStore(tmp_path / "r.sqlite3")
    code, _ = s.create()
    hub = Hub(lambda: s, frame_of, poll_s=0.001)
    passes = []

    def broken_poll():
        raise ValueError("a bad frame")

    class Beats:
        def run(self, held):
            passes.append(sorted(held))
            if len(passes) == 3:
                hub.rooms.clear()  # the last listener left: the thread returns

    hub.poll, hub.seats = broken_poll, Beats()
    hub.rooms[code] = []
    hub._run()
    assert passes == [[code], [code], [code]]
