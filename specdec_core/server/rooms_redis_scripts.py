"""The Lua scripts of the Redis room store (:mod:`specdec_core.server.rooms_redis`): every
read-modify-write of a room is one script, atomic in Redis, taking the room's keys as
``KEYS`` (meta, students, answers, index, removed, first, results, ended; the creation
script also the client's two keys) and every value as ``ARGV``; peer instruction's own
scripts: :mod:`~specdec_core.server.rooms_redis_peer`. :data:`SCRIPTS` names them for
``register_script``.
"""

from __future__ import annotations

#: The room's KEYS: meta, students, answers, index, removed, first (the first vote at a
#: revote), results (one entry per question, ``room_results``), ended. ``alive`` leaves
#: ``false`` when the room is missing or expired at ARGV ``now``; ``archive`` keeps the
#: result of the room's question (at most ``max`` entries).
_ALIVE = """
local function alive(now)
  local exp = redis.call('HGET', KEYS[1], 'expires_at')
  return exp and tonumber(exp) > now
end
local function keep(ttl_ms)
  for _, i in ipairs({1, 2, 3, 5, 6, 7}) do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
local function follow(key)
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
local function archive(max)
  local q = redis.call('HMGET', KEYS[1], 'question', 'revealed', 'correct', 'vote')
  if not q[1] or q[1] == '' then return end
  local entry = cjson.encode({q = q[1], revealed = q[2] or '0', correct = q[3] or '',
    vote = q[4] or '1', a = redis.call('HVALS', KEYS[3]), f = redis.call('HVALS', KEYS[6])})
  redis.call('RPUSH', KEYS[7], entry)
  redis.call('LTRIM', KEYS[7], -tonumber(max), -1)
  follow(KEYS[7])
end
"""

# KEYS 9, 10: the client's rooms and creations. ARGV: code, key_hash, now, expires_at,
# ttl_ms, limited (0/1), rooms per client, rooms per hour, max rooms
_CREATE = """
local now = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now - 3600)
if ARGV[6] == '1' then
  local mine = 0
  for _, c in ipairs(redis.call('ZRANGE', KEYS[9], 0, -1)) do
    local exp = redis.call('ZSCORE', KEYS[4], c)
    if exp and tonumber(exp) > now then mine = mine + 1 else redis.call('ZREM', KEYS[9], c) end
  end
  if mine >= tonumber(ARGV[7]) then return 'rooms_client' end
  if redis.call('ZCARD', KEYS[10]) >= tonumber(ARGV[8]) then return 'rooms_hour' end
  if redis.call('ZCOUNT', KEYS[4], '(' .. ARGV[3], '+inf') >= tonumber(ARGV[9]) then
    return 'rooms_full'
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'taken' end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('HSET', KEYS[1], 'key_hash', ARGV[2], 'version', 1, 'page', 'step',
  'state', '{}', 'question', '', 'qid', '', 'nchoices', 0, 'revealed', 0, 'correct', '',
  'expires_at', ARGV[4], 'co_hash', '', 'vote', 1, 'closes_at', '', 'paused', 0,
  'held_page', '', 'held_state', '', 'moment', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[9], now, ARGV[1])
redis.call('PEXPIRE', KEYS[9], ARGV[5])
redis.call('ZADD', KEYS[10], now, ARGV[1])
redis.call('PEXPIRE', KEYS[10], 3600000)
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
local q = redis.call('HMGET', KEYS[1], 'qid', 'nchoices', 'revealed', 'closes_at', 'closed')
if q[1] == '' or q[1] ~= ARGV[3] or q[3] ~= '0' then return 'room_answer' end
if tonumber(ARGV[4]) >= tonumber(q[2]) then return 'room_answer' end
if q[4] and q[4] ~= '' and tonumber(ARGV[1]) >= tonumber(q[4]) then
  return q[5] == '1' and 'room_closed' or 'room_time_up'
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[4] then return 'same' end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
follow(KEYS[3])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return 'ok'
"""
)

#: The start of every teacher script (the teacher's or the co-teacher's key). ARGV: now,
#: key_hash, expires_at, ttl_ms, code.
_TEACHER = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return {'room_unknown', 0} end
local held = redis.call('HMGET', KEYS[1], 'key_hash', 'co_hash')
if held[1] ~= ARGV[2] and held[2] ~= ARGV[2] then return {'room_key', 0} end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[3])
keep(tonumber(ARGV[4]))
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[5])
"""
)

# ARGV 6, 7, 8: page, state, base ('' for none: the compare-and-set's version)
_PUBLISH = (
    _TEACHER
    + """
local now = redis.call('HMGET', KEYS[1], 'page', 'state', 'version', 'moment')
if now[1] == ARGV[6] and now[2] == ARGV[7] then return {'ok', tonumber(now[3])} end
if ARGV[8] ~= '' and tonumber(now[4] or '0') > tonumber(ARGV[8]) then
  return {'room_moved', 0}
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'page', ARGV[6], 'state', ARGV[7], 'moment', version)
return {'ok', version}
"""
)

# ARGV 6..10: question JSON, qid, number of choices, closes_at ('' for none), max results
_ASK = (
    _TEACHER
    + """
archive(ARGV[10])
redis.call('DEL', KEYS[3], KEYS[6])
redis.call('HSET', KEYS[1], 'question', ARGV[6], 'qid', ARGV[7], 'nchoices', ARGV[8],
  'revealed', 0, 'correct', '', 'vote', 1, 'closes_at', ARGV[9], 'closed', 0)
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
redis.call('HDEL', KEYS[6], ARGV[6])
redis.call('SADD', KEYS[5], ARGV[6])
follow(KEYS[5])
return {'ok', redis.call('HINCRBY', KEYS[1], 'version', 1)}
"""
)

# ARGV: now, key_hash, code, expires_at, ttl_ms, max results. The results stay until the
# room's expiry, with the key hashes that read them (``ended``).
_CLOSE = (
    _ALIVE
    + """
if not alive(tonumber(ARGV[1])) then return 'room_unknown' end
local held = redis.call('HMGET', KEYS[1], 'key_hash', 'co_hash')
if held[1] ~= ARGV[2] then return 'room_key' end
archive(ARGV[6])
redis.call('HSET', KEYS[8], 'key_hash', held[1], 'co_hash', held[2] or '', 'expires_at', ARGV[4])
redis.call('PEXPIRE', KEYS[8], ARGV[5])
redis.call('PEXPIRE', KEYS[7], ARGV[5])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6])
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
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('ZREM', KEYS[4], ARGV[2])
return exp and 1 or 0
"""

#: Every script by the name :class:`~specdec_core.server.rooms_redis.RedisStore` runs it.
SCRIPTS: dict[str, str] = {
    "create": _CREATE,
    "join": _JOIN,
    "answer": _ANSWER,
    "publish": _PUBLISH,
    "ask": _ASK,
    "reveal": _REVEAL,
    "remove": _REMOVE,
    "close": _CLOSE,
    "drop": _DROP,
}
