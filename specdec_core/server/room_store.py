"""The process's one room store: :func:`make_store` picks the backend from the
environment — Redis at ``SPECDEC_REDIS_URL`` when it is set (replicas on several machines),
else SQLite at :func:`default_db_path` in a private folder (every replica on one machine).
The interface and its validation are :mod:`specdec_core.server.rooms`; the backends
subclass it, so this module (not ``rooms``) is the one that imports them.
"""

from __future__ import annotations

import os
import threading

from specdec_core.server.rooms import RoomStore
from specdec_core.server.rooms_sqlite import SQLiteStore

STATE_DIR_ENV = "XDG_STATE_HOME"
DB_ENV = "SPECDEC_ROOM_DB"
REDIS_ENV = "SPECDEC_REDIS_URL"

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


def default_db_path() -> str:
    """``SPECDEC_ROOM_DB``, else ``rooms.sqlite3`` in :func:`private_dir`."""
    return os.environ.get(DB_ENV) or os.path.join(private_dir(), "rooms.sqlite3")


def private_dir() -> str:
    """``$XDG_STATE_HOME/specdec`` (else ``~/.local/state/specdec``), made with mode 0700
    and set to 0700 when this user owns it (room codes and seats are nobody else's).
    Raises ``OSError`` when it cannot be made."""
    base = os.environ.get(STATE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".local", "state")
    path = os.path.join(base, "specdec")
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_uid == os.getuid():
        os.chmod(path, 0o700)
    return path
