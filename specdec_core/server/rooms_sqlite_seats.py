"""The seats of the SQLite room store (:mod:`specdec_core.server.rooms_sqlite`): a join
(a new seat, or a seen seat's heartbeat), and many seats' heartbeats in one transaction
(the push hub's, ``RoomStore.heartbeats``), and the seats' holders (``holders``: one client
tag per seat; the rule: ``server/room_seats``). Mixed into ``SQLiteStore``, which supplies
``file``, ``_room``, ``_teacher``, ``_counting``, ``_bump``, ``max_students`` and
``seat_ttl_s``."""

from __future__ import annotations

import sqlite3

from specdec_core.server.room_types import RoomError

#: A seat counts while seen since the cutoff or while it answered. Parameters: code, cutoff.
_COUNTS = (
    "(s.seen > ? OR EXISTS (SELECT 1 FROM answers a WHERE a.code = s.code"
    " AND a.student = s.student))"
)
_COUNT_SEATS = "SELECT COUNT(*) FROM students s WHERE s.code = ? AND " + _COUNTS
_FREE_SEATS = "DELETE FROM students AS s WHERE s.code = ? AND NOT " + _COUNTS


class SQLiteSeats:
    def _join(self, code: str, student: str, now: float) -> None:
        with self.file.write() as db:
            self._room(db, code, now)
            self._join_in(db, code, student, now)

    def _heartbeats(self, code: str, students: list[str], now: float) -> dict[str, str]:
        refused = {}  # one transaction for the room's seats
        with self.file.write() as db:
            self._room(db, code, now)
            for student in students:
                try:
                    self._join_in(db, code, student, now)
                except RoomError as exc:
                    refused[student] = exc.code
        return refused

    def _hold(
        self, code: str, holders: dict[str, str], now: float, lease: float
    ) -> dict[str, float]:
        refused = {}
        with self.file.write() as db:
            self._room(db, code, now)
            for student, holder in holders.items():
                row = db.execute(
                    "SELECT holder, seen FROM holders WHERE code = ? AND student = ?",
                    (code, student),
                ).fetchone()
                if row is not None and row[0] != holder and now - row[1] < lease:
                    refused[student] = row[1] + lease - now
                    continue
                db.execute(
                    "INSERT OR REPLACE INTO holders (code, student, holder, seen)"
                    " VALUES (?, ?, ?, ?)",
                    (code, student, holder, now),
                )
        return refused

    def _release(self, code: str, key_hash: str, student: str, now: float) -> None:
        with self.file.write() as db:
            self._teacher(db, code, key_hash, now)
            db.execute("DELETE FROM holders WHERE code = ? AND student = ?", (code, student))

    def _join_in(self, db: sqlite3.Connection, code: str, student: str, now: float) -> None:
        args = (code, student)
        if db.execute("SELECT 1 FROM removed WHERE code = ? AND student = ?", args).fetchone():
            raise RoomError("room_removed")
        seen = db.execute(
            "UPDATE students SET seen = ? WHERE code = ? AND student = ?", (now, *args)
        )
        if seen.rowcount:  # the heartbeat of a seat already there: no version bump
            return
        total = db.execute("SELECT COUNT(*) FROM students WHERE code = ?", (code,))
        if total.fetchone()[0] >= self.max_students:
            # free the seats that stopped counting, then count again
            db.execute(_FREE_SEATS, (code, now - self.seat_ttl_s))
            if self._counting(db, code, now) >= self.max_students:
                raise RoomError("room_full", limit=self.max_students)
        db.execute("INSERT INTO students (code, student, seen) VALUES (?, ?, ?)", (*args, now))
        self._bump(db, code)
