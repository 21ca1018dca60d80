"""The seats of the Redis room store (:mod:`specdec_core.server.rooms_redis`) many at a
time: the push hub's heartbeats (the join script per seat, one pipeline) and the seats'
holders (the rule: :mod:`specdec_core.server.room_seats`): ``…:room:C:holders``, a hash
student → ``holder|seen`` (the client's tag, Unix s), living as long as the room. Mixed
into ``RedisStore``, which supplies ``client``, ``_keys``, ``_role``, ``_scripts``,
``_changes``, ``max_students`` and ``seat_ttl_s``."""

from __future__ import annotations

from contextlib import suppress

import redis

from specdec_core.server.room_types import RoomError

# KEYS: meta, holders. ARGV: now, lease, then student, holder pairs. Returns the refused
# seats as student, seconds-left pairs (``room_unknown`` alone: no live room).
HOLD = """
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local exp = redis.call('HGET', KEYS[1], 'expires_at')
if not exp or tonumber(exp) <= now then return {'room_unknown'} end
local out = {}
for i = 3, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[2], ARGV[i])
  local sep = v and string.find(v, '|', 1, true)
  local who, at = v and string.sub(v, 1, sep - 1), v and tonumber(string.sub(v, sep + 1)) or 0
  if v and who ~= ARGV[i + 1] and now - at < lease then
    table.insert(out, ARGV[i])
    table.insert(out, tostring(at + lease - now))
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1] .. '|' .. ARGV[1])
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return out
"""
SEAT_SCRIPTS = {"hold": HOLD}


class RedisSeats:
    def _heartbeats(self, code: str, students: list[str], now: float) -> dict[str, str]:
        """The join script for each seat in one pipeline (one round trip, one announcement)."""
        cutoff, keys = repr(now - self.seat_ttl_s), self._keys(code)
        with self.client.pipeline(transaction=False) as pipe:
            for student in students:
                args = [repr(now), student, str(self.max_students), cutoff]
                self._scripts["join"](keys=keys, args=args, client=pipe)
            statuses = pipe.execute() if students else []
        with suppress(redis.RedisError):  # the hubs' wake-up; their polls cover a miss
            self.client.publish(self._changes, code)
        if "room_unknown" in statuses:
            raise RoomError("room_unknown")
        return {x: v for x, v in zip(students, statuses, strict=True) if v not in ("ok", "same")}

    def _holders_key(self, code: str) -> str:
        """``…:room:C:holders``: a sibling of the room's ``meta`` key (named by ``_keys``)."""
        return self._keys(code)[0].removesuffix("meta") + "holders"

    def _hold(
        self, code: str, holders: dict[str, str], now: float, lease: float
    ) -> dict[str, float]:
        args = [repr(now), repr(lease)] + [x for pair in holders.items() for x in pair]
        got = self._scripts["hold"](keys=[self._keys(code)[0], self._holders_key(code)], args=args)
        if got == ["room_unknown"]:
            raise RoomError("room_unknown")
        return {got[i]: float(got[i + 1]) for i in range(0, len(got), 2)}

    def _release(self, code: str, key_hash: str, student: str, now: float) -> None:
        self._role(code, key_hash, now)  # the teacher or the co-teacher, else refused
        self.client.hdel(self._holders_key(code), student)
