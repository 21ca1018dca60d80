"""A follower's side of a live class's frames (:mod:`~specdec_core.ui.live.frames`):
read a room's frame once per process and published state (:func:`frame_for`: a bounded
cache keyed by room and :func:`~specdec_core.server.room_frames.state_digest`, so 60
followers of one replica cost one store read per teacher step), check it
(:func:`decode`: anything the store hands back is untrusted) and turn its JSON back into
the trace values the step page draws (:func:`dist_from_json`, :func:`kv_from_json`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from specdec_core.core.trace import DistSlice, KVRow, KVState, TokenInfo
from specdec_core.server.room_frames import MAX_FRAME_BYTES, state_digest
from specdec_core.server.room_types import RoomError, RoomView
from specdec_core.server.rooms import RoomStore

FRAME_VERSION = 1
CACHE_SIZE = 256  # frames kept per process (rooms × recent states)
_CACHE: OrderedDict[tuple[str, str], dict | None] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def untok(raw: Any) -> TokenInfo:
    """A token ``[id, text, piece]`` of a frame (``ValueError`` when malformed)."""
    if not (isinstance(raw, list) and len(raw) == 3 and isinstance(raw[0], int)):
        raise ValueError("token")
    return TokenInfo(int(raw[0]), str(raw[1]), str(raw[2]))


def dist_from_json(raw: dict) -> DistSlice:
    """The :class:`DistSlice` :func:`dist_json` wrote (``ValueError`` when malformed)."""
    ids = raw["ids"]
    n = len(ids)

    def arr(name: str) -> np.ndarray | None:
        values = raw[name]
        if values is None:
            return None
        if len(values) != n:
            raise ValueError(name)
        return np.asarray(values, dtype=np.float32)

    other = [float(v) for v in raw["other"]]
    return DistSlice(
        np.asarray(ids, dtype=np.int64),
        tuple(untok(x) for x in raw["tokens"]),
        arr("p"),
        arr("q"),
        arr("min"),
        arr("excess"),
        *other,
    )


def kv_from_json(raw: dict) -> KVState:
    rows = tuple(
        KVRow(int(a), int(b), str(c), str(d), bool(e), bool(f), bool(g), str(h))
        for a, b, c, d, e, f, g, h in raw["rows"]
    )
    committed, target, draft = (int(n) for n in raw["counts"])
    return KVState(committed, target, draft, rows)


def decode(text: str) -> dict | None:
    """A stored frame, checked (``None`` when it is not one this version draws)."""
    if len(text.encode("utf-8")) > MAX_FRAME_BYTES:
        return None
    try:
        frame = json.loads(text)
    except ValueError:
        return None
    if not isinstance(frame, dict) or frame.get("v") != FRAME_VERSION:
        return None
    if frame.get("shape") not in ("chain", "tree") or not isinstance(frame.get("strip"), list):
        return None
    return frame


def remember(key: tuple[str, str], frame: dict | None) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = frame
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def frame_for(store: RoomStore, code: str, page: str, state: dict[str, str]) -> dict | None:
    """The frame of room ``code``'s published ``(page, state)``: from this process's cache
    (one store read per process and state, whatever the number of followers), else the
    store; ``None`` when the store has none for that state (the teacher moved on since, or
    published none). Raises ``RoomError`` as the store does."""
    digest = state_digest(page, state)
    key = (code.upper(), digest)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    got = store.frame(code, digest)
    if got is None:
        return None  # not cached: the frame may still arrive
    frame = decode(got)
    remember(key, frame)
    return frame


def room_frame(store: RoomStore, view: RoomView) -> dict | None:
    """The teacher's frame of ``view``'s step state (read once per process and state), or
    ``None``: a Lessons state, no state yet, no frame for it (the follower replays), or
    the store did not answer."""
    if view.page != "step" or not view.state:
        return None
    try:
        return frame_for(store, view.code, view.page, dict(view.state))
    except RoomError:
        return None
