"""The room store in Redis (:mod:`specdec_core.server.rooms`), for replicas on several
machines: set ``SPECDEC_REDIS_URL`` (e.g. ``redis://redis:6379/0``).

Keys of room ``C`` (``C`` is a validated code, the only thing a key name is built from):

- ``specdec:room:C:meta`` — a hash: ``key_hash``, ``version``, ``page``, ``state`` (JSON),
  ``question`` (JSON of the question as asked, or empty), ``qid``, ``nchoices``,
  ``revealed`` (``0``/``1``), ``correct`` (empty for none), ``expires_at`` (Unix s);
- ``specdec:room:C:students`` — a hash student id → last heartbeat (Unix s);
- ``specdec:room:C:answers`` — a hash student → choice index (the open question's only);
- ``specdec:room:C:removed`` — a set of the seats the teacher removed;

one index, ``specdec:rooms``: a sorted set code → ``expires_at`` (the rooms bound,
purging); and per client tag ``T`` (a hash, never an address):
``specdec:client:T:live`` (its rooms, by creation time) and ``specdec:client:T:made``
(its creations of the last hour). Every read-modify-write is one Lua script (atomic in
Redis; the 60 answers of a class never retry), taking the room's keys as ``KEYS`` and
every value as ``ARGV``. A teacher operation first reads the stored key hash and compares it with
:func:`hmac.compare_digest`; the script checks it again (the room may have changed between).
Rooms expire twice over: ``expires_at`` is checked on every read against the store's clock
(tests inject one) and every key carries a Redis TTL of the room's lifetime, pushed on by
each teacher change, so an abandoned room disappears even if nobody purges.

The scripts touch only the keys they are given, except the creation script, which reads
the index's score of each room of the client: a Redis Cluster needs the three keys of a
room in one slot (``{C}`` hash tags) — not done; one Redis server is what a class needs.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

import redis

from specdec_core.server.rooms import (
    Question,
    RoomError,
    RoomStore,
    RoomView,
    SeatInfo,
    counts_of,
    key_matches,
    normalize_code,
    question_error,
    question_from_json,
    question_json,
    state_from_json,
)

SOCKET_TIMEOUT_S = 5.0

#: The room's KEYS: meta, students, answers, index, removed. ``alive`` leaves ``false`` when
#: the room is missing or expired at ARGV ``now``.
_ALIVE = """
local function alive(now)
  local exp = redis.call('HGET', KEYS[1], 'expires_at')
  return exp and tonumber(exp) > now
end
local function keep(ttl_ms)
  for _, i in ipairs({1, 2, 3, 5}) do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
local function follow(key)
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
"""

# KEYS 6, 7: the client's rooms and creations. ARGV: code, key_hash, now, expires_at,
# ttl_ms, limited (0/1), rooms per client, rooms per hour, max rooms
_CREATE = """
local now = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now - 3600)
if ARGV[6] == '1' then
  local mine = 0
  for _, c in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
    local exp = redis.call('ZSCORE', KEYS[4], c)
    if exp and tonumber(exp) > now then mine = mine + 1 else redis.call('ZREM', KEYS[6], c) end
  end
  if mine >= tonumber(ARGV[7]) then return 'rooms_client' end
  if redis.call('ZCARD', KEYS[7]) >= tonumber(ARGV[8]) then return 'rooms_hour' end
  if redis.call('ZCOUNT', KEYS[4], '(' .. ARGV[3], '+inf') >= tonumber(ARGV[9]) then
    return 'rooms_full'
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'taken' end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[5])
redis.call('HSET', KEYS[1], 'key_hash', ARGV[2], 'version', 1, 'page', 'step',
  'state', '{}', 'question', '', 'qid', '', 'nchoices', 0, 'revealed', 0, 'correct', '',
  'expires_at', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[6], now, ARGV[1])
redis.call('PEXPIRE', KEYS[6], ARGV[5])
redis.call('ZADD', KEYS[7], now, ARGV[1])
redis.call('PEXPIRE', KEYS[7], 3600000)
return 'ok'
"""

# ARGV: now, student, max_students, cutoff (a seat seen after it counts)
_JOIN = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return 'room_unknown' end
if redis.call('SISMEMBER', KEYS[5], ARGV[2]) == 1 then return 'room_removed' end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
  return 'same'
end
local max = tonumber(ARGV[3])
if redis.call('HLEN', KEYS[2]) >= max then
  local all, n = redis.call('HGETALL', KEYS[2]), 0
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) > tonumber(ARGV[4]) or redis.call('HEXISTS', KEYS[3], all[i]) == 1
    then n = n + 1 else redis.call('HDEL', KEYS[2], all[i]) end
  end
  if n >= max then return 'room_full' end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
follow(KEYS[2])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return 'ok'
"""
)

# ARGV: now, student, qid, choice
_ANSWER = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return 'room_unknown' end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 'room_student' end
local q = redis.call('HMGET', KEYS[1], 'qid', 'nchoices', 'revealed')
if q[1] == '' or q[1] ~= ARGV[3] or q[3] ~= '0' then return 'room_answer' end
if tonumber(ARGV[4]) >= tonumber(q[2]) then return 'room_answer' end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[4] then return 'same' end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
follow(KEYS[3])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return 'ok'
"""
)

#: The start of every teacher script. ARGV: now, key_hash, expires_at, ttl_ms, code.
_TEACHER = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return {'room_unknown', 0} end
if redis.call('HGET', KEYS[1], 'key_hash') ~= ARGV[2] then return {'room_key', 0} end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[3])
keep(tonumber(ARGV[4]))
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[5])
"""
)

# ARGV 6, 7: page, state
_PUBLISH = (
    _TEACHER
    + """
local now = redis.call('HMGET', KEYS[1], 'page', 'state', 'version')
if now[1] == ARGV[6] and now[2] == ARGV[7] then return {'ok', tonumber(now[3])} end
redis.call('HSET', KEYS[1], 'page', ARGV[6], 'state', ARGV[7])
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV 6, 7, 8: question JSON, qid, number of choices
_ASK = (
    _TEACHER
    + """
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[1], 'question', ARGV[6], 'qid', ARGV[7], 'nchoices', ARGV[8],
  'revealed', 0, 'correct', '')
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV 6, 7: qid, correct ('' for none)
_REVEAL = (
    _TEACHER
    + """
local q = redis.call('HMGET', KEYS[1], 'qid', 'nchoices', 'revealed', 'correct', 'version')
if q[1] == '' or q[1] ~= ARGV[6] then return {'room_question', 0} end
if ARGV[7] ~= '' and tonumber(ARGV[7]) >= tonumber(q[2]) then return {'room_question', 0} end
if q[3] == '1' then
  if q[4] == ARGV[7] then return {'ok', tonumber(q[5])} end
  return {'room_question', 0}
end
redis.call('HSET', KEYS[1], 'revealed', 1, 'correct', ARGV[7])
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV 6: the seat removed
_REMOVE = (
    _TEACHER
    + """
if redis.call('HDEL', KEYS[2], ARGV[6]) == 0 then return {'room_student', 0} end
redis.call('HDEL', KEYS[3], ARGV[6])
redis.call('SADD', KEYS[5], ARGV[6])
follow(KEYS[5])
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV: now, key_hash, code
_CLOSE = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return 'room_unknown' end
if redis.call('HGET', KEYS[1], 'key_hash') ~= ARGV[2] then return 'room_key' end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
redis.call('ZREM', KEYS[4], ARGV[3])
return 'ok'
"""
)

# ARGV: now, code. Removes the room if it has expired at ``now`` (or is gone).
_DROP = """
local exp = redis.call('HGET', KEYS[1], 'expires_at')
if exp and tonumber(exp) > tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[4], exp, ARGV[2])
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
redis.call('ZREM', KEYS[4], ARGV[2])
return exp and 1 or 0
"""


class RedisStore(RoomStore):
    """Rooms in the Redis server at ``url`` (``redis://host:port/db``); key names start
    with ``prefix``. Other arguments: :class:`RoomStore`. One connection pool per object
    (thread-safe); every command has a socket timeout of ``SOCKET_TIMEOUT_S``."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "specdec",
        ttl_s: float | None = None,
        max_rooms: int | None = None,
        max_students: int | None = None,
        clock: Callable[[], float] = time.time,
        **bounds: float,
    ) -> None:
        super().__init__(
            ttl_s=ttl_s, max_rooms=max_rooms, max_students=max_students, clock=clock, **bounds
        )
        if not re.fullmatch(r"[A-Za-z0-9_\-]{1,32}", prefix):
            raise ValueError(f"a Redis key prefix of 1..32 letters, digits, _ or -: {prefix!r}")
        self.prefix = prefix
        self.client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            health_check_interval=30,
        )
        reg = self.client.register_script
        self._scripts = {
            "create": reg(_CREATE),
            "join": reg(_JOIN),
            "answer": reg(_ANSWER),
            "publish": reg(_PUBLISH),
            "ask": reg(_ASK),
            "reveal": reg(_REVEAL),
            "remove": reg(_REMOVE),
            "close": reg(_CLOSE),
            "drop": reg(_DROP),
        }

    faults = (redis.RedisError, OSError)

    def _keys(self, code: str) -> list[str]:
        """meta, students, answers, index, removed: names from the validated ``code``
        only."""
        return [
            f"{self.prefix}:room:{code}:meta",
            f"{self.prefix}:room:{code}:students",
            f"{self.prefix}:room:{code}:answers",
            f"{self.prefix}:rooms",
            f"{self.prefix}:room:{code}:removed",
        ]

    def _client_keys(self, tag: str) -> list[str]:
        """The client's rooms and creations: names from a hex ``tag`` (``-``: unknown)."""
        tag = tag if re.fullmatch(r"[0-9a-f]{1,64}", tag) else "-"
        return [f"{self.prefix}:client:{tag}:live", f"{self.prefix}:client:{tag}:made"]

    def _ttl_ms(self) -> int:
        return max(1, math.ceil(self.ttl_s * 1000))

    def _run(self, name: str, code: str, *args: object) -> object:
        return self._scripts[name](keys=self._keys(code), args=[str(a) for a in args])

    def _check(self, status: str) -> None:
        """Raise the :class:`RoomError` a script's status names (``ok`` / ``same``: none)."""
        if status in ("ok", "same"):
            return
        if status == "room_question":
            raise question_error()
        if status == "room_full":
            raise RoomError(status, limit=self.max_students)
        bound = {
            "rooms_client": self.rooms_per_client,
            "rooms_hour": self.rooms_per_hour,
            "rooms_full": self.max_rooms,
        }
        if status in bound:
            raise RoomError(status, limit=bound[status])
        raise RoomError(status)

    def _teacher(self, name: str, code: str, key_hash: str, now: float, *args: object) -> int:
        """Check the key here (constant time), then run the teacher script ``name``."""
        stored = self.client.hmget(self._keys(code)[0], ["key_hash", "expires_at"])
        if stored[1] is None or float(stored[1]) <= now:
            raise RoomError("room_unknown")
        if not key_matches(key_hash, stored[0]):
            raise RoomError("room_key")
        status, version = self._run(
            name, code, repr(now), key_hash, repr(now + self.ttl_s), self._ttl_ms(), code, *args
        )
        self._check(status)
        return int(version)

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
        keys = self._keys(code) + self._client_keys(client)
        status = self._scripts["create"](
            keys=keys,
            args=[
                code,
                key_hash,
                repr(now),
                repr(expires_at),
                self._ttl_ms(),
                0 if limits is None else 1,
                *(limits or (0, 0, 0)),
            ],
        )
        if status not in ("ok", "taken"):
            self._check(status)
        return status == "ok"

    def _version(self, code: str, now: float) -> int:
        version, expires_at = self.client.hmget(self._keys(code)[0], ["version", "expires_at"])
        if version is None or expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        return int(version)

    def _view(self, code: str, now: float) -> RoomView:
        meta, students, answers = self._keys(code)[:3]
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hgetall(meta).hgetall(students).hgetall(answers)
            room, seen, given = pipe.execute()
        if not room or float(room["expires_at"]) <= now:
            raise RoomError("room_unknown")
        question = None
        if room["question"]:
            correct = room["correct"]
            asked = question_from_json(room["question"])
            question = Question(
                qid=asked.qid,
                kind=asked.kind,
                params=asked.params,
                choices=asked.choices,
                correct=int(correct) if correct else None,
                revealed=room["revealed"] == "1",
            )
        choices = [int(c) for c in given.values()]
        counts = counts_of(choices, len(question.choices)) if question else ()
        cutoff = now - self.seat_ttl_s
        return RoomView(
            code=code,
            version=int(room["version"]),
            page=room["page"],
            state=state_from_json(room["state"]),
            question=question,
            counts=counts,
            answered=sum(counts),
            students=sum(float(t) > cutoff or s in given for s, t in seen.items()),
            expires_at=float(room["expires_at"]),
        )

    def _seats(self, code: str, key_hash: str, now: float) -> list[SeatInfo]:
        meta, students, answers = self._keys(code)[:3]
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hmget(meta, ["key_hash", "expires_at"]).hgetall(students).hkeys(answers)
            (stored, expires_at), seen, given = pipe.execute()
        if expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        if not key_matches(key_hash, stored):
            raise RoomError("room_key")
        cutoff, given = now - self.seat_ttl_s, set(given)
        seats = [
            SeatInfo(s, float(t), s in given, float(t) > cutoff or s in given)
            for s, t in seen.items()
        ]
        return sorted(seats, key=lambda seat: -seat.seen_at)

    def _remove(self, code: str, key_hash: str, student: str, now: float) -> int:
        return self._teacher("remove", code, key_hash, now, student)

    def _publish(self, code: str, key_hash: str, page: str, state: str, now: float) -> int:
        return self._teacher("publish", code, key_hash, now, page, state)

    def _join(self, code: str, student: str, now: float) -> None:
        cutoff = repr(now - self.seat_ttl_s)
        status = self._run("join", code, repr(now), student, self.max_students, cutoff)
        self._check(status)

    def _ask(self, code: str, key_hash: str, question: Question, now: float) -> int:
        text = question_json(question)
        return self._teacher("ask", code, key_hash, now, text, question.qid, len(question.choices))

    def _answer(self, code: str, student: str, qid: str, choice: int, now: float) -> None:
        self._check(self._run("answer", code, repr(now), student, qid, choice))

    def _answer_of(self, code: str, student: str, qid: str, now: float) -> int | None:
        meta, students, answers = self._keys(code)[:3]
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hmget(meta, ["qid", "expires_at"]).hexists(students, student)
            pipe.hget(answers, student)
            (asked, expires_at), joined, choice = pipe.execute()
        if expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        if not joined:
            raise RoomError("room_student")
        if asked != qid or choice is None:
            return None
        return int(choice)

    def _reveal(self, code: str, key_hash: str, qid: str, correct: int | None, now: float) -> int:
        shown = "" if correct is None else correct
        return self._teacher("reveal", code, key_hash, now, qid, shown)

    def _close(self, code: str, key_hash: str, now: float) -> None:
        stored = self.client.hmget(self._keys(code)[0], ["key_hash", "expires_at"])
        if stored[1] is None or float(stored[1]) <= now:
            raise RoomError("room_unknown")
        if not key_matches(key_hash, stored[0]):
            raise RoomError("room_key")
        self._check(self._run("close", code, repr(now), key_hash, code))

    def _purge(self, now: float) -> int:
        dropped = 0
        for stored in self.client.zrangebyscore(self._keys("")[3], "-inf", now):
            try:
                code = normalize_code(stored)  # our own writing, checked all the same
            except RoomError:
                continue
            dropped += int(self._run("drop", code, repr(now), code))
        return dropped
