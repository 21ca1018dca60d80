"""The room store in one SQLite file (the default backend, :mod:`specdec_core.server.rooms`).

WAL mode (readers never wait for the writer), ``busy_timeout`` (writers of several
processes queue), ``synchronous=NORMAL`` (a commit is not an fsync; a power cut may lose
the last changes of a class, never corrupt the file). Every read-modify-write runs in one
``BEGIN IMMEDIATE`` transaction; within a process the writers also take one lock, so
threads queue on it instead of on SQLite's sleeping busy handler. Connections come from a
small pool (Streamlit runs each script run on a thread of its own, so a connection per
thread would be one per rerun); a connection is used by one thread at a time.

Tables: ``rooms`` (one row per room: the key's hash, version, page, state, the open
question as JSON, expiry), ``students`` (code, student) and ``answers`` (code, student,
choice: the open question's only). Rooms expire by their ``expires_at`` column: checked on
every read, deleted by :meth:`~specdec_core.server.rooms.RoomStore.purge` (which
``create`` runs first). Every statement takes its values as parameters.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from specdec_core.server.rooms import (
    Question,
    RoomError,
    RoomStore,
    RoomView,
    counts_of,
    key_matches,
    question_error,
    question_from_json,
    question_json,
    state_from_json,
)

BUSY_TIMEOUT_MS = 10_000
POOL_SIZE = 8  # idle connections kept

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rooms (
        code TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL,
        version INTEGER NOT NULL,
        page TEXT NOT NULL,
        state TEXT NOT NULL,
        question TEXT,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS rooms_expiry ON rooms (expires_at)",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL,
        student TEXT NOT NULL,
        choice INTEGER NOT NULL,
        PRIMARY KEY (code, student)
    ) WITHOUT ROWID""",
)


class SQLiteStore(RoomStore):
    """Rooms in the SQLite file ``path`` (made with its tables if missing). Several
    objects and processes may share one file. Other arguments: :class:`RoomStore`."""

    def __init__(
        self,
        path: str | Path,
        *,
        ttl_s: float | None = None,
        max_rooms: int | None = None,
        max_students: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(ttl_s=ttl_s, max_rooms=max_rooms, max_students=max_students, clock=clock)
        self.path = str(path)
        if self.path != ":memory:":  # a new file readable by this user only (rooms, ids)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self._idle: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._write_lock = threading.Lock()
        with self._write() as db:
            for statement in SCHEMA:
                db.execute(statement)

    # ------------------------------------------------------------ connections
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
    def _connection(self) -> Iterator[sqlite3.Connection]:
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
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed at the end, rolled back when
        anything (a :class:`RoomError` included) is raised."""
        with self._write_lock, self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot in WAL mode)."""
        with self._connection() as db:
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

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _room(db: sqlite3.Connection, code: str, now: float) -> tuple:
        """``(key_hash, version, question)`` of a live room, else ``room_unknown``."""
        row = db.execute(
            "SELECT key_hash, version, question, expires_at FROM rooms WHERE code = ?", (code,)
        ).fetchone()
        if row is None or row[3] <= now:
            raise RoomError("room_unknown")
        return row[:3]

    def _teacher(self, db: sqlite3.Connection, code: str, key_hash: str, now: float) -> tuple:
        """``(version, question)`` of a live room whose key hash matches, and its expiry
        pushed to ``now + ttl``; else ``room_unknown`` / ``room_key``."""
        stored, version, question = self._room(db, code, now)
        if not key_matches(key_hash, stored):
            raise RoomError("room_key")
        db.execute("UPDATE rooms SET expires_at = ? WHERE code = ?", (now + self.ttl_s, code))
        return version, question

    @staticmethod
    def _bump(db: sqlite3.Connection, code: str) -> int:
        db.execute("UPDATE rooms SET version = version + 1 WHERE code = ?", (code,))
        return db.execute("SELECT version FROM rooms WHERE code = ?", (code,)).fetchone()[0]

    @staticmethod
    def _delete(db: sqlite3.Connection, codes: list[str]) -> None:
        rows = [(c,) for c in codes]
        db.executemany("DELETE FROM answers WHERE code = ?", rows)
        db.executemany("DELETE FROM students WHERE code = ?", rows)
        db.executemany("DELETE FROM rooms WHERE code = ?", rows)

    # ------------------------------------------------------------ the backend
    def _create(self, code: str, key_hash: str, now: float, expires_at: float) -> bool:
        with self._write() as db:
            live = db.execute("SELECT COUNT(*) FROM rooms WHERE expires_at > ?", (now,))
            if live.fetchone()[0] >= self.max_rooms:
                raise RoomError("rooms_full", limit=self.max_rooms)
            taken = db.execute("SELECT 1 FROM rooms WHERE code = ?", (code,)).fetchone()
            if taken is not None:
                return False
            db.execute(
                "INSERT INTO rooms (code, key_hash, version, page, state, question, created_at,"
                " expires_at) VALUES (?, ?, 1, 'step', '{}', NULL, ?, ?)",
                (code, key_hash, now, expires_at),
            )
        return True

    def _version(self, code: str, now: float) -> int:
        with self._connection() as db:
            row = db.execute(
                "SELECT version, expires_at FROM rooms WHERE code = ?", (code,)
            ).fetchone()
        if row is None or row[1] <= now:
            raise RoomError("room_unknown")
        return row[0]

    def _view(self, code: str, now: float) -> RoomView:
        with self._read() as db:
            row = db.execute(
                "SELECT version, page, state, question, expires_at FROM rooms WHERE code = ?",
                (code,),
            ).fetchone()
            if row is None or row[4] <= now:
                raise RoomError("room_unknown")
            students = db.execute("SELECT COUNT(*) FROM students WHERE code = ?", (code,))
            students = students.fetchone()[0]
            choices = db.execute("SELECT choice FROM answers WHERE code = ?", (code,))
            choices = [c for (c,) in choices.fetchall()]
        question = question_from_json(row[3]) if row[3] else None
        counts = counts_of(choices, len(question.choices)) if question else ()
        return RoomView(
            code=code,
            version=row[0],
            page=row[1],
            state=state_from_json(row[2]),
            question=question,
            counts=counts,
            answered=sum(counts),
            students=students,
            expires_at=row[4],
        )

    def _publish(self, code: str, key_hash: str, page: str, state: str, now: float) -> int:
        with self._write() as db:
            version, _ = self._teacher(db, code, key_hash, now)
            same = db.execute(
                "SELECT 1 FROM rooms WHERE code = ? AND page = ? AND state = ?",
                (code, page, state),
            ).fetchone()
            if same is not None:
                return version
            db.execute("UPDATE rooms SET page = ?, state = ? WHERE code = ?", (page, state, code))
            return self._bump(db, code)

    def _join(self, code: str, student: str, now: float) -> None:
        with self._write() as db:
            self._room(db, code, now)
            known = db.execute(
                "SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
            if known is not None:
                return
            count = db.execute("SELECT COUNT(*) FROM students WHERE code = ?", (code,))
            if count.fetchone()[0] >= self.max_students:
                raise RoomError("room_full", limit=self.max_students)
            db.execute("INSERT INTO students (code, student) VALUES (?, ?)", (code, student))
            self._bump(db, code)

    def _ask(self, code: str, key_hash: str, question: Question, now: float) -> int:
        with self._write() as db:
            self._teacher(db, code, key_hash, now)
            db.execute("DELETE FROM answers WHERE code = ?", (code,))
            db.execute(
                "UPDATE rooms SET question = ? WHERE code = ?", (question_json(question), code)
            )
            return self._bump(db, code)

    def _answer(self, code: str, student: str, qid: str, choice: int, now: float) -> None:
        with self._write() as db:
            _, _, stored = self._room(db, code, now)
            joined = db.execute(
                "SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
            if joined is None:
                raise RoomError("room_student")
            question = question_from_json(stored) if stored else None
            if question is None or question.qid != qid or question.revealed:
                raise RoomError("room_answer")
            if choice >= len(question.choices):
                raise RoomError("room_answer")
            old = db.execute(
                "SELECT choice FROM answers WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
            if old is not None and old[0] == choice:
                return
            db.execute(
                "INSERT OR REPLACE INTO answers (code, student, choice) VALUES (?, ?, ?)",
                (code, student, choice),
            )
            self._bump(db, code)

    def _answer_of(self, code: str, student: str, qid: str, now: float) -> int | None:
        with self._read() as db:
            _, _, stored = self._room(db, code, now)
            joined = db.execute(
                "SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
            if joined is None:
                raise RoomError("room_student")
            row = db.execute(
                "SELECT choice FROM answers WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
        question = question_from_json(stored) if stored else None
        if question is None or question.qid != qid or row is None:
            return None
        return int(row[0])

    def _reveal(self, code: str, key_hash: str, qid: str, correct: int | None, now: float) -> int:
        with self._write() as db:
            version, stored = self._teacher(db, code, key_hash, now)
            question = question_from_json(stored) if stored else None
            if question is None or question.qid != qid:
                raise question_error()
            if correct is not None and correct >= len(question.choices):
                raise question_error()
            if question.revealed:
                if question.correct != correct:
                    raise question_error()
                return version
            shown = replace(question, correct=correct, revealed=True)
            db.execute("UPDATE rooms SET question = ? WHERE code = ?", (question_json(shown), code))
            return self._bump(db, code)

    def _close(self, code: str, key_hash: str, now: float) -> None:
        with self._write() as db:
            self._teacher(db, code, key_hash, now)
            self._delete(db, [code])

    def _purge(self, now: float) -> int:
        with self._write() as db:
            rows = db.execute("SELECT code FROM rooms WHERE expires_at <= ?", (now,))
            codes = [c for (c,) in rows.fetchall()]
            self._delete(db, codes)
        return len(codes)
