"""The process's one room store: :func:`make_store` picks the backend from the
environment — Redis at ``SPECDEC_REDIS_URL`` when it is set (replicas on several machines),
else SQLite at :func:`specdec_core.server.rooms.default_db_path` (every replica on one
machine). The interface, types and validation are :mod:`specdec_core.server.rooms`; the
backends subclass it, so this module (not ``rooms``) is the one that imports them.
"""

from __future__ import annotations

import os
import threading

from specdec_core.server.rooms import REDIS_ENV, RoomStore, default_db_path
from specdec_core.server.rooms_sqlite import SQLiteStore

_store: RoomStore | None = None
_store_lock = threading.Lock()


def make_store() -> RoomStore:
    """The process's room store, made on the first call: a
    :class:`~specdec_core.server.rooms_redis.RedisStore` at ``SPECDEC_REDIS_URL`` when it
    is set (redis-py is imported only then), else a :class:`SQLiteStore` at
    :func:`default_db_path`. Every later call returns the same object.

    Raises:
        RoomError / OSError: as the backend's constructor (a bad URL, an unwritable file).
    """
    global _store
    with _store_lock:
        if _store is None:
            url = os.environ.get(REDIS_ENV, "").strip()
            if url:
                from specdec_core.server.rooms_redis import RedisStore

                _store = RedisStore(url)
            else:
                _store = SQLiteStore(default_db_path())
        return _store
