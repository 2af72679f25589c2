"""Per-workflow admission in the Redis run store: a mixin `RedisRunStore` inherits; one Lua script decides.

Keys: `admissions:{workflow}` (hash run id -> admitted at), `admission_queue:{workflow}` (sorted set of
queued run ids by queue time). A run counts as running while its record's status is active (or, not written
yet, for 30 s); runs_per_minute counts admissions of the last 60 s.
"""

from __future__ import annotations

from collections.abc import Mapping

from ice_mcp.store.redis_schedules import RedisRoom, unavailable
from ice_mcp.store.sqlite_limits import POLL_SECONDS, UNWRITTEN_SECONDS, WINDOW_SECONDS

# KEYS[1] admissions; ARGV: now, max_concurrent, per_minute, run key prefix, window, unwritten, poll.
# Sets `wait` (nil: one more run may start now), forgetting admissions that no longer count.
_LIMIT_WAIT = """
local now, window, unwritten, prefix = tonumber(ARGV[1]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[4]
local entries = redis.call('HGETALL', KEYS[1])
local running, recent = 0, {}
for i = 1, #entries, 2 do
  local id, at = entries[i], tonumber(entries[i + 1])
  local status = redis.call('HGET', prefix .. id, 'status')
  local active = status == 'running' or status == 'input_required' or status == 'queued'
    or (not status and now - at < unwritten)
  if active then running = running + 1 end
  if at > now - window then table.insert(recent, at) elseif not active then redis.call('HDEL', KEYS[1], id) end
end
local wait = nil
if ARGV[2] ~= '' and running >= tonumber(ARGV[2]) then wait = tonumber(ARGV[7]) end
if ARGV[3] ~= '' and #recent >= tonumber(ARGV[3]) then
  table.sort(recent)
  local free = recent[#recent - tonumber(ARGV[3]) + 1] + window - now
  if not wait or free > wait then wait = free end
end
"""

# ARGV[8]: the run to admit.
_ADMIT = _LIMIT_WAIT + """
if wait then return tostring(wait) end
redis.call('HSET', KEYS[1], ARGV[8], ARGV[1])
return false
"""

# KEYS[2] the queue; ARGV[8..]: the caller's waiting runs and when each was queued, in pairs.
_ADMIT_NEXT = _LIMIT_WAIT + """
local queued = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #queued, 2 do
  local status = redis.call('HGET', prefix .. queued[i], 'status')
  if not (status == 'queued' or (not status and now - tonumber(queued[i + 1]) < unwritten)) then
    redis.call('ZREM', KEYS[2], queued[i])
  end
end
local mine = {}
for i = 8, #ARGV, 2 do
  mine[ARGV[i]] = true
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 1], ARGV[i])
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not head or not mine[head] then
  return {false, tostring(math.max(wait or 0, tonumber(ARGV[7])))}
end
if wait then return {false, tostring(wait)} end
redis.call('ZREM', KEYS[2], head)
redis.call('HSET', KEYS[1], head, ARGV[1])
return {head, '0'}
"""


class RedisLimits(RedisRoom):
    """`Admissions` (store/base.py) on Redis, each decision one script."""

    def _register_limit_scripts(self) -> None:
        self._admit = self._redis.register_script(_ADMIT)
        self._admit_next = self._redis.register_script(_ADMIT_NEXT)

    def _limit_args(self, now: float, max_concurrent: int | None, per_minute: int | None) -> list[object]:
        return [repr(float(now)), "" if max_concurrent is None else str(max_concurrent),
                "" if per_minute is None else str(per_minute), self._key("run", ""), WINDOW_SECONDS,
                UNWRITTEN_SECONDS, POLL_SECONDS]

    @unavailable
    def admit(self, workflow: str, run_id: str, now: float, *, max_concurrent: int | None,
              per_minute: int | None) -> float | None:
        """Admit a run of `workflow` if its limits allow (None), else the seconds until one may be admitted."""
        wait = self._admit(keys=[self._key("admissions", workflow)],
                           args=[*self._limit_args(now, max_concurrent, per_minute), run_id])
        return None if wait is None else float(_text(wait))

    @unavailable
    def forget_admission(self, workflow: str, run_id: str) -> None:
        """A run admitted but never made (its idempotency key had started another run first) stops counting."""
        self._redis.hdel(self._key("admissions", workflow), run_id)

    @unavailable
    def admit_next(self, workflow: str, waiting: Mapping[str, float], now: float, *, max_concurrent: int | None,
                   per_minute: int | None) -> tuple[str | None, float]:
        """The queue's first run, admitted if it is one of `waiting` and the limits allow (see SqliteLimits)."""
        head, wait = self._admit_next(keys=[self._key("admissions", workflow), self._key("admission_queue", workflow)],
                                      args=[*self._limit_args(now, max_concurrent, per_minute),
                                            *(item for pair in waiting.items() for item in (pair[0], repr(pair[1])))])
        return (None if head is None else _text(head)), float(_text(wait))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
