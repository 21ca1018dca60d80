"""Many seats' heartbeats in one store call: the push hub's (``server/live_push_seats``)
for the follower screens it holds. The part of the store interface that does it
(:class:`~specdec_core.server.rooms.RoomStore` mixes it in, which supplies ``_do``,
``clock`` and ``max_students``); the backends batch it (one SQLite transaction, one Redis
pipeline)."""

from __future__ import annotations

from abc import abstractmethod

from specdec_core.server.room_types import check_student, normalize_code


class SeatBatch:
    def heartbeats(self, code: str, students: list[str]) -> dict[str, str]:
        """``join`` for each of ``students`` (at most ``max_students``) at once. Returns the
        refused ones: student → error code (``room_removed``, ``room_full``). Raises
        ``room_unknown``, ``room_student`` (a malformed id)."""
        code = normalize_code(code)
        given = [check_student(s) for s in students[: self.max_students]]  # type: ignore[attr-defined]
        return self._do(self._heartbeats, code, given, self.clock())  # type: ignore[attr-defined]

    @abstractmethod
    def _heartbeats(self, code: str, students: list[str], now: float) -> dict[str, str]: ...
