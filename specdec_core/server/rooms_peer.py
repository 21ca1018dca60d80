"""Peer instruction in the room store (:class:`~specdec_core.server.rooms.RoomStore` inherits
it): a countdown per vote, closing a vote early, the revote after a discussion, pausing the
class, the co-teacher's key and the class's results.

Vote → discuss → revote (Mazur 1997): :meth:`~PeerInstruction.revote` keeps every seat's
first answer apart and opens the question again; the view then counts the revote and
carries the first vote's counts (``RoomView.first``). A countdown (``duration_s``, 5..600 s,
of :meth:`~specdec_core.server.rooms.RoomStore.ask` or :meth:`~PeerInstruction.revote`)
sets the question's ``closes_at``; an answer at or after it is refused (``room_time_up``).

Pause: while paused, every follower reads the moment the class was paused at; the
teacher's publishes go on underneath and show at the resume.

Co-teacher: :meth:`~PeerInstruction.co_teacher_key` (the teacher's key only) makes a second
secret key, kept as its SHA-256 like the teacher's and compared in constant time; it
drives the class (publish, ask, reveal, revote, pause, the seats, the results) but cannot
end it or make co-teacher keys. A new co-teacher key replaces the old one.

Results: one entry per question (:mod:`~specdec_core.server.room_results`), written when
a question is replaced and when the class ends; readable with either key until the room's
expiry, after the end too (the store's expiry, SQLite and Redis alike).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from specdec_core.server.room_results import QuestionResult, countdown, vote_error
from specdec_core.server.room_types import _QID, RoomError, hash_key, new_key, normalize_code

ROLES = ("teacher", "co")


class PeerInstruction(ABC):
    """The peer-instruction methods of a room store (validation here; storage in the
    backend's ``_`` methods). Uses the store's ``clock`` and ``_do``."""

    clock: Callable[[], float]
    _do: Callable[..., object]

    def close_vote(self, code: str, key: str, qid: str) -> int:
        """Close the open vote of ``qid`` now (the countdown ends early; closing a closed
        vote changes nothing). Returns the version. Raises ``room_key``, ``room_vote``
        (not the open question, or revealed)."""
        code, key_hash, qid = normalize_code(code), hash_key(key), _qid(qid)
        return self._do(self._close_vote, code, key_hash, qid, self.clock())

    def revote(self, code: str, key: str, qid: str, duration_s: int | None = None) -> int:
        """Open ``qid`` for its second vote: each seat's first answer is kept apart, the
        answers start again, with a countdown of ``duration_s`` seconds or none. Only once
        per question, before its reveal. Returns the version. Raises ``room_key``,
        ``room_vote``."""
        code, key_hash, qid = normalize_code(code), hash_key(key), _qid(qid)
        seconds = countdown(duration_s)
        now = self.clock()
        closes = None if seconds is None else now + seconds
        return self._do(self._revote, code, key_hash, qid, closes, now)

    def pause(self, code: str, key: str, paused: bool) -> int:
        """Pause (``True``) or resume the class: while paused, followers hold the moment
        it was paused at. Returns the version (the same when nothing changed). Raises
        ``room_key``."""
        code, key_hash = normalize_code(code), hash_key(key)
        return self._do(self._pause, code, key_hash, bool(paused), self.clock())

    def co_teacher_key(self, code: str, key: str) -> str:
        """A new co-teacher key for the room (the old one stops working); the teacher's
        own key only. Raises ``room_key``, ``room_co_teacher`` (a co-teacher's key)."""
        code, key_hash = normalize_code(code), hash_key(key)
        co = new_key()
        self._do(self._co_key, code, key_hash, hash_key(co), self.clock())
        return co

    def role(self, code: str, key: str) -> str:
        """Whose key ``key`` is: ``"teacher"`` or ``"co"`` (a teacher link opened on
        another device). Raises ``room_key``."""
        code, key_hash = normalize_code(code), hash_key(key)
        return self._do(self._role, code, key_hash, self.clock(), retry=False)

    def results(self, code: str, key: str) -> list[QuestionResult]:
        """Every question's result, oldest first (at most ``MAX_RESULTS``); the open
        question's as it stands. Readable with either key until the room's expiry, after
        the class ended too. Raises ``room_unknown``, ``room_key``."""
        code, key_hash = normalize_code(code), hash_key(key)
        return self._do(self._results, code, key_hash, self.clock(), retry=False)

    def ended(self, code: str) -> bool:
        """Whether ``code`` names a class that ended and whose results are still kept
        (until the room's expiry): its followers' reconnects are not guesses. A bad code
        is ``False``."""
        try:
            code = normalize_code(code)
        except RoomError:
            return False
        return bool(self._do(self._ended, code, self.clock(), retry=False))

    # -- the backend: arguments arrive validated
    @abstractmethod
    def _ended(self, code: str, now: float) -> bool: ...

    @abstractmethod
    def _close_vote(self, code: str, key_hash: str, qid: str, now: float) -> int: ...

    @abstractmethod
    def _revote(
        self, code: str, key_hash: str, qid: str, closes_at: float | None, now: float
    ) -> int: ...

    @abstractmethod
    def _pause(self, code: str, key_hash: str, paused: bool, now: float) -> int: ...

    @abstractmethod
    def _co_key(self, code: str, key_hash: str, co_hash: str, now: float) -> None: ...

    @abstractmethod
    def _role(self, code: str, key_hash: str, now: float) -> str: ...

    @abstractmethod
    def _results(self, code: str, key_hash: str, now: float) -> list[QuestionResult]: ...


def _qid(qid: object) -> str:
    if not isinstance(qid, str) or _QID.fullmatch(qid) is None:
        raise vote_error()
    return qid
