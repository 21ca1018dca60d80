"""The rooms' SQLite file: its tables, made private (mode 0600), a connection pool and
transactions, shared by threads and processes.

WAL mode (readers never wait for the writer), ``busy_timeout`` (writers of several
processes queue), ``synchronous=NORMAL`` (a commit is not an fsync; a power cut may lose
the last changes of a class, never corrupt the file). Every read-modify-write runs in one
``BEGIN IMMEDIATE`` transaction (:meth:`SQLiteFile.write`); within a process the writers
also take one lock, so threads queue on it instead of on SQLite's sleeping busy handler.
Connections come from a small pool (Streamlit runs each script run on a thread of its own,
so a connection per thread would be one per rerun); a connection is used by one thread at a
time.

A deleted or replaced file is detected: each connection taken from the pool first
compares the path's inode with the one opened; on a change every pooled connection is
closed, the file is made again (private, with its tables) and that one call raises
``room_store_reset`` (the rooms of the old file are gone: the UI says so).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specdec_core.server.room_types import RoomError

BUSY_TIMEOUT_MS = 2_000  # a locked file: this, then the store's back-off, then room_store
POOL_SIZE = 8  # idle connections kept


#: Columns added since the first files were written: (table, column, the statement).
MIGRATIONS = (
    ("rooms", "client", "ALTER TABLE rooms ADD COLUMN client TEXT NOT NULL DEFAULT ''"),
    ("students", "seen", "ALTER TABLE students ADD COLUMN seen REAL NOT NULL DEFAULT 0"),
    ("rooms", "co_hash", "ALTER TABLE rooms ADD COLUMN co_hash TEXT NOT NULL DEFAULT ''"),
    ("rooms", "paused", "ALTER TABLE rooms ADD COLUMN paused INTEGER NOT NULL DEFAULT 0"),
    ("rooms", "held_page", "ALTER TABLE rooms ADD COLUMN held_page TEXT NOT NULL DEFAULT ''"),
    ("rooms", "held_state", "ALTER TABLE rooms ADD COLUMN held_state TEXT NOT NULL DEFAULT ''"),
    ("rooms", "moment", "ALTER TABLE rooms ADD COLUMN moment INTEGER NOT NULL DEFAULT 0"),
    ("rooms", "held_question", "ALTER TABLE rooms ADD COLUMN held_question TEXT"),
    ("rooms", "paused_at", "ALTER TABLE rooms ADD COLUMN paused_at REAL"),
)
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rooms (
        code TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL,
        version INTEGER NOT NULL,
        page TEXT NOT NULL,
        state TEXT NOT NULL,
        question TEXT,
        client TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS rooms_expiry ON rooms (expires_at)",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        seen REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS holders (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        holder TEXT NOT NULL,
        seen REAL NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS removed (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS creations (client TEXT NOT NULL, at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS creations_client ON creations (client, at)",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        choice INTEGER NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS frames (
        code TEXT NOT NULL,
        digest TEXT NOT NULL,
        frame TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (code, digest)
    ) WITHOUT ROWID""",
    # peer instruction: the first vote at a revote, each question's result, ended rooms
    """CREATE TABLE IF NOT EXISTS first_answers (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        choice INTEGER NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS results (
        code TEXT NOT NULL,
        seq INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (code, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS ended (
        code TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL,
        co_hash TEXT NOT NULL,
        expires_at REAL NOT NULL
    )""",
)


class SQLiteFile:
    """The SQLite file ``path`` (``":memory:"`` for one connection's worth), made with its
    tables if missing; :meth:`read` / :meth:`write` give one transaction each."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._idle: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._inode: tuple[int, int] | None = None
        self._make_file()

    def _make_file(self) -> None:
        """Open (or make, readable by this user only, with its missing folders) the file
        and its tables; remember its inode."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                st = os.fstat(fd)
                if st.st_uid == os.getuid() and st.st_mode & 0o077:
                    os.fchmod(fd, 0o600)  # a file put there readable by others: made private
            finally:
                os.close(fd)
            self._inode = (st.st_dev, st.st_ino)
        with self.write(check=False) as db:
            for statement in SCHEMA:
                db.execute(statement)
            for table, column, statement in MIGRATIONS:
                have = db.execute("SELECT name FROM pragma_table_info(?)", (table,))
                if column not in {name for (name,) in have}:
                    db.execute(statement)

    def _check_file(self) -> None:
        """Raise ``room_store_reset`` (once) when the file at the path is not the one
        opened (deleted, replaced), after making it again."""
        if self._inode is None:
            return
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._inode
        except FileNotFoundError:
            same = False
        if same:
            return
        with self._write_lock:
            self.close_connections()
            self._inode = None
        self._make_file()
        raise RoomError("room_store_reset")

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,  # sqlite3_busy_timeout
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # pooled; one thread at a time
        )
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    @contextmanager
    def connection(self, check: bool = True) -> Iterator[sqlite3.Connection]:
        if check:
            self._check_file()
        with self._pool_lock:
            db = self._idle.pop() if self._idle else None
        if db is None:
            db = self._open()
        try:
            yield db
        finally:
            if db.in_transaction:  # pragma: no cover - an error inside a statement
                db.rollback()
            with self._pool_lock:
                keep = len(self._idle) < POOL_SIZE
                if keep:
                    self._idle.append(db)
            if not keep:
                db.close()

    @contextmanager
    def write(self, check: bool = True) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed at the end, rolled back when
        anything (a :class:`RoomError` included) is raised."""
        if check:
            self._check_file()
        with self._write_lock, self.connection(check=False) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:  # SQLITE_FULL (disk full) has rolled back already
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot in WAL mode)."""
        with self.connection() as db:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    def close_connections(self) -> None:
        """Close the idle pooled connections (tests, shutdown)."""
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()
