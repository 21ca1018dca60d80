"""Peer instruction in the Redis room store (:mod:`~specdec_core.server.rooms_peer` says
what; :class:`~specdec_core.server.rooms_redis.RedisStore` inherits this).

Fields of the room's meta hash: ``co_hash`` (the co-teacher key's SHA-256, empty for none),
``vote`` (1 / 2), ``closes_at`` (Unix s, empty for no countdown), ``paused`` (0 / 1) with
``held_page`` / ``held_state`` / ``held_question`` (its fields as JSON) / ``paused_at``
(the moment and the question followers hold). Keys (all from
``RedisStore._keys``): ``first`` (a hash seat → its first vote, at a revote), ``results``
(a list of result entries, :mod:`~specdec_core.server.room_results`), ``ended`` (an ended
room's key hashes and expiry). Each change is one Lua script on top of the teacher
prelude (:mod:`~specdec_core.server.rooms_redis_scripts`).
"""

from __future__ import annotations

from specdec_core.server.room_results import MAX_RESULTS, QuestionResult, entry_json, result_of
from specdec_core.server.room_types import Question, RoomError, key_matches, question_from_json
from specdec_core.server.rooms_redis_scripts import _ALIVE, _TEACHER

# ARGV 6: qid
_CLOSE_VOTE = (
    _TEACHER
    + """
local q = redis.call('HMGET', KEYS[1], 'qid', 'revealed', 'closes_at', 'version')
if q[1] == '' or q[1] ~= ARGV[6] or q[2] ~= '0' then return {'room_vote', 0} end
if q[3] and q[3] ~= '' and tonumber(q[3]) <= tonumber(ARGV[1]) then
  return {'ok', tonumber(q[4])}
end
redis.call('HSET', KEYS[1], 'closes_at', ARGV[1], 'closed', 1)
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV 6, 7: qid, closes_at ('' for none)
_REVOTE = (
    _TEACHER
    + """
local q = redis.call('HMGET', KEYS[1], 'qid', 'revealed', 'vote')
if q[1] == '' or q[1] ~= ARGV[6] or q[2] ~= '0' or (q[3] or '1') ~= '1' then
  return {'room_vote', 0}
end
redis.call('DEL', KEYS[6])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('RENAME', KEYS[3], KEYS[6]) end
redis.call('HSET', KEYS[1], 'vote', 2, 'closes_at', ARGV[7], 'closed', 0)
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV 6: '1' pause, '0' resume
_PAUSE = (
    _TEACHER
    + """
local m = redis.call('HMGET', KEYS[1], 'paused', 'page', 'state', 'version')
if (m[1] or '0') == ARGV[6] then return {'ok', tonumber(m[4])} end
if ARGV[6] == '1' then
  local q = redis.call('HMGET', KEYS[1], 'question', 'revealed', 'correct', 'vote', 'closes_at')
  local held = cjson.encode({question = q[1] or '', revealed = q[2] or '0', correct = q[3] or '',
    vote = q[4] or '1', closes_at = q[5] or ''})
  redis.call('HSET', KEYS[1], 'paused', 1, 'held_page', m[2], 'held_state', m[3],
    'held_question', held, 'paused_at', ARGV[1])
else
  local c = redis.call('HMGET', KEYS[1], 'closes_at', 'paused_at')
  local closes, at = tonumber(c[1] or ''), tonumber(c[2] or '')
  if closes and at and closes > at then  -- the countdown goes on with the time it had left
    redis.call('HSET', KEYS[1], 'closes_at', string.format('%.6f', closes + ARGV[1] - at))
  end
  redis.call('HSET', KEYS[1], 'paused', 0, 'held_page', '', 'held_state', '',
    'held_question', '', 'paused_at', '')
end
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV: now, key_hash (the teacher's own), co_hash
_CO_KEY = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return 'room_unknown' end
local held = redis.call('HMGET', KEYS[1], 'key_hash', 'co_hash')
if held[2] == ARGV[2] then return 'room_co_teacher' end
if held[1] ~= ARGV[2] then return 'room_key' end
redis.call('HSET', KEYS[1], 'co_hash', ARGV[3])
return 'ok'
"""
)

PEER_SCRIPTS = {
    "close_vote": _CLOSE_VOTE,
    "revote": _REVOTE,
    "pause": _PAUSE,
    "co_key": _CO_KEY,
}


def question_of(room: dict[str, str]) -> Question | None:
    """The room's question from its meta hash (``None``: none asked)."""
    if not room.get("question"):
        return None
    asked = question_from_json(room["question"])
    correct, closes = room.get("correct", ""), room.get("closes_at", "")
    return Question(
        qid=asked.qid,
        kind=asked.kind,
        params=asked.params,
        choices=asked.choices,
        correct=int(correct) if correct else None,
        revealed=room.get("revealed") == "1",
        vote=2 if room.get("vote") == "2" else 1,
        closes_at=float(closes) if closes else None,
        closed=room.get("closed") == "1",
    )


class RedisPeer:
    """The peer-instruction backend methods; uses the store's ``client``, ``_keys``,
    ``_teacher``, ``_run`` and ``_check``."""

    def _close_vote(self, code: str, key_hash: str, qid: str, now: float) -> int:
        return self._teacher("close_vote", code, key_hash, now, qid)

    def _revote(
        self, code: str, key_hash: str, qid: str, closes_at: float | None, now: float
    ) -> int:
        closes = "" if closes_at is None else repr(closes_at)
        return self._teacher("revote", code, key_hash, now, qid, closes)

    def _pause(self, code: str, key_hash: str, paused: bool, now: float) -> int:
        return self._teacher("pause", code, key_hash, now, "1" if paused else "0")

    def _co_key(self, code: str, key_hash: str, co_hash: str, now: float) -> None:
        self._check(self._run("co_key", code, repr(now), key_hash, co_hash))

    def _role(self, code: str, key_hash: str, now: float) -> str:
        fields = ["key_hash", "co_hash", "expires_at"]
        stored, co, expires_at = self.client.hmget(self._keys(code)[0], fields)
        if expires_at is None or float(expires_at) <= now:
            raise RoomError("room_unknown")
        teacher, co_teacher = key_matches(key_hash, stored), key_matches(key_hash, co or None)
        if not teacher | co_teacher:
            raise RoomError("room_key")
        return "teacher" if teacher else "co"

    def _ended(self, code: str, now: float) -> bool:
        expires_at = self.client.hget(self._keys(code)[7], "expires_at")
        return expires_at is not None and float(expires_at) > now

    def _results(self, code: str, key_hash: str, now: float) -> list[QuestionResult]:
        meta, _, answers, _, _, first, results, ended = self._keys(code)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hgetall(meta).hvals(answers).hvals(first).lrange(results, 0, -1)
            pipe.hgetall(ended)
            room, given, firsts, entries, gone = pipe.execute()
        live = bool(room) and float(room["expires_at"]) > now
        held = room if live else gone
        if not held or float(held.get("expires_at", 0)) <= now:
            raise RoomError("room_unknown")
        co = held.get("co_hash") or None
        if not key_matches(key_hash, held.get("key_hash")) | key_matches(key_hash, co):
            raise RoomError("room_key")
        question = question_of(room) if live else None
        if question is not None:
            entries.append(entry_json(question, [int(c) for c in given], [int(c) for c in firsts]))
        return [result_of(e) for e in entries[-MAX_RESULTS:]]
