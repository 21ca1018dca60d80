"""The SQLite backend's frames (:mod:`~specdec_core.server.room_frames`): table ``frames``
(code, the state's digest, the frame, when it was stored), the room's
:data:`~specdec_core.server.room_frames.KEPT_FRAMES` newest kept. Mixed into
:class:`~specdec_core.server.rooms_sqlite.SQLiteStore`, whose ``file``, ``_teacher`` and
``_room`` it uses; every statement takes its values as parameters."""

from __future__ import annotations

from specdec_core.server.room_frames import KEPT_FRAMES

#: A room keeps its newest frames only. Parameters: code, code, how many.
_OLD_FRAMES = (
    "DELETE FROM frames WHERE code = ? AND digest NOT IN (SELECT digest FROM frames"
    " WHERE code = ? ORDER BY at DESC LIMIT ?)"
)


class SQLiteFrames:
    """``_put_frame`` / ``_frame`` of the SQLite store."""

    def _put_frame(self, code: str, key_hash: str, digest: str, frame: str, now: float) -> None:
        with self.file.write() as db:  # type: ignore[attr-defined]
            self._teacher(db, code, key_hash, now)  # type: ignore[attr-defined]
            row = (code, digest, frame, now)
            db.execute("INSERT OR REPLACE INTO frames VALUES (?, ?, ?, ?)", row)
            db.execute(_OLD_FRAMES, (code, code, KEPT_FRAMES))

    def _frame(self, code: str, digest: str, now: float) -> str | None:
        with self.file.read() as db:  # type: ignore[attr-defined]
            self._room(db, code, now)  # type: ignore[attr-defined]
            row = db.execute(
                "SELECT frame FROM frames WHERE code = ? AND digest = ?", (code, digest)
            ).fetchone()
        return None if row is None else row[0]
