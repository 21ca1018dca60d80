"""The live class's room types and the validation of everything a request carries
(:mod:`specdec_core.server.rooms` is the store interface that uses them): the bounds, the
error type and its messages, a :class:`Question`, a :class:`RoomView`, a
:class:`SeatInfo`, and the checks of room codes, teacher keys, student ids, question ids,
published states and client tags. Pure functions and frozen values; no storage.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

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
MAX_CLIENT_CHARS = 80

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
    "room_time_up": "the time for this question is up: this answer was not taken",
    "room_closed": "voting was closed by the teacher: this answer was not taken",
    "room_vote": "this cannot be done with this question now: a revote needs an open first "
    "vote; a countdown is {low}–{high} s",
    "room_co_teacher": "only the teacher who started the class can do this (a co-teacher "
    "drives the class but does not end it)",
    "room_moved": "the other driver moved the class first: this click was not shown to the class",
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
    none); ``revealed``; ``vote``: 1 (the first vote) or 2 (the revote after a
    discussion); ``closes_at``: Unix time (s, the store's clock) the vote's countdown ends
    (``None``: no countdown; the past: closed); ``closed``: the teacher closed the vote by
    hand (``closes_at`` is that moment). A list or dict given for ``params`` /
    ``choices`` is stored as tuples. Raises :class:`RoomError` ``room_question`` when any
    part is out of bounds."""

    qid: str
    kind: str
    params: tuple[tuple[str, str], ...] = ()
    choices: tuple[str, ...] = ()
    correct: int | None = None
    revealed: bool = False
    vote: int = 1
    closes_at: float | None = None
    closed: bool = False

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
    ok = ok and question.vote in (1, 2) and not isinstance(question.vote, bool)
    ok = ok and isinstance(question.closed, bool)
    closes = question.closes_at
    ok = ok and (closes is None or (isinstance(closes, float | int) and 0 <= closes < 1e11))
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
        "vote": question.vote,
        "closes_at": question.closes_at,
        "closed": question.closed,
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
        vote=data.get("vote", 1),
        closes_at=data.get("closes_at"),
        closed=data.get("closed", False),
    )


@dataclass(frozen=True)
class RoomView:
    """What a room shows, read at one moment. ``version``: bumps on every change;
    ``page``: one of :data:`ROOM_PAGES`; ``state``: the teacher's lesson state as URL query
    parameters (``lessons/link.encode``); ``question``: the open or revealed question, or
    ``None``; ``counts``: answers per choice (``len(question.choices)`` numbers, ``()``
    without a question; no names); ``answered``: ``sum(counts)``; ``students``: joined
    students; ``expires_at``: Unix time (s, the store's clock) the room ends unless the
    teacher changes something first; ``first``: the first vote's answers per choice while
    the question is at its revote (``counts`` then counts the revote), else ``()``;
    ``paused``: the teacher paused the class (``page`` / ``state`` are the moment it was
    paused at, whatever the teacher publishes meanwhile); ``moment``: the version at which a
    publish last changed the page or state (a driver's compare-and-set compares with it);
    while paused, ``held``: the question as it was at the pause (what followers show, its
    countdown frozen at ``paused_at``, Unix s), else ``None`` (both)."""

    code: str
    version: int
    page: str
    state: dict[str, str]
    question: Question | None
    counts: tuple[int, ...]
    answered: int
    students: int
    expires_at: float
    first: tuple[int, ...] = ()
    paused: bool = False
    moment: int = 0
    held: Question | None = None
    paused_at: float | None = None


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
