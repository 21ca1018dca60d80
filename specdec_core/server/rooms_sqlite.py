"""The room store in one SQLite file (the default backend, :mod:`specdec_core.server.rooms`;
the file, its tables, pool and transactions: :mod:`specdec_core.server.rooms_sqlite_file`).

Tables: ``rooms`` (key hash, version, page, state, open question as JSON, maker's client
tag, expiry), ``students`` (code, student, last heartbeat ``seen``), ``answers`` (the open
question's), ``frames`` (:mod:`~specdec_core.server.room_frames`), ``removed`` (seats the
teacher removed), ``creations`` (the hourly bound); peer instruction's:
:mod:`~specdec_core.server.rooms_sqlite_peer`. A room expires by ``expires_at`` (checked on
every read, deleted by ``purge``, which ``create`` runs first). Every statement takes its
values as parameters.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from specdec_core.server.room_types import (
    Question,
    RoomError,
    RoomView,
    SeatInfo,
    counts_of,
    key_matches,
    question_error,
    question_from_json,
    question_json,
    state_from_json,
)
from specdec_core.server.rooms import RoomStore
from specdec_core.server.rooms_sqlite_file import SQLiteFile
from specdec_core.server.rooms_sqlite_frames import SQLiteFrames
from specdec_core.server.rooms_sqlite_peer import SQLitePeer
from specdec_core.server.rooms_sqlite_seats import _COUNT_SEATS, SQLiteSeats


class SQLiteStore(SQLitePeer, SQLiteFrames, SQLiteSeats, RoomStore):
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
        **bounds: float,
    ) -> None:
        super().__init__(
            ttl_s=ttl_s, max_rooms=max_rooms, max_students=max_students, clock=clock, **bounds
        )
        self.file = SQLiteFile(path)
        self.path = self.file.path

    faults = (sqlite3.OperationalError, sqlite3.DatabaseError, OSError)

    def close_connections(self) -> None:
        """Close the idle pooled connections (tests, shutdown)."""
        self.file.close_connections()

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

    def _teacher(
        self, db: sqlite3.Connection, code: str, key_hash: str, now: float, only_teacher=False
    ) -> tuple:
        """``(version, question)`` of a live room whose key hash matches (the teacher's or,
        unless ``only_teacher``, the co-teacher's), and its expiry pushed to ``now + ttl``;
        else ``room_unknown`` / ``room_key`` / ``room_co_teacher``."""
        stored, version, question = self._room(db, code, now)
        co = db.execute("SELECT co_hash FROM rooms WHERE code = ?", (code,)).fetchone()[0]
        co_teacher = key_matches(key_hash, co or None)
        if only_teacher and co_teacher:
            raise RoomError("room_co_teacher")
        if not key_matches(key_hash, stored) | (co_teacher and not only_teacher):
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
        db.executemany("DELETE FROM first_answers WHERE code = ?", rows)
        db.executemany("DELETE FROM students WHERE code = ?", rows)
        db.executemany("DELETE FROM removed WHERE code = ?", rows)
        db.executemany("DELETE FROM holders WHERE code = ?", rows)
        db.executemany("DELETE FROM frames WHERE code = ?", rows)
        db.executemany("DELETE FROM rooms WHERE code = ?", rows)

    def _counting(self, db: sqlite3.Connection, code: str, now: float) -> int:
        """The room's seats that count at ``now``."""
        return db.execute(_COUNT_SEATS, (code, now - self.seat_ttl_s)).fetchone()[0]

    # ------------------------------------------------------------ the backend
    def _create(
        self,
        code: str,
        key_hash: str,
        client: str,
        now: float,
        expires_at: float,
        limits: tuple[int, int, int] | None,
    ) -> bool:
        with self.file.write() as db:
            db.execute("DELETE FROM creations WHERE at <= ?", (now - 3600.0,))
            if limits is not None:
                one = lambda sql, *args: db.execute(sql, args).fetchone()[0]  # noqa: E731
                mine = "SELECT COUNT(*) FROM rooms WHERE client = ? AND expires_at > ?"
                mine = one(mine, client, now)
                made = one("SELECT COUNT(*) FROM creations WHERE client = ?", client)
                live = one("SELECT COUNT(*) FROM rooms WHERE expires_at > ?", now)
                self._limit(mine, made, live, limits)
            taken = db.execute("SELECT 1 FROM rooms WHERE code = ?", (code,)).fetchone()
            if taken is not None:
                return False
            self._forget(db, [code])  # an ended room's results under a code drawn again
            db.execute(
                "INSERT INTO rooms (code, key_hash, version, page, state, question, client,"
                " created_at, expires_at) VALUES (?, ?, 1, 'step', '{}', NULL, ?, ?, ?)",
                (code, key_hash, client, now, expires_at),
            )
            db.execute("INSERT INTO creations (client, at) VALUES (?, ?)", (client, now))
        return True

    def _version(self, code: str, now: float) -> int:
        with self.file.connection() as db:
            row = db.execute(
                "SELECT version, expires_at FROM rooms WHERE code = ?", (code,)
            ).fetchone()
        if row is None or row[1] <= now:
            raise RoomError("room_unknown")
        return row[0]

    def _view(self, code: str, now: float) -> RoomView:
        with self.file.read() as db:
            row = db.execute(
                "SELECT version, page, state, question, expires_at, paused, held_page, held_state,"
                " moment, held_question, paused_at FROM rooms WHERE code = ?",
                (code,),
            ).fetchone()
            if row is None or row[4] <= now:
                raise RoomError("room_unknown")
            students = self._counting(db, code, now)
            choices = db.execute("SELECT choice FROM answers WHERE code = ?", (code,))
            choices = [c for (c,) in choices.fetchall()]
            first = db.execute("SELECT choice FROM first_answers WHERE code = ?", (code,))
            first = [c for (c,) in first.fetchall()]
        question = question_from_json(row[3]) if row[3] else None
        counts = counts_of(choices, len(question.choices)) if question else ()
        at_revote = question is not None and question.vote == 2
        paused = bool(row[5])
        return RoomView(
            code=code,
            version=row[0],
            page=row[6] if paused else row[1],
            state=state_from_json(row[7] if paused else row[2]),
            question=question,
            counts=counts,
            answered=sum(counts),
            students=students,
            expires_at=row[4],
            first=counts_of(first, len(question.choices)) if at_revote else (),
            paused=paused,
            moment=row[8],
            held=question_from_json(row[9]) if paused and row[9] else None,
            paused_at=row[10] if paused else None,
        )

    def _seats(self, code: str, key_hash: str, now: float) -> list[SeatInfo]:
        with self.file.read() as db:
            self._key_role(db, code, key_hash, now)  # the teacher's or the co-teacher's key
            rows = db.execute(
                "SELECT s.student, s.seen, EXISTS (SELECT 1 FROM answers a WHERE a.code ="
                " s.code AND a.student = s.student) FROM students s WHERE s.code = ?"
                " ORDER BY s.seen DESC",
                (code,),
            ).fetchall()
        cutoff = now - self.seat_ttl_s
        return [SeatInfo(s, seen, bool(a), seen > cutoff or bool(a)) for s, seen, a in rows]

    def _remove(self, code: str, key_hash: str, student: str, now: float) -> int:
        with self.file.write() as db:
            self._teacher(db, code, key_hash, now)
            gone = db.execute(
                "DELETE FROM students WHERE code = ? AND student = ?", (code, student)
            ).rowcount
            if not gone:
                raise RoomError("room_student")
            db.execute("DELETE FROM answers WHERE code = ? AND student = ?", (code, student))
            db.execute("DELETE FROM first_answers WHERE code = ? AND student = ?", (code, student))
            db.execute("INSERT OR IGNORE INTO removed VALUES (?, ?)", (code, student))
            return self._bump(db, code)

    def _publish(
        self, code: str, key_hash: str, page: str, state: str, now: float, base: int | None
    ) -> int:
        with self.file.write() as db:
            version, _ = self._teacher(db, code, key_hash, now)
            row = db.execute("SELECT page, state, moment FROM rooms WHERE code = ?", (code,))
            stored_page, stored_state, moment = row.fetchone()
            if (stored_page, stored_state) == (page, state):
                return version
            if base is not None and moment > base:  # another driver published after base
                raise RoomError("room_moved")
            db.execute("UPDATE rooms SET page = ?, state = ? WHERE code = ?", (page, state, code))
            version = self._bump(db, code)
            db.execute("UPDATE rooms SET moment = version WHERE code = ?", (code,))
            return version

    def _ask(self, code: str, key_hash: str, question: Question, now: float) -> int:
        with self.file.write() as db:
            self._teacher(db, code, key_hash, now)
            self._archive(db, code)  # the replaced question's result is kept
            db.execute("DELETE FROM answers WHERE code = ?", (code,))
            db.execute("DELETE FROM first_answers WHERE code = ?", (code,))
            db.execute(
                "UPDATE rooms SET question = ? WHERE code = ?", (question_json(question), code)
            )
            return self._bump(db, code)

    def _answer(self, code: str, student: str, qid: str, choice: int, now: float) -> None:
        with self.file.write() as db:
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
            if question.closes_at is not None and question.closes_at <= now:
                raise RoomError("room_closed" if question.closed else "room_time_up")
            old = db.execute(
                "SELECT choice FROM answers WHERE code = ? AND student = ?", (code, student)
            ).fetchone()
            if old is not None and old[0] == choice:
                return
            db.execute(
                "INSERT OR REPLACE INTO answers (code, student, choice) VALUES (?, ?, ?)",
                (code, student, choice),
            )
            db.execute(  # an answer is a heartbeat too
                "UPDATE students SET seen = ? WHERE code = ? AND student = ?", (now, code, student)
            )
            self._bump(db, code)

    def _answer_of(self, code: str, student: str, qid: str, now: float) -> int | None:
        with self.file.read() as db:
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
        with self.file.write() as db:
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
        with self.file.write() as db:
            self._teacher(db, code, key_hash, now, only_teacher=True)
            self._end(db, code)
            self._delete(db, [code])

    def _purge(self, now: float) -> int:
        with self.file.write() as db:
            db.execute("DELETE FROM creations WHERE at <= ?", (now - 3600.0,))
            rows = db.execute("SELECT code FROM rooms WHERE expires_at <= ?", (now,))
            codes = [c for (c,) in rows.fetchall()]
            self._delete(db, codes)
            ended = db.execute("SELECT code FROM ended WHERE expires_at <= ?", (now,))
            self._forget(db, codes + [c for (c,) in ended.fetchall()])
        return len(codes)
