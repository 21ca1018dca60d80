"""A live class's room: one small store interface, two backends (issue 29).

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

Everything from a request is validated here before a backend sees it (codes, keys,
student ids, question ids, states, questions); the backends write values only through
SQL parameters or Redis arguments, and build Redis key names only from a validated code.
Every refusal is a :class:`RoomError` whose ``code`` is a UI string ``err_<code>``. A bad,
unknown, closed or expired room code all give the same ``room_unknown`` error, so the
message never tells whether a room exists.

No Streamlit here: the pages render, this module decides.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from specdec_core.core.errors import InputError

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0, 1: read off a projector
CODE_LENGTH = 6
ROOM_PAGES = ("step", "lessons")  # the pages a room can show
QUESTION_KINDS = ("accept", "correction", "commit_count", "chapter")
MAX_STATE_BYTES = 8_192  # the published state as compact JSON (UTF-8)
MAX_STATE_KEYS = 16
MAX_QID_CHARS = 40
MIN_CHOICES, MAX_CHOICES = 2, 8
MAX_CHOICE_CHARS = 40
MAX_QUESTION_PARAMS = 8
MAX_PARAM_CHARS = 80
MAX_STUDENT_CHARS = 64
MAX_KEY_CHARS = 128
DEFAULT_TTL_H = 4.0
DEFAULT_MAX_ROOMS = 1000
DEFAULT_MAX_STUDENTS = 200
DEFAULT_ROOMS_PER_CLIENT = 3
DEFAULT_ROOMS_PER_HOUR = 10
DEFAULT_SEAT_TTL_S = 90.0
MAX_CLIENT_CHARS = 80
TTL_ENV = "SPECDEC_ROOM_TTL_H"
ROOMS_ENV = "SPECDEC_MAX_ROOMS"
STUDENTS_ENV = "SPECDEC_ROOM_STUDENTS"
PER_CLIENT_ENV = "SPECDEC_ROOMS_PER_CLIENT"
PER_HOUR_ENV = "SPECDEC_ROOMS_PER_HOUR"
SEAT_TTL_ENV = "SPECDEC_SEAT_TTL_S"
STATE_DIR_ENV = "XDG_STATE_HOME"
_UNBOUNDED = 10**9
RETRY_S = (0.1, 0.3)  # the back-off of a write the store did not take
DB_ENV = "SPECDEC_ROOM_DB"
REDIS_ENV = "SPECDEC_REDIS_URL"

_QID = re.compile(r"[A-Za-z0-9_:\-]{1,40}")  # MAX_QID_CHARS
_STUDENT = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")  # MAX_STUDENT_CHARS
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,23}")
_STATE_KEY = re.compile(r"[A-Za-z0-9_]{1,16}")
_CODE_SPACING = re.compile(r"[\s\-]")
#: Unicode categories refused in any shown text: controls, format characters (bidi
#: overrides among them), surrogates, line and paragraph separators.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

MESSAGES = {
    "room_unknown": "no live class has this code (check it, or ask the teacher: a class "
    "ends some hours after its last change)",
    "room_key": "this teacher key does not open this room",
    "room_full": "this live class is full ({limit} students)",
    "rooms_full": "the server holds {limit} live classes already: try again later",
    "room_answer": "this answer is not taken: the question is not open any more, or the "
    "choice is not one of its own",
    "room_state": "this lesson state cannot be shared with the class (a page the class can "
    "follow, at most {limit} bytes of short text fields)",
    "room_question": "this question cannot be asked: a known kind, {low}–{high} choices of "
    "at most {chars} characters each",
    "room_student": "this browser is not in the live class (any more): open the join link again",
    "rooms_client": "you already run {limit} live classes from this address: end one first",
    "rooms_hour": "at most {limit} live classes an hour from one address: try again later",
    "room_removed": "the teacher removed this seat from the live class",
    "room_store": "the class's store is not answering: retrying (what it did not confirm "
    "is not saved)",
    "room_store_reset": "the class's store was reset (its file was deleted or replaced): the "
    "running classes ended",
    "room_slow": "too many tries from this address: wait {wait} s",
}


class RoomError(InputError):
    """A refused room operation: ``code`` is one of :data:`MESSAGES` (UI string
    ``err_<code>``), ``params`` the values its message quotes."""

    default_code = "room_unknown"
    #: The UI's lead for these messages ("Live class:"; not "Nothing was changed:", which
    #: a student joining or answering would misread).
    prefix_key = "err_room_prefix"

    def __init__(self, code: str = "room_unknown", **params: object) -> None:
        super().__init__(MESSAGES[code].format(**params), code, **params)

    def __reduce__(self) -> tuple:  # pickle / copy: rebuilt from the code and params
        return (_room_error, (self.code, self.params))


def _room_error(code: str, params: dict) -> RoomError:
    return RoomError(code, **params)


def _unknown() -> RoomError:
    return RoomError("room_unknown")  # the same for bad, unknown, closed and expired codes


def question_error() -> RoomError:
    return RoomError("room_question", low=MIN_CHOICES, high=MAX_CHOICES, chars=MAX_CHOICE_CHARS)


def _shown_text(value: object, limit: int, *, empty: bool = False) -> bool:
    """Whether ``value`` is a str of at most ``limit`` characters, valid UTF-8, with no
    control / format / separator character (so it renders as one line, as written)."""
    if not isinstance(value, str) or len(value) > limit or (not value and not empty):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(c) in _BAD_CATEGORIES for c in value)


# ---------------------------------------------------------------- types
@dataclass(frozen=True)
class Question:
    """A question the teacher asks the class. ``qid``: its id (≤ 40 of ``A-Z a-z 0-9 _ : -``);
    ``kind``: one of :data:`QUESTION_KINDS` (the UI formats the translated question from
    it); ``params``: ``(name, value)`` pairs of short text the question names (e.g.
    ``(("position", "2"),)``; ≤ 8, names identifiers, values ≤ 80 characters);
    ``choices``: 2..8 labels of 1..40 characters, no control characters; ``correct``: the
    right choice's index, set by the reveal (``None`` before, or when the reveal names
    none); ``revealed``. A list or dict given for ``params`` / ``choices`` is stored as
    tuples. Raises :class:`RoomError` ``room_question`` when any part is out of bounds."""

    qid: str
    kind: str
    params: tuple[tuple[str, str], ...] = ()
    choices: tuple[str, ...] = ()
    correct: int | None = None
    revealed: bool = False

    def __post_init__(self) -> None:
        params = self.params
        if isinstance(params, str) or isinstance(self.choices, str):
            raise question_error()
        if isinstance(params, Mapping):
            params = tuple(params.items())
        try:
            params = tuple((name, value) for name, value in params)
            choices = tuple(self.choices)
        except (TypeError, ValueError):
            raise question_error() from None
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "choices", choices)
        check_question(self)


def check_question(question: Question) -> None:
    """Raise ``room_question`` unless every field of ``question`` is in bounds."""
    ok = isinstance(question.qid, str) and _QID.fullmatch(question.qid) is not None
    ok = ok and question.kind in QUESTION_KINDS
    ok = ok and len(question.params) <= MAX_QUESTION_PARAMS
    ok = ok and all(
        isinstance(name, str)
        and _PARAM_NAME.fullmatch(name) is not None
        and _shown_text(value, MAX_PARAM_CHARS, empty=True)
        for name, value in question.params
    )
    ok = ok and MIN_CHOICES <= len(question.choices) <= MAX_CHOICES
    ok = ok and all(_shown_text(c, MAX_CHOICE_CHARS) for c in question.choices)
    correct = question.correct
    ok = ok and (correct is None or _index(correct, len(question.choices)))
    ok = ok and isinstance(question.revealed, bool)
    if not ok:
        raise question_error()


def _index(value: object, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


def question_json(question: Question) -> str:
    """``question`` as compact JSON (the store's form)."""
    data = {
        "qid": question.qid,
        "kind": question.kind,
        "params": [list(p) for p in question.params],
        "choices": list(question.choices),
        "correct": question.correct,
        "revealed": question.revealed,
    }
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def question_from_json(text: str) -> Question:
    """The :class:`Question` :func:`question_json` wrote (validated again)."""
    data = json.loads(text)
    return Question(
        qid=data["qid"],
        kind=data["kind"],
        params=tuple(tuple(p) for p in data["params"]),
        choices=tuple(data["choices"]),
        correct=data["correct"],
        revealed=data["revealed"],
    )


@dataclass(frozen=True)
class RoomView:
    """What a room shows, read at one moment. ``version``: bumps on every change;
    ``page``: one of :data:`ROOM_PAGES`; ``state``: the teacher's lesson state as URL query
    parameters (``lessons/link.encode``); ``question``: the open or revealed question, or
    ``None``; ``counts``: answers per choice (``len(question.choices)`` numbers, ``()``
    without a question; no names); ``answered``: ``sum(counts)``; ``students``: joined
    students; ``expires_at``: Unix time (s, the store's clock) the room ends unless the
    teacher changes something first."""

    code: str
    version: int
    page: str
    state: dict[str, str]
    question: Question | None
    counts: tuple[int, ...]
    answered: int
    students: int
    expires_at: float


@dataclass(frozen=True)
class SeatInfo:
    """One seat as the teacher's list shows it: ``student`` (the seat's id), ``seen_at``
    (Unix s of its last heartbeat), ``answered`` (has answered the open question),
    ``counts`` (whether it counts: seen within the seat TTL, or answered)."""

    student: str
    seen_at: float
    answered: bool
    counts: bool


# ---------------------------------------------------------------- validation
def client_tag(client: object) -> str:
    """The store's name for a client (``addr:<ip>`` or ``session:<id>``; ``""`` unknown):
    its SHA-256, 24 hex digits (no address is stored in the clear); ``""`` stays ``""``."""
    if not isinstance(client, str) or len(client) > MAX_CLIENT_CHARS or not client.isascii():
        return ""
    return hashlib.sha256(client.encode("ascii")).hexdigest()[:24] if client else ""


def normalize_code(code: object) -> str:
    """A room code as typed (``"abc def"``, ``"ABC-DEF"``) → ``"ABCDEF"``; ``room_unknown``
    when it cannot be a code."""
    if not isinstance(code, str) or len(code) > 3 * CODE_LENGTH:
        raise _unknown()
    text = _CODE_SPACING.sub("", code).upper()
    if len(text) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in text):
        raise _unknown()
    return text


def new_code() -> str:
    """A fresh random room code (``secrets``; 32⁶ ≈ 10⁹ codes)."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def new_key() -> str:
    """A fresh teacher key (``secrets.token_urlsafe(24)``: 32 characters, 192 bits)."""
    return secrets.token_urlsafe(24)


def hash_key(key: object) -> str:
    """The SHA-256 (hex) the store keeps of a teacher key; ``room_key`` for a missing or
    malformed key."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS or not key.isascii():
        raise RoomError("room_key")
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def key_matches(key_hash: str, stored: str | None) -> bool:
    """Whether a key's hash equals the stored one (constant time)."""
    return stored is not None and hmac.compare_digest(key_hash, stored)


def check_student(student: object) -> str:
    """A student id (1..64 of ``A-Z a-z 0-9 _ . : -``), else ``room_student``."""
    if not isinstance(student, str) or _STUDENT.fullmatch(student) is None:
        raise RoomError("room_student")
    return student


def check_qid(qid: object) -> str:
    """A question id as an answer names it; ``room_answer`` when malformed."""
    if not isinstance(qid, str) or _QID.fullmatch(qid) is None:
        raise RoomError("room_answer")
    return qid


def state_json(page: object, state: object) -> str:
    """The published ``state`` as compact JSON with sorted keys, after checking ``page`` is
    in :data:`ROOM_PAGES` and ``state`` is a flat mapping of ≤ 16 short keys to text
    (no control characters) of ≤ 8 KB in all; else ``room_state``."""
    bad = RoomError("room_state", limit=MAX_STATE_BYTES)
    if page not in ROOM_PAGES or not isinstance(state, Mapping) or len(state) > MAX_STATE_KEYS:
        raise bad
    for name, value in state.items():
        if not isinstance(name, str) or _STATE_KEY.fullmatch(name) is None:
            raise bad
        if not _shown_text(value, MAX_STATE_BYTES, empty=True):
            raise bad
    text = json.dumps(dict(state), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_STATE_BYTES:
        raise bad
    return text


def state_from_json(text: str) -> dict[str, str]:
    data = json.loads(text)
    return {str(k): str(v) for k, v in data.items()}


def counts_of(choices: list[int], size: int) -> tuple[int, ...]:
    """Answers per choice from the stored choice indices (indices ≥ ``size`` ignored)."""
    counts = [0] * size
    for choice in choices:
        if 0 <= choice < size:
            counts[choice] += 1
    return tuple(counts)


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


# ---------------------------------------------------------------- the interface
class RoomStore(ABC):
    """The room store. ``ttl_s``: seconds a room lives after the teacher's last change
    (default ``SPECDEC_ROOM_TTL_H`` hours, 4); ``max_rooms`` / ``max_students``: the bounds
    (``rooms_full``, ``room_full``); ``clock``: Unix time in seconds (injected in tests).

    Every method validates its arguments and raises :class:`RoomError` (``room_unknown``
    for a bad, unknown, closed or expired code, before anything else); the backends do
    the rest. Thread-safe; safe for several processes sharing one store."""

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

    def view(self, code: str) -> RoomView:
        """The room as one consistent :class:`RoomView` (``students``: the seats that
        count)."""
        return self._do(self._view, normalize_code(code), self.clock(), retry=False)

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

    def publish(self, code: str, key: str, page: str, state: Mapping[str, str]) -> int:
        """Show ``state`` (the lesson link's query parameters) on ``page`` to every
        follower; returns the new version (the same one when nothing changed). Refreshes
        the room's expiry. Raises ``room_key``, ``room_state``."""
        code = normalize_code(code)
        key_hash = hash_key(key)
        text = state_json(page, state)
        return self._do(self._publish, code, key_hash, str(page), text, self.clock())

    def join(self, code: str, student: str) -> None:
        """Add ``student`` to the room, or refresh its seat (idempotent: the follower's
        heartbeat). Raises ``room_full`` (seats that count at the bound, after freeing
        those that stopped counting), ``room_removed``, ``room_student`` (a malformed id)."""
        code = normalize_code(code)
        self._do(self._join, code, check_student(student), self.clock())

    def ask(self, code: str, key: str, question: Question) -> int:
        """Open ``question`` (its ``correct`` / ``revealed`` are cleared: nothing of the
        answer reaches the students before the reveal), replacing any open one and its
        answers. Returns the new version. Raises ``room_key``, ``room_question``."""
        code = normalize_code(code)
        key_hash = hash_key(key)
        if not isinstance(question, Question):
            raise question_error()
        question = replace(question, correct=None, revealed=False)
        return self._do(self._ask, code, key_hash, question, self.clock())

    def answer(self, code: str, student: str, qid: str, choice: int) -> None:
        """``student``'s answer to the open question ``qid``: a choice index. One answer
        per student, changeable until the reveal. Raises ``room_student`` (not joined),
        ``room_answer`` (not the open question, already revealed, not a choice index)."""
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
        """End the room now (its code then gives ``room_unknown``). Raises ``room_key``."""
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
    def _publish(self, code: str, key_hash: str, page: str, state: str, now: float) -> int: ...

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


def default_db_path() -> str:
    """``SPECDEC_ROOM_DB``, else ``rooms.sqlite3`` in :func:`private_dir`."""
    return os.environ.get(DB_ENV) or os.path.join(private_dir(), "rooms.sqlite3")


def private_dir() -> str:
    """``$XDG_STATE_HOME/specdec`` (else ``~/.local/state/specdec``), made with mode 0700
    and set to 0700 when this user owns it (room codes and seats are nobody else's).
    Raises ``OSError`` when it cannot be made."""
    base = os.environ.get(STATE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".local", "state")
    path = os.path.join(base, "specdec")
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_uid == os.getuid():
        os.chmod(path, 0o700)
    return path
