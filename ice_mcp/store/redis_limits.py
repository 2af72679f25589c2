"""Per-workflow admission in the Redis run store: a mixin `RedisRunStore` inherits; one Lua script decides.

Key: `admissions:{workflow}` (hash run id -> admitted at). A run counts as running while its record's status
is active (or, not written yet, for 30 s); runs_per_minute counts admissions of the last 60 s.
"""

from __future__ import annotations

from ice_mcp.store.redis_schedules import RedisRoom, unavailable
from ice_mcp.store.sqlite_limits import UNWRITTEN_SECONDS, WINDOW_SECONDS

_ADMIT = """
local now, window, unwritten = tonumber(ARGV[1]), tonumber(ARGV[6]), tonumber(ARGV[7])
local entries = redis.call('HGETALL', KEYS[1])
local running, recent = 0, {}
for i = 1, #entries, 2 do
  local id, at = entries[i], tonumber(entries[i + 1])
  local status = redis.call('HGET', ARGV[5] .. id, 'status')
  local active = status == 'running' or status == 'input_required' or (not status and now - at < unwritten)
  if active then running = running + 1 end
  if at > now - window then table.insert(recent, at) elseif not active then redis.call('HDEL', KEYS[1], id) end
end
local wait = nil
if ARGV[3] ~= '' and running >= tonumber(ARGV[3]) then wait = 1.0 end
if ARGV[4] ~= '' and #recent >= tonumber(ARGV[4]) then
  table.sort(recent)
  local free = recent[#recent - tonumber(ARGV[4]) + 1] + window - now
  if not wait or free > wait then wait = free end
end
if wait then return tostring(wait) end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[1])
return false
"""


class RedisLimits(RedisRoom):

    def _register_limit_scripts(self) -> None:
        self._admit = self._redis.register_script(_ADMIT)

    @unavailable
    def admit(self, workflow: str, run_id: str, now: float, *, max_concurrent: int | None,
              per_minute: int | None) -> float | None:
        """Admit a run of `workflow` if its limits allow (None), else the seconds until one may be admitted."""
        wait = self._admit(keys=[self._key("admissions", workflow)], args=[
            repr(float(now)), run_id, "" if max_concurrent is None else str(max_concurrent),
            "" if per_minute is None else str(per_minute), self._key("run", ""), WINDOW_SECONDS, UNWRITTEN_SECONDS])
        return None if wait is None else float(wait.decode() if isinstance(wait, bytes) else wait)
