# ruff: noqa: F811  (the fixtures of test_rooms, imported by name, are the arguments)
"""A room's frames in the store (both backends, as ``test_rooms``): only the teacher key
writes one, a malformed digest or an oversized frame is refused, a room keeps its newest
``KEPT_FRAMES`` (a paused class's older state keeps its frame), two store objects on one
storage (two replicas) see them, and they go with their room (closed, expired): one
message, ``room_unknown``, as for any gone room."""

from __future__ import annotations

import pytest
from test_rooms import clock, make, redis_url, store  # noqa: F401 (fixtures)

from specdec_core.server.room_frames import KEPT_FRAMES, MAX_FRAME_BYTES, state_digest
from specdec_core.server.room_types import RoomError

STATE = {"lang": "en", "s": "abc"}


def _code(exc: pytest.ExceptionInfo) -> str:
    return exc.value.code


def test_the_teacher_stores_frames_every_replica_reads(make, clock):
    a, b = make(clock=clock, ttl_s=3600), make(clock=clock, ttl_s=3600)
    code, key = a.create()
    digests = [state_digest("step", {**STATE, "s": f"s{i}"}) for i in range(KEPT_FRAMES + 2)]
    assert len(set(digests)) == len(digests) and all(len(d) == 32 for d in digests)
    assert b.frame(code, digests[0]) is None  # nothing stored yet
    a.put_frame(code, key, digests[0], '{"v":0}')
    assert b.frame(code.lower(), digests[0]) == '{"v":0}'  # codes read as typed
    for i, digest in enumerate(digests[1:], start=1):
        clock.advance(1)
        a.put_frame(code, key, digest, f'{{"v":{i}}}')
    kept = [b.frame(code, d) for d in digests]
    assert kept[:2] == [None, None]  # the oldest two dropped
    assert kept[2:] == [f'{{"v":{i}}}' for i in range(2, KEPT_FRAMES + 2)]
    clock.advance(1)
    a.put_frame(code, key, digests[2], '{"v":"again"}')  # the same state again: replaced
    assert b.frame(code, digests[2]) == '{"v":"again"}'


def test_only_the_key_writes_a_bounded_frame(store):
    code, key = store.create()
    other_code, other_key = store.create()
    digest = state_digest("step", STATE)
    with pytest.raises(RoomError) as exc:
        store.put_frame(code, other_key, digest, "{}")  # another room's key
    assert _code(exc) == "room_key"
    for bad in ("", "A" * 32, "0" * 31, "0" * 33, "../" + "0" * 29, None):
        with pytest.raises(RoomError) as exc:
            store.put_frame(code, key, bad, "{}")
        assert _code(exc) == "room_state"
    with pytest.raises(RoomError) as exc:
        store.put_frame(code, key, digest, "x" * (MAX_FRAME_BYTES + 1))
    assert _code(exc) == "room_state"
    store.put_frame(code, key, digest, "x" * MAX_FRAME_BYTES)  # at the bound: kept
    assert store.frame(code, digest) == "x" * MAX_FRAME_BYTES
    assert store.frame(other_code, digest) is None  # never another room's
    for bad_code in ("", "ZZ-ZZ!", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"):
        with pytest.raises(RoomError) as exc:
            store.frame(bad_code, digest)
        assert _code(exc) == "room_unknown"
    with pytest.raises(RoomError) as exc:
        store.frame(code, "../x")
    assert _code(exc) == "room_state"


def test_a_frame_goes_with_its_room(store, clock):
    code, key = store.create()
    digest = state_digest("step", STATE)
    store.put_frame(code, key, digest, "{}")
    store.close(code, key)
    with pytest.raises(RoomError) as exc:
        store.frame(code, digest)
    assert _code(exc) == "room_unknown"
    code, key = store.create()
    store.put_frame(code, key, digest, "{}")
    clock.advance(3601)  # the teacher's last change an hour ago: the room expired
    with pytest.raises(RoomError) as exc:
        store.frame(code, digest)
    assert _code(exc) == "room_unknown"
    with pytest.raises(RoomError) as exc:
        store.put_frame(code, key, digest, "{}")
    assert _code(exc) == "room_unknown"
