"""A seat is held by one client at a time (``RoomStore.hold`` / ``release``), on both
backends: the same client (a reload, a second tab) keeps it, another client is refused
with the seconds left of the holder's lease until the holder goes quiet for the lease
(45 s) or the teacher releases the seat; batches answer per seat; a gone room refuses."""

from __future__ import annotations

import pytest
import test_rooms

from specdec_core.server import room_seats
from specdec_core.server.room_types import RoomError

# the store fixtures of test_rooms.py: each backend, an injected clock
redis_url, make, clock, store = (
    test_rooms.redis_url,
    test_rooms.make,
    test_rooms.clock,
    test_rooms.store,
)
HOME, PHONE, LEAK = "addr:10.0.0.5", "addr:10.0.0.9", "addr:203.0.113.7"


def _err(fn, *args) -> str:
    with pytest.raises(RoomError) as exc:
        fn(*args)
    return exc.value.code


def test_one_client_holds_a_seat_until_its_lease_ends(store, clock):
    code, key = store.create()
    store.join(code, "a")
    assert store.hold(code, {"a": HOME}) == {}  # free: taken
    clock.advance(10)
    assert store.hold(code, {"a": HOME}) == {}  # a reload from the same address: kept
    assert store.hold(code, {"a": LEAK}) == {"a": pytest.approx(45.0)}  # the lease renewed
    clock.advance(30)
    assert store.hold(code, {"a": LEAK}) == {"a": pytest.approx(15.0)}
    clock.advance(15)  # the holder's screen closed 45 s ago (e.g. its address changed)
    assert store.hold(code, {"a": PHONE}) == {}  # the student's new address takes it
    assert store.hold(code, {"a": HOME}) == {"a": pytest.approx(45.0)}  # now the old one waits


def test_the_teacher_releases_a_held_seat_at_once(store, clock):
    code, key = store.create()
    assert store.hold(code, {"a": LEAK}) == {}
    assert store.hold(code, {"a": HOME}) == {"a": pytest.approx(45.0)}
    assert _err(store.release, code, "not-the-key", "a") == "room_key"
    store.release(code, key, "a")
    assert store.hold(code, {"a": HOME}) == {}  # whoever claims next holds it
    assert store.hold(code, {"a": LEAK}) == {"a": pytest.approx(45.0)}


def test_a_batch_answers_per_seat_and_rooms_do_not_share_holders(store, clock):
    code, _ = store.create()
    other, _ = store.create()
    assert store.hold(code, {"a": HOME, "b": HOME}) == {}
    clock.advance(5)
    assert store.hold(code, {"a": LEAK, "b": HOME, "c": LEAK}) == {"a": pytest.approx(40.0)}
    assert store.hold(other, {"a": LEAK}) == {}  # the same id in another room: its own seat


def test_a_gone_room_refuses_and_the_lease_is_bounded(store, clock, monkeypatch):
    code, key = store.create()
    assert _err(store.hold, code, {"../x": HOME}) == "room_student"  # a malformed seat id
    store.close(code, key)
    assert _err(store.hold, "ZZZZZZ", {"a": HOME}) == "room_unknown"
    assert _err(store.hold, code, {"a": HOME}) == "room_unknown"
    monkeypatch.setenv(room_seats.LEASE_ENV, "1e9")
    assert room_seats.lease_s() == 3600.0
    monkeypatch.setenv(room_seats.LEASE_ENV, "nan")
    assert room_seats.lease_s() == 45.0
