"""Seats held many at a time and one holder at a time: the part of the store interface
(:class:`~specdec_core.server.rooms.RoomStore` mixes it in, which supplies ``_do``,
``clock`` and ``max_students``) for the push hub's batched heartbeats
(``server/live_push_seats``) and the seat's holder.

A seat's holder. The seat id comes from the browser's secret (``ui/live/identity``), so a
leaked cookie would act as the seat from anywhere. A seat is therefore held by one client
(address) at a time: :meth:`SeatBatch.hold` gives it to a client when nobody holds it,
when that client already holds it (a reload, a second tab: one browser, one address) or
when its holder was not seen for :func:`lease_s` seconds (the screen that held it closed,
or its address changed behind the school's NAT: that student waits at most the lease, or
the teacher :meth:`~SeatBatch.release`\\ s the seat at once). Classmates behind one NAT
share an address: between them the seat id on screen and the teacher's Remove are the
bound. The store keeps the client's :func:`~specdec_core.server.room_types.client_tag`,
never the address. The backends batch both (one SQLite transaction, one Redis pipeline
or script).
"""

from __future__ import annotations

import math
import os
from abc import abstractmethod
from collections.abc import Mapping

from specdec_core.server.room_types import check_student, client_tag, hash_key, normalize_code

LEASE_ENV = "SPECDEC_SEAT_LEASE_S"
DEFAULT_LEASE_S = 45.0  # > two heartbeats (20 s) of the holder's screen or push hub


def lease_s() -> float:
    """Seconds a holder keeps its seat after it was last seen (``SPECDEC_SEAT_LEASE_S``,
    5..3600, default 45)."""
    try:
        value = float(os.environ.get(LEASE_ENV, DEFAULT_LEASE_S))
    except ValueError:
        return DEFAULT_LEASE_S
    return min(3600.0, max(5.0, value)) if math.isfinite(value) else DEFAULT_LEASE_S


class SeatBatch:
    def heartbeats(self, code: str, students: list[str]) -> dict[str, str]:
        """``join`` for each of ``students`` (at most ``max_students``) at once. Returns the
        refused ones: student → error code (``room_removed``, ``room_full``). Raises
        ``room_unknown``, ``room_student`` (a malformed id)."""
        code = normalize_code(code)
        given = [check_student(s) for s in students[: self.max_students]]
        return self._do(self._heartbeats, code, given, self.clock())

    def hold(self, code: str, holders: Mapping[str, str]) -> dict[str, float]:
        """Each seat of ``holders`` (student → the client that claims it; at most
        ``max_students``) taken or kept by that client when free, its own, or its holder
        unseen for :func:`lease_s` s. Returns the refused ones: student → seconds until the
        other holder's lease ends (> 0). Raises ``room_unknown``, ``room_student``."""
        code = normalize_code(code)
        given = {
            check_student(s): client_tag(c) or "-"
            for s, c in list(holders.items())[: self.max_students]
        }
        now = self.clock()
        return self._do(self._hold, code, given, now, lease_s())

    def release(self, code: str, key: str, student: str) -> None:
        """The teacher (or co-teacher) frees ``student``'s seat from its holder: the next
        client to claim it holds it. Raises ``room_key``, ``room_unknown``."""
        code, key_hash = normalize_code(code), hash_key(key)
        now = self.clock()
        self._do(self._release, code, key_hash, check_student(student), now)

    @abstractmethod
    def _heartbeats(self, code: str, students: list[str], now: float) -> dict[str, str]: ...

    @abstractmethod
    def _hold(
        self, code: str, holders: dict[str, str], now: float, lease: float
    ) -> dict[str, float]: ...

    @abstractmethod
    def _release(self, code: str, key_hash: str, student: str, now: float) -> None: ...
