"""A live class's room: one small store interface, two backends.

A teacher :meth:`~RoomStore.create`\\ s a room and gets a short **room code** (6 characters of
:data:`CODE_ALPHABET`, from :mod:`secrets`) for the students and a secret **teacher key**
(``secrets.token_urlsafe(24)``; the store keeps only its SHA-256 and compares with
:func:`hmac.compare_digest`). Only the key can change what the room shows: the lesson state
the followers replay (:meth:`~RoomStore.publish`: the URL query parameters
``lessons/link.encode`` makes, never model output), the open question
(:meth:`~RoomStore.ask`) and its reveal (:meth:`~RoomStore.reveal`). A student
:meth:`~RoomStore.join`\\ s with an opaque id the UI makes per browser session and
:meth:`~RoomStore.answer`\\ s with a choice *index* into the question's own list, so no
free text from a student ever reaches another screen. A follower polls
:meth:`~RoomStore.version` (one read; the number bumps on every change, answers and joins
included) and reads :meth:`~RoomStore.view` only when it changed.

Backends: :class:`~specdec_core.server.rooms_sqlite.SQLiteStore` (the default: one file in
WAL mode, every replica on one machine) and
:class:`~specdec_core.server.rooms_redis.RedisStore` (replicas on several machines).
:func:`specdec_core.server.room_store.make_store` picks one per process from the
environment: ``SPECDEC_REDIS_URL`` set → Redis, else SQLite at ``SPECDEC_ROOM_DB``
(default ``$XDG_STATE_HOME/specdec/rooms.sqlite3``, else ``~/.local/state/specdec/``: a
directory of mode 0700, never the world-writable temp folder).
Rooms expire ``SPECDEC_ROOM_TTL_H`` hours (default 4) after the teacher's last change.

Bounds one client cannot exhaust. A room remembers the client (address) that made it:
one client holds at most ``SPECDEC_ROOMS_PER_CLIENT`` live rooms (default 3) and makes at
most ``SPECDEC_ROOMS_PER_HOUR`` (default 10) an hour, so one student never locks out the
teachers; the server-wide cap ``SPECDEC_MAX_ROOMS`` (default 1,000) needs hundreds of
addresses to reach, and a teacher address (``exempt``) passes all three. A room holds at
most ``SPECDEC_ROOM_STUDENTS`` **seats** (default 200) that count: a seat counts while its
browser was seen in the last ``SPECDEC_SEAT_TTL_S`` seconds (default 90; the follower's
:meth:`~RoomStore.join` is its heartbeat) or while it has answered the open question; a
join into a full room first frees the seats that stopped counting. The teacher can
:meth:`~RoomStore.remove` a seat (it cannot join again).

Store faults (SQLite locked or full, Redis down) never leave as a backend exception:
writes are tried again with back-off (0.1 s, 0.3 s), then every call raises
``RoomError("room_store")``, which the UI shows as one translated line; an answer or join
that raised was not stored, one that returned was.

Everything from a request is validated here (the checks and types:
:mod:`~specdec_core.server.room_types`) before a backend sees it (codes, keys,
student ids, question ids, states, questions); the backends write values only through
SQL parameters or Redis arguments, and build Redis key names only from a validated code.
Every refusal is a :class:`RoomError` whose ``code`` is a UI string ``err_<code>``. A bad,
unknown, closed or expired room code all give the same ``room_unknown`` error, so the
message never tells whether a room exists.

No Streamlit here: the pages render, this module decides.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import replace

from specdec_core.server.room_frames import FrameStore
from specdec_core.server.room_results import countdown
from specdec_core.server.room_runs import in_run, with_run
from specdec_core.server.room_seats import SeatBatch
from specdec_core.server.room_types import (
    _QID,
    MAX_CHOICES,
    Question,
    RoomError,
    RoomView,
    SeatInfo,
    _index,
    check_qid,
    check_student,
    client_tag,
    hash_key,
    new_code,
    new_key,
    normalize_code,
    question_error,
    state_json,
)
from specdec_core.server.rooms_peer import PeerInstruction

DEFAULT_TTL_H = 4.0
DEFAULT_MAX_ROOMS = 1000
DEFAULT_MAX_STUDENTS = 200
DEFAULT_ROOMS_PER_CLIENT = 3
DEFAULT_ROOMS_PER_HOUR = 10
DEFAULT_SEAT_TTL_S = 90.0
TTL_ENV = "SPECDEC_ROOM_TTL_H"
ROOMS_ENV = "SPECDEC_MAX_ROOMS"
STUDENTS_ENV = "SPECDEC_ROOM_STUDENTS"
PER_CLIENT_ENV = "SPECDEC_ROOMS_PER_CLIENT"
PER_HOUR_ENV = "SPECDEC_ROOMS_PER_HOUR"
SEAT_TTL_ENV = "SPECDEC_SEAT_TTL_S"
_UNBOUNDED = 10**9
RETRY_S = (0.1, 0.3)  # the back-off of a write the store did not take


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


# ---------------------------------------------------------------- the interface
class RoomStore(PeerInstruction, FrameStore, SeatBatch, ABC):
    """The room store. ``ttl_s``: seconds a room lives after the teacher's last change
    (default ``SPECDEC_ROOM_TTL_H`` hours, 4); ``max_rooms`` / ``max_students``: the bounds
    (``rooms_full``, ``room_full``); ``clock``: Unix time in seconds (injected in tests).

    Every method validates its arguments and raises :class:`RoomError` (``room_unknown``
    for a bad, unknown, closed or expired code, before anything else); the backends do
    the rest. Thread-safe; safe for several processes sharing one store. Peer instruction
    (revote, countdown, pause, co-teacher, results): :class:`PeerInstruction`; every
    teacher method takes the co-teacher's key too, except :meth:`close`."""

    def __init__(
        self,
        *,
        ttl_s: float | None = None,
        max_rooms: int | None = None,
        max_students: int | None = None,
        rooms_per_client: int | None = None,
        rooms_per_hour: int | None = None,
        seat_ttl_s: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = float(ttl_s) if ttl_s else _env_float(TTL_ENV, DEFAULT_TTL_H) * 3600.0
        self.max_rooms = int(max_rooms or _env_float(ROOMS_ENV, DEFAULT_MAX_ROOMS))
        self.max_students = int(max_students or _env_float(STUDENTS_ENV, DEFAULT_MAX_STUDENTS))
        self.rooms_per_client = int(
            rooms_per_client or _env_float(PER_CLIENT_ENV, DEFAULT_ROOMS_PER_CLIENT)
        )
        self.rooms_per_hour = int(
            rooms_per_hour or _env_float(PER_HOUR_ENV, DEFAULT_ROOMS_PER_HOUR)
        )
        self.seat_ttl_s = float(seat_ttl_s or _env_float(SEAT_TTL_ENV, DEFAULT_SEAT_TTL_S))
        self.clock = clock

    #: The backend's own exceptions that mean "the store did not answer" (not a refusal).
    faults: tuple[type[BaseException], ...] = (OSError,)

    def _do(self, fn: Callable, *args: object, retry: bool = True) -> object:
        """``fn(*args)`` with the backend's faults turned into ``room_store``: a write
        (``retry``) is tried again after each of :data:`RETRY_S`; a refusal
        (:class:`RoomError`) passes at once."""
        waits = RETRY_S if retry else ()
        for wait in (*waits, None):
            try:
                return fn(*args)
            except RoomError:
                raise
            except self.faults as exc:
                if wait is None:
                    raise RoomError("room_store") from exc
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- public methods (validation here, storage in the backend)
    def create(self, client: str = "", *, exempt: bool = False) -> tuple[str, str]:
        """A new room made by ``client`` (``addr:<ip>``; ``""``: a caller of the server's
        own, a test or a script, held to the server-wide bound only): ``(code,
        teacher_key)``; it shows the step page with an empty state until the first
        :meth:`publish`. Raises ``rooms_client`` at ``rooms_per_client`` live rooms of
        this client, ``rooms_hour`` at ``rooms_per_hour`` made in the last hour,
        ``rooms_full`` at ``max_rooms`` live rooms (expired ones are purged first); an
        ``exempt`` client (a teacher address) passes all three."""
        key = new_key()
        now = self.clock()
        self.purge(now)
        limits = None if exempt else (self.rooms_per_client, self.rooms_per_hour, self.max_rooms)
        if limits is not None and not client_tag(client):  # the server's own caller: no client
            limits = (_UNBOUNDED, _UNBOUNDED, self.max_rooms)
        for _ in range(20):  # a taken code (one in ~10⁹ per live room) is drawn again
            code = new_code()
            args = (code, hash_key(key), client_tag(client), now, now + self.ttl_s, limits)
            if self._do(self._create, *args):
                return code, key
        raise RuntimeError("no free room code after 20 draws")  # pragma: no cover

    def version(self, code: str) -> int:
        """The room's version (one read): poll it, read :meth:`view` when it changed."""
        return self._do(self._version, normalize_code(code), self.clock(), retry=False)

    def view(self, code: str, every_run: bool = False) -> RoomView:
        """The room as one :class:`RoomView` (``students``: the seats that count; a question
        of another run left out unless ``every_run``, the teacher's reads: ``room_runs``)."""
        got = self._do(self._view, normalize_code(code), self.clock(), retry=False)
        return got if every_run else in_run(got)

    def seats(self, code: str, key: str) -> list[SeatInfo]:
        """The room's seats for its teacher (newest heartbeat first). Raises ``room_key``."""
        code = normalize_code(code)
        return self._do(self._seats, code, hash_key(key), self.clock(), retry=False)

    def remove(self, code: str, key: str, student: str) -> int:
        """The teacher removes ``student``'s seat and its answer; that seat cannot join
        again. Returns the version. Raises ``room_key``, ``room_student`` (no such seat)."""
        code = normalize_code(code)
        key_hash = hash_key(key)
        return self._do(self._remove, code, key_hash, check_student(student), self.clock())

    def publish(
        self, code: str, key: str, page: str, state: Mapping[str, str], base: int | None = None
    ) -> int:
        """Show ``state`` (the lesson link's query parameters) on ``page`` to every
        follower; returns the new version (the same one when nothing changed). Refreshes
        the room's expiry. ``base`` (compare-and-set of two drivers): the room version the
        driver's screen last agreed with; a page or state published after it
        (``RoomView.moment`` > ``base``) refuses this one, ``room_moved`` (publishing the
        state the room shows passes; ``None``: no check). Raises ``room_key``, ``room_state``."""
        code, key_hash, text = normalize_code(code), hash_key(key), state_json(page, state)
        base = None if base is None else max(0, int(base))
        return self._do(self._publish, code, key_hash, str(page), text, self.clock(), base)

    def join(self, code: str, student: str) -> None:
        """Add ``student`` to the room, or refresh its seat (idempotent: the follower's
        heartbeat). Raises ``room_full`` (seats that count at the bound, after freeing
        those that stopped counting), ``room_removed``, ``room_student`` (a malformed id)."""
        code = normalize_code(code)
        self._do(self._join, code, check_student(student), self.clock())

    def ask(self, code: str, key: str, question: Question, duration_s: int | None = None) -> int:
        """Open ``question`` (its ``correct`` / ``revealed`` are cleared: nothing of the
        answer reaches the students before the reveal; its first vote, with a countdown
        of ``duration_s`` seconds or none), replacing any open one and its answers (its
        result is kept). Returns the new version. Raises ``room_key``, ``room_question``,
        ``room_vote`` (a countdown out of bounds)."""
        code, key_hash = normalize_code(code), hash_key(key)
        if not isinstance(question, Question):
            raise question_error()
        seconds, now = countdown(duration_s), self.clock()
        closes = None if seconds is None else now + seconds
        question = replace(question, correct=None, revealed=False, vote=1, closes_at=closes)
        question = with_run(question, self.view(code))  # it goes with its run
        return self._do(self._ask, code, key_hash, question, now)

    def answer(self, code: str, student: str, qid: str, choice: int) -> None:
        """``student``'s answer to the open question ``qid``: a choice index. One answer
        per student and vote, changeable until the reveal or the countdown's end. Raises
        ``room_student`` (not joined), ``room_answer`` (not the open question, already
        revealed, not a choice index), ``room_time_up`` (the vote is closed)."""
        code = normalize_code(code)
        student = check_student(student)
        qid = check_qid(qid)
        if not _index(choice, MAX_CHOICES):
            raise RoomError("room_answer")
        self._do(self._answer, code, student, qid, int(choice), self.clock())

    def answer_of(self, code: str, student: str, qid: str) -> int | None:
        """The choice index ``student`` gave to question ``qid``, or ``None`` (no answer,
        or ``qid`` is not the room's question any more). A reload reads it back: the
        follower's radio and its reveal line show the answer the chart counts. Raises
        ``room_student`` (a malformed id, or not joined), ``room_answer`` (a malformed
        ``qid``)."""
        code = normalize_code(code)
        student = check_student(student)
        qid = check_qid(qid)
        return self._do(self._answer_of, code, student, qid, self.clock(), retry=False)

    def reveal(self, code: str, key: str, qid: str, correct: int | None) -> int:
        """Close the open question ``qid`` and show ``correct`` (a choice index, or ``None``
        when no choice is right); answers are refused afterwards. Revealing again with the
        same ``correct`` changes nothing. Returns the version. Raises ``room_key``,
        ``room_question`` (not the open question, another ``correct``, out of range)."""
        code = normalize_code(code)
        key_hash = hash_key(key)
        if not isinstance(qid, str) or _QID.fullmatch(qid) is None:
            raise question_error()
        if correct is not None and not _index(correct, MAX_CHOICES):
            raise question_error()
        return self._do(self._reveal, code, key_hash, qid, correct, self.clock())

    def close(self, code: str, key: str) -> None:
        """End the room now (its code then gives ``room_unknown``; its results stay
        readable until its expiry). Raises ``room_key`` (a co-teacher's key included)."""
        code = normalize_code(code)
        self._do(self._close, code, hash_key(key), self.clock())

    def purge(self, now: float | None = None) -> int:
        """Remove every room expired at ``now`` (default: the clock); returns how many."""
        return self._do(self._purge, self.clock() if now is None else float(now))

    # -- the backend: arguments arrive validated
    @abstractmethod
    def _create(
        self,
        code: str,
        key_hash: str,
        client: str,
        now: float,
        expires_at: float,
        limits: tuple[int, int, int] | None,
    ) -> bool:
        """Store a new room of ``client`` (version 1, page ``step``, state ``{}``) and its
        creation; ``False`` when the code is taken. ``limits``: (live rooms of the client,
        creations of the client in the hour before ``now``, live rooms) or ``None``."""

    def _limit(self, mine: int, made: int, live: int, limits: tuple | None) -> None:
        """Raise the first bound of ``limits`` that the counts reach (backends call it)."""
        if limits is None:
            return
        for count, limit, code in zip(
            (mine, made, live), limits, ("rooms_client", "rooms_hour", "rooms_full"), strict=True
        ):
            if count >= limit:
                raise RoomError(code, limit=limit)

    @abstractmethod
    def _seats(self, code: str, key_hash: str, now: float) -> list[SeatInfo]: ...

    @abstractmethod
    def _remove(self, code: str, key_hash: str, student: str, now: float) -> int: ...

    @abstractmethod
    def _version(self, code: str, now: float) -> int: ...

    @abstractmethod
    def _view(self, code: str, now: float) -> RoomView: ...

    @abstractmethod
    def _publish(
        self, code: str, key_hash: str, page: str, state: str, now: float, base: int | None
    ) -> int: ...

    @abstractmethod
    def _join(self, code: str, student: str, now: float) -> None: ...

    @abstractmethod
    def _ask(self, code: str, key_hash: str, question: Question, now: float) -> int: ...

    @abstractmethod
    def _answer(self, code: str, student: str, qid: str, choice: int, now: float) -> None: ...

    @abstractmethod
    def _answer_of(self, code: str, student: str, qid: str, now: float) -> int | None: ...

    @abstractmethod
    def _reveal(
        self, code: str, key_hash: str, qid: str, correct: int | None, now: float
    ) -> int: ...

    @abstractmethod
    def _close(self, code: str, key_hash: str, now: float) -> None: ...

    @abstractmethod
    def _purge(self, now: float) -> int: ...
