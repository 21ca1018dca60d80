"""The room store in Redis (:mod:`specdec_core.server.rooms`), for replicas on several
machines: set ``SPECDEC_REDIS_URL`` (e.g. ``redis://redis:6379/0``).

Keys of room ``C`` (``C`` is a validated code, the only thing a key name is built from):

- ``specdec:room:C:meta`` — a hash: ``key_hash``, ``version``, ``page``, ``state`` (JSON),
  ``question`` (JSON of the question as asked, or empty), ``qid``, ``nchoices``,
  ``revealed`` (``0``/``1``), ``correct`` (empty for none), ``expires_at`` (Unix s);
- ``specdec:room:C:students`` — a hash student id → last heartbeat (Unix s);
- ``specdec:room:C:answers`` — a hash student → choice index (the open question's only);
- ``specdec:room:C:removed`` — a set of the seats the teacher removed;
- ``specdec:room:C:frames`` (digest → frame) and ``:frame_order`` (digests, newest first):
  the room's newest frames (:mod:`~specdec_core.server.room_frames`);
- ``specdec:room:C:first``, ``:results``, ``:ended`` — peer instruction's
  (:mod:`~specdec_core.server.rooms_redis_peer`, with its meta fields); ``:holders``
  (:mod:`~specdec_core.server.rooms_redis_seats`: the seats' holders, their heartbeats);

one index, ``specdec:rooms``: a sorted set code → ``expires_at`` (the rooms bound,
purging); and per client tag ``T`` (a hash, never an address):
``specdec:client:T:live`` (its rooms, by creation time) and ``specdec:client:T:made``
(its creations of the last hour). Every read-modify-write is one Lua script
(:mod:`~specdec_core.server.rooms_redis_scripts`, atomic in Redis; the 60 answers of a
class never retry), taking the room's keys as ``KEYS`` and every value as ``ARGV``. A
teacher operation first reads the stored key hash and compares it with
:func:`hmac.compare_digest`; the script checks it again (the room may have changed between).
Rooms expire twice over: ``expires_at`` is checked on every read against the store's clock
(tests inject one) and every key carries a Redis TTL of the room's lifetime, pushed on by
each teacher change, so an abandoned room disappears even if nobody purges.

The scripts touch only the keys they are given, except the creation script (the index's
score of each room of the client): a Redis Cluster would need ``{C}`` hash tags — not done.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable

import redis

from specdec_core.server.room_frames import KEPT_FRAMES
from specdec_core.server.room_results import MAX_RESULTS, vote_error
from specdec_core.server.room_types import (
    Question,
    RoomError,
    RoomView,
    SeatInfo,
    counts_of,
    normalize_code,
    question_error,
    question_json,
    state_from_json,
)
from specdec_core.server.rooms import RoomStore
from specdec_core.server.rooms_redis_peer import PEER_SCRIPTS, RedisPeer, question_of
from specdec_core.server.rooms_redis_scripts import SCRIPTS
from specdec_core.server.rooms_redis_seats import SEAT_SCRIPTS, RedisSeats

SOCKET_TIMEOUT_S = 5.0


class RedisStore(RedisPeer, RedisSeats, RoomStore):
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
        self._changes = f"{prefix}:changes"  # pub/sub: the code of every room written
        self.client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            health_check_interval=30,
        )
        scripts = {**SCRIPTS, **PEER_SCRIPTS, **SEAT_SCRIPTS}
        self._scripts = {name: self.client.register_script(s) for name, s in scripts.items()}

    faults = (redis.RedisError, OSError)

    def _keys(self, code: str) -> list[str]:
        """meta, students, answers, index, removed, first, results, ended: names from the
        validated ``code`` only."""
        return [
            f"{self.prefix}:room:{code}:meta",
            f"{self.prefix}:room:{code}:students",
            f"{self.prefix}:room:{code}:answers",
            f"{self.prefix}:rooms",
            f"{self.prefix}:room:{code}:removed",
            f"{self.prefix}:room:{code}:first",
            f"{self.prefix}:room:{code}:results",
            f"{self.prefix}:room:{code}:ended",
        ]

    def _client_keys(self, tag: str) -> list[str]:
        """The client's rooms and creations: names from a hex ``tag`` (``-``: unknown)."""
        tag = tag if re.fullmatch(r"[0-9a-f]{1,64}", tag) else "-"
        return [f"{self.prefix}:client:{tag}:live", f"{self.prefix}:client:{tag}:made"]

    def _ttl_ms(self) -> int:
        return max(1, math.ceil(self.ttl_s * 1000))

    def _run(self, name: str, code: str, *args: object) -> object:
        got = self._scripts[name](keys=self._keys(code), args=[str(a) for a in args])
        try:  # every replica's push hub wakes (``change_waiter``); its own poll covers a miss
            self.client.publish(self._changes, code)
        except redis.RedisError:
            pass
        return got

    def change_waiter(self) -> Callable[[float], set[str]]:
        """``wait(timeout_s)``: the codes of rooms written since the last call (Redis
        pub/sub on ``<prefix>:changes``), blocking up to ``timeout_s`` for the first one;
        one subscription per call of this method (the push hub's thread holds one)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self._changes)

        def wait(timeout_s: float) -> set[str]:
            codes: set[str] = set()
            msg = pubsub.get_message(timeout=timeout_s)
            while msg is not None:
                codes.add(str(msg["data"]))
                msg = pubsub.get_message(timeout=0)
            return codes

        return wait

    def _check(self, status: str) -> None:
        """Raise the :class:`RoomError` a script's status names (``ok`` / ``same``: none)."""
        if status in ("ok", "same"):
            return
        if status == "room_question":
            raise question_error()
        if status == "room_vote":
            raise vote_error()
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
        """Check the key here (the teacher's or the co-teacher's, constant time), then run
        the teacher script ``name``."""
        self._role(code, key_hash, now)
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
            pipe.hgetall(meta).hgetall(students).hgetall(answers).hvals(self._keys(code)[5])
            room, seen, given, firsts = pipe.execute()
        if not room or float(room["expires_at"]) <= now:
            raise RoomError("room_unknown")
        question = question_of(room)
        choices = [int(c) for c in given.values()]
        counts = counts_of(choices, len(question.choices)) if question else ()
        at_revote = question is not None and question.vote == 2
        paused = room.get("paused") == "1"
        held = paused and bool(room.get("held_question"))
        cutoff = now - self.seat_ttl_s
        return RoomView(
            code=code,
            version=int(room["version"]),
            page=room["held_page"] if paused else room["page"],
            state=state_from_json(room["held_state"] if paused else room["state"]),
            question=question,
            counts=counts,
            answered=sum(counts),
            students=sum(float(t) > cutoff or s in given for s, t in seen.items()),
            expires_at=float(room["expires_at"]),
            first=counts_of([int(c) for c in firsts], len(question.choices)) if at_revote else (),
            paused=paused,
            moment=int(room.get("moment") or 0),
            held=question_of(json.loads(room["held_question"])) if held else None,
            paused_at=float(room["paused_at"]) if held else None,
        )

    def _seats(self, code: str, key_hash: str, now: float) -> list[SeatInfo]:
        meta, students, answers = self._keys(code)[:3]
        self._role(code, key_hash, now)  # the teacher's or the co-teacher's key
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hmget(meta, ["expires_at"]).hgetall(students).hkeys(answers)
            (expires_at,), seen, given = pipe.execute()
        if expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        cutoff, given = now - self.seat_ttl_s, set(given)
        seats = [
            SeatInfo(s, float(t), s in given, float(t) > cutoff or s in given)
            for s, t in seen.items()
        ]
        return sorted(seats, key=lambda seat: -seat.seen_at)

    def _remove(self, code: str, key_hash: str, student: str, now: float) -> int:
        return self._teacher("remove", code, key_hash, now, student)

    def _publish(
        self, code: str, key_hash: str, page: str, state: str, now: float, base: int | None
    ) -> int:
        return self._teacher(
            "publish", code, key_hash, now, page, state, "" if base is None else base
        )

    def _frame_keys(self, code: str) -> tuple[str, str]:
        """``…:room:C:frames`` (a hash digest → frame) and ``…:room:C:frame_order`` (the
        digests, newest first): siblings of the room's ``meta`` key (named by ``_keys``)."""
        base = self._keys(code)[0].removesuffix("meta")
        return base + "frames", base + "frame_order"

    def _put_frame(self, code: str, key_hash: str, digest: str, frame: str, now: float) -> None:
        self._role(code, key_hash, now)  # the teacher's or the co-teacher's key, else refused
        frames, order = self._frame_keys(code)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(frames, digest, frame).lrem(order, 0, digest).lpush(order, digest)
            pipe.lrange(order, KEPT_FRAMES, -1).ltrim(order, 0, KEPT_FRAMES - 1)
            pipe.pexpire(frames, self._ttl_ms()).pexpire(order, self._ttl_ms())
            old = pipe.execute()[3]
        if old:
            self.client.hdel(frames, *old)

    def _frame(self, code: str, digest: str, now: float) -> str | None:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hget(self._keys(code)[0], "expires_at").hget(self._frame_keys(code)[0], digest)
            expires_at, frame = pipe.execute()
        if expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        return frame

    def _join(self, code: str, student: str, now: float) -> None:
        cutoff = repr(now - self.seat_ttl_s)
        status = self._run("join", code, repr(now), student, self.max_students, cutoff)
        self._check(status)

    def _ask(self, code: str, key_hash: str, question: Question, now: float) -> int:
        text, n = question_json(question), len(question.choices)
        closes = "" if question.closes_at is None else repr(question.closes_at)
        return self._teacher("ask", code, key_hash, now, text, question.qid, n, closes, MAX_RESULTS)

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
        if self._role(code, key_hash, now) != "teacher":
            raise RoomError("room_co_teacher")
        expires_at = repr(now + self.ttl_s)
        args = (repr(now), key_hash, code, expires_at, self._ttl_ms(), MAX_RESULTS)
        self._check(self._run("close", code, *args))
        self.client.delete(*self._frame_keys(code), self._holders_key(code))

    def _purge(self, now: float) -> int:
        dropped = 0
        for stored in self.client.zrangebyscore(self._keys("")[3], "-inf", now):
            try:
                code = normalize_code(stored)  # our own writing, checked all the same
            except RoomError:
                continue
            dropped += int(self._run("drop", code, repr(now), code))
        return dropped
