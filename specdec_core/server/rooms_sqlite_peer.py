"""Peer instruction in the SQLite room store (:mod:`~specdec_core.server.rooms_peer` says
what; :class:`~specdec_core.server.rooms_sqlite.SQLiteStore` inherits this).

Columns and tables (:mod:`~specdec_core.server.rooms_sqlite_file`): ``rooms.co_hash`` (the
co-teacher key's SHA-256, ``''`` for none), ``rooms.paused`` with ``held_page``,
``held_state``, ``held_question`` and ``paused_at`` (the moment and the question followers
hold), ``first_answers`` (each seat's first vote at a revote), ``results`` (one entry per
question asked, in order), ``ended`` (an ended room's key hashes and expiry, so its
results stay readable). Every statement takes its values as parameters.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from specdec_core.server.room_results import (
    MAX_RESULTS,
    QuestionResult,
    entry_json,
    result_of,
    vote_error,
)
from specdec_core.server.room_types import RoomError, key_matches, question_from_json, question_json


class SQLitePeer:
    """The peer-instruction backend methods; uses the store's ``file``, ``_teacher``,
    ``_room`` and ``_bump``."""

    def _open_question(self, db: sqlite3.Connection, code: str, key_hash: str, qid: str, now):
        """``(version, question)``: the teacher's open (unrevealed) question ``qid``."""
        version, stored = self._teacher(db, code, key_hash, now)
        question = question_from_json(stored) if stored else None
        if question is None or question.qid != qid or question.revealed:
            raise vote_error()
        return version, question

    def _set_question(self, db: sqlite3.Connection, code: str, question) -> int:
        db.execute("UPDATE rooms SET question = ? WHERE code = ?", (question_json(question), code))
        return self._bump(db, code)

    def _close_vote(self, code: str, key_hash: str, qid: str, now: float) -> int:
        with self.file.write() as db:
            version, question = self._open_question(db, code, key_hash, qid, now)
            if question.closes_at is not None and question.closes_at <= now:
                return version
            return self._set_question(db, code, replace(question, closes_at=now, closed=True))

    def _revote(
        self, code: str, key_hash: str, qid: str, closes_at: float | None, now: float
    ) -> int:
        with self.file.write() as db:
            _, question = self._open_question(db, code, key_hash, qid, now)
            if question.vote != 1:
                raise vote_error()
            db.execute("DELETE FROM first_answers WHERE code = ?", (code,))
            db.execute(
                "INSERT INTO first_answers (code, student, choice)"
                " SELECT code, student, choice FROM answers WHERE code = ?",
                (code,),
            )
            db.execute("DELETE FROM answers WHERE code = ?", (code,))
            return self._set_question(
                db, code, replace(question, vote=2, closes_at=closes_at, closed=False)
            )

    def _pause(self, code: str, key_hash: str, paused: bool, now: float) -> int:
        with self.file.write() as db:
            version, _ = self._teacher(db, code, key_hash, now)
            row = db.execute(
                "SELECT paused, question, paused_at FROM rooms WHERE code = ?", (code,)
            ).fetchone()
            if bool(row[0]) == paused:
                return version
            question = question_from_json(row[1]) if row[1] and not paused else None
            if question is not None and (question.closes_at or 0) > (row[2] or now):
                # the resume: the countdown goes on with the time it had left at the pause
                closes_at = question.closes_at + now - row[2]
                db.execute(
                    "UPDATE rooms SET question = ? WHERE code = ?",
                    (question_json(replace(question, closes_at=closes_at)), code),
                )
            db.execute(  # the moment and its question, held in the room's row
                "UPDATE rooms SET paused = ?1, held_page = CASE WHEN ?1 THEN page ELSE '' END,"
                " held_state = CASE WHEN ?1 THEN state ELSE '' END, held_question = CASE WHEN"
                " ?1 THEN question END, paused_at = CASE WHEN ?1 THEN ?2 END WHERE code = ?3",
                (int(paused), now, code),
            )
            return self._bump(db, code)

    def _co_key(self, code: str, key_hash: str, co_hash: str, now: float) -> None:
        with self.file.write() as db:
            self._teacher(db, code, key_hash, now, only_teacher=True)
            db.execute("UPDATE rooms SET co_hash = ? WHERE code = ?", (co_hash, code))

    def _role(self, code: str, key_hash: str, now: float) -> str:
        with self.file.read() as db:
            return self._key_role(db, code, key_hash, now)

    def _key_role(self, db: sqlite3.Connection, code: str, key_hash: str, now: float) -> str:
        """``"teacher"`` / ``"co"``: whose key hash ``key_hash`` is; else ``room_key``."""
        stored, _, _ = self._room(db, code, now)
        co = db.execute("SELECT co_hash FROM rooms WHERE code = ?", (code,)).fetchone()[0]
        teacher, co_teacher = key_matches(key_hash, stored), key_matches(key_hash, co or None)
        if not teacher | co_teacher:
            raise RoomError("room_key")
        return "teacher" if teacher else "co"

    def _results(self, code: str, key_hash: str, now: float) -> list[QuestionResult]:
        with self.file.read() as db:
            row = db.execute(
                "SELECT key_hash, co_hash FROM rooms WHERE code = ? AND expires_at > ?",
                (code, now),
            ).fetchone()
            live = row is not None
            if not live:
                row = db.execute(
                    "SELECT key_hash, co_hash FROM ended WHERE code = ? AND expires_at > ?",
                    (code, now),
                ).fetchone()
            if row is None:
                raise RoomError("room_unknown")
            if not key_matches(key_hash, row[0]) | key_matches(key_hash, row[1] or None):
                raise RoomError("room_key")
            entries = [e for (e,) in db.execute(_ENTRIES, (code,)).fetchall()]
            current = self._entry(db, code) if live else None
        entries += [current] if current is not None else []
        return [result_of(e) for e in entries[-MAX_RESULTS:]]

    def _ended(self, code: str, now: float) -> bool:
        with self.file.read() as db:
            row = db.execute(
                "SELECT 1 FROM ended WHERE code = ? AND expires_at > ?", (code, now)
            ).fetchone()
        return row is not None

    @staticmethod
    def _entry(db: sqlite3.Connection, code: str) -> str | None:
        """The result entry of the room's question as it stands (``None``: no question)."""
        stored = db.execute("SELECT question FROM rooms WHERE code = ?", (code,)).fetchone()
        if stored is None or not stored[0]:
            return None
        answers = db.execute("SELECT choice FROM answers WHERE code = ?", (code,)).fetchall()
        first = db.execute("SELECT choice FROM first_answers WHERE code = ?", (code,))
        question = question_from_json(stored[0])
        return entry_json(question, [c for (c,) in answers], [c for (c,) in first.fetchall()])

    def _archive(self, db: sqlite3.Connection, code: str) -> None:
        """Keep the room's question's result (a new question replaces it, or the class
        ends); at most :data:`MAX_RESULTS` per room, the oldest dropped."""
        entry = self._entry(db, code)
        if entry is None:
            return
        last = db.execute("SELECT MAX(seq) FROM results WHERE code = ?", (code,)).fetchone()[0]
        seq = 0 if last is None else last + 1
        db.execute("INSERT INTO results (code, seq, entry) VALUES (?, ?, ?)", (code, seq, entry))
        db.execute("DELETE FROM results WHERE code = ? AND seq <= ?", (code, seq - MAX_RESULTS))

    def _end(self, db: sqlite3.Connection, code: str) -> None:
        """The class ends: its last question's result is kept, and its key hashes with the
        room's expiry, so the results stay readable until then."""
        self._archive(db, code)
        db.execute(
            "INSERT OR REPLACE INTO ended (code, key_hash, co_hash, expires_at)"
            " SELECT code, key_hash, co_hash, expires_at FROM rooms WHERE code = ?",
            (code,),
        )

    @staticmethod
    def _forget(db: sqlite3.Connection, codes: list[str]) -> None:
        """Drop the results of ``codes`` (expired, or a code drawn again)."""
        rows = [(c,) for c in codes]
        db.executemany("DELETE FROM results WHERE code = ?", rows)
        db.executemany("DELETE FROM ended WHERE code = ?", rows)


_ENTRIES = "SELECT entry FROM results WHERE code = ? ORDER BY seq"
