"""Schedules and their firings in the Redis run store, as a mixin `RedisRunStore` inherits; each write is atomic."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import redis

from ice_mcp.errors import IceError
from ice_mcp.store.base import dumps, loads
from ice_mcp.store.schedules import Firing, Outcome, ScheduleRecord, counts_of, stale_revision

T = TypeVar("T")
P = ParamSpec("P")
_PAGE = 200
_DEFINITION = ("id", "target", "target_kind", "spec", "inputs", "policy", "paused", "note", "origin", "principal")

_NOW = "local t = redis.call('TIME')\nlocal now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))\n"
# Create a schedule (ARGV[5]: its cursor, '' for none; ARGV[6]: running; then outcome, count pairs) or
# replace its definition, adding one to the generation KEYS[3]; if ARGV[2] names another revision than the
# stored one, write nothing.
_SAVE_SCHEDULE = """
local rev = redis.call('HGET', KEYS[1], 'revision')
if ARGV[2] ~= '' and rev ~= ARGV[2] then return {0, rev or '0'} end
""" + _NOW + """
if rev then
  redis.call('HSET', KEYS[1], 'def', ARGV[3], 'target', ARGV[4], 'updated_at', now)
  redis.call('HINCRBY', KEYS[1], 'revision', 1)
else
  redis.call('HSET', KEYS[1], 'def', ARGV[3], 'target', ARGV[4], 'revision', 1, 'created_at', now,
             'updated_at', now, 'running', ARGV[6])
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'cursor', ARGV[5]) end
  for i = 7, #ARGV, 2 do redis.call('HSET', KEYS[1], 'n:' .. ARGV[i], ARGV[i + 1]) end
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('INCR', KEYS[3])
return {1, redis.call('HGETALL', KEYS[1])}
"""
# Count firings by outcome in KEYS[1] (`pairs`: outcome, change, ...), dropping outcomes at 0.
_COUNT = """
local function count(pairs)
  for i = 1, #pairs, 2 do
    if redis.call('HINCRBY', KEYS[1], 'n:' .. pairs[i], pairs[i + 1]) == 0 then
      redis.call('HDEL', KEYS[1], 'n:' .. pairs[i])
    end
  end
end
"""
# Record firings (slot, JSON pairs from ARGV[6 + 2 * ARGV[5]]) if none of their slots is decided; with
# ARGV[1] = '1' only if the cursor is still ARGV[2] ('' for none), and move it to ARGV[3]. ARGV[4]: running
# ('' keeps it); ARGV[5] outcome, count pairs follow it.
_FIRE = _COUNT + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '1' and (redis.call('HGET', KEYS[1], 'cursor') or '') ~= ARGV[2] then return 0 end
local first = 6 + 2 * tonumber(ARGV[5])
local seen = {}
for i = first, #ARGV, 2 do
  if seen[ARGV[i]] or redis.call('HEXISTS', KEYS[3], ARGV[i]) == 1 then return 0 end
  seen[ARGV[i]] = true
end
for i = first, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i])
end
if ARGV[1] == '1' then redis.call('HSET', KEYS[1], 'cursor', ARGV[3]) end
local counts = {}
for i = 6, first - 1 do counts[#counts + 1] = ARGV[i] end
count(counts)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'running', ARGV[4]) end
return 1
"""
# Change the firing at slot ARGV[1] from outcome ARGV[2] to ARGV[3] (run id ARGV[4] unless ''; fired now).
_UPDATE_FIRING = _COUNT + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local text = redis.call('HGET', KEYS[2], ARGV[1])
if not text then return 0 end
local firing = cjson.decode(text)
if firing['outcome'] ~= ARGV[2] then return 0 end
""" + _NOW + """
firing['outcome'] = ARGV[3]
if ARGV[4] ~= '' then firing['run_id'] = ARGV[4] end
firing['fired_at'] = now
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(firing))
local n = string.format('%d', firing['count'])
count({ARGV[2], '-' .. n, ARGV[3], n})
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'running', ARGV[5]) end
return 1
"""
_NOTE_SCHEDULER = """
local at = redis.call('GET', KEYS[1])
if not at or tonumber(ARGV[1]) > tonumber(at) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""


class _Located(Protocol):
    location: str


S = TypeVar("S", bound=_Located)


def unavailable(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Redis errors leave the store as one clear IceError (code `state_unavailable`), never a traceback."""

    @functools.wraps(method)
    def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except redis.RedisError as exc:
            raise IceError(f"the state store at {self.location} did not answer: {type(exc).__name__}: {exc}",
                           code="state_unavailable") from None

    return call


class RedisRoom:
    """What every Redis mixin of the store uses: the client, the key prefix and where the store is."""

    _redis: Any
    prefix: str
    location: str

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def _save_body(self, table: str, key: str, body: Any) -> None:
        """Keep `body` as JSON under `key` in the hash `table` (webhooks, notification targets)."""
        self._redis.hset(self._key(table), key, dumps(body))

    def _body(self, table: str, key: str) -> Any | None:
        text = self._redis.hget(self._key(table), key)
        return None if text is None else loads(text)

    def _bodies(self, table: str) -> list[Any]:
        """Every body of the hash `table`, in the order of their keys."""
        found = self._redis.hgetall(self._key(table))
        return [loads(found[key]) for key in sorted(found)]


def _float(value: float | None) -> str:
    """A float as text that reads back to the same float ('' for None)."""
    return "" if value is None else repr(float(value))


def _time(text: bytes | str) -> float:
    return float(text.decode() if isinstance(text, bytes) else text)


def _schedule(fields: dict[bytes, bytes]) -> ScheduleRecord:
    definition = loads(fields[b"def"])
    counts = {key[2:].decode(): int(n) for key, n in fields.items() if key.startswith(b"n:")}
    cursor = fields.get(b"cursor")
    return ScheduleRecord(**definition, revision=int(fields[b"revision"]), created_at=_time(fields[b"created_at"]),
                          updated_at=_time(fields[b"updated_at"]), cursor=None if cursor is None else _time(cursor),
                          running=loads(fields[b"running"]), counts=dict(sorted(counts.items())))


def _firing_json(firing: Firing) -> str:
    return dumps({"slot": _float(firing.slot), "outcome": firing.outcome, "run_id": firing.run_id,
                  "fired_at": _float(firing.fired_at), "replica": firing.replica, "count": int(firing.count)})


def _firing(schedule_id: str, text: bytes) -> Firing:
    data = loads(text)
    return Firing(schedule_id, _time(data["slot"]), data["outcome"], data["run_id"], _time(data["fired_at"]),
                  data["replica"], int(data["count"]))


def _pairs(counts: dict[str, int]) -> builtins.list[Any]:
    return [item for outcome, n in counts.items() if n for item in (outcome, n)]


class RedisSchedules(RedisRoom):
    """`ScheduleStore` (store/base.py) on Redis; `_register_schedule_scripts` runs in the store's __init__.

    Layout (under the store's prefix):
      schedule:{id}      hash: def (the definition's JSON), target, revision, created_at, updated_at, cursor
                         (absent: None), running (JSON), n:{outcome} (firings by outcome, 0s left out)
      schedules          set of schedule ids
      firings:{id}       sorted set of slots (member repr(slot), score slot): newest first is one range read
      firing:{id}        hash repr(slot) -> the firing's JSON, its times as repr strings (so a script's cjson
                         never rounds them)
      scheduler_alive    the latest time a firing loop noted
      schedules_generation  a counter every save and delete of a schedule adds one to
    Floats are kept as `repr` text, which reads back to the same float: a cursor compares exactly.
    Times the store sets come from Redis `TIME`, the clock every replica shares.
    """

    def _register_schedule_scripts(self) -> None:
        self._save_schedule = self._redis.register_script(_SAVE_SCHEDULE)
        self._fire = self._redis.register_script(_FIRE)
        self._update_firing = self._redis.register_script(_UPDATE_FIRING)
        self._note_scheduler = self._redis.register_script(_NOTE_SCHEDULER)

    def _schedule_keys(self, schedule_id: str) -> builtins.list[str]:
        return [self._key("schedule", schedule_id), self._key("firings", schedule_id),
                self._key("firing", schedule_id)]

    @unavailable
    def now(self) -> float:
        """Redis's clock (TIME), which every replica on the store shares."""
        seconds, micros = self._redis.time()
        return float(f"{seconds}.{micros:06d}")

    @unavailable
    def save_schedule(self, schedule: ScheduleRecord, *, if_revision: int | None = None) -> ScheduleRecord:
        """Create a schedule (revision 1) or replace its definition (revision + 1, its cursor, running runs
        and counts kept); StaleRevision, nothing written, if `if_revision` is not the stored revision."""
        definition = {name: getattr(schedule, name) for name in _DEFINITION}
        saved, answer = self._save_schedule(
            keys=[self._key("schedule", schedule.id), self._key("schedules"), self._key("schedules_generation")],
            args=[schedule.id, "" if if_revision is None else str(int(if_revision)), dumps(definition),
                  schedule.target, _float(schedule.cursor), dumps(list(schedule.running)),
                  *_pairs(schedule.counts)])
        if not saved:
            current = int(answer)
            raise stale_revision(schedule.id, current or None, int(if_revision or 0))
        return _schedule(dict(zip(answer[::2], answer[1::2], strict=True)))

    @unavailable
    def schedule(self, schedule_id: str) -> ScheduleRecord | None:
        fields = self._redis.hgetall(self._key("schedule", schedule_id))
        return _schedule(fields) if fields else None

    @unavailable
    def schedules(self, *, target: str | None = None) -> builtins.list[ScheduleRecord]:
        """Every schedule (only those of `target`, when given), by id."""
        ids = sorted(i.decode() for i in self._redis.smembers(self._key("schedules")))
        pipe = self._redis.pipeline(transaction=False)
        for schedule_id in ids:
            pipe.hgetall(self._key("schedule", schedule_id))
        found = [_schedule(fields) for fields in (pipe.execute() if ids else [])
                 if fields and (target is None or fields.get(b"target") == target.encode())]
        return found

    @unavailable
    def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and its firings; False if there was none."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.srem(self._key("schedules"), schedule_id)
        pipe.delete(*self._schedule_keys(schedule_id))
        pipe.incr(self._key("schedules_generation"))
        return bool(pipe.execute()[0])

    @unavailable
    def schedules_generation(self) -> int:
        """A number that changes whenever a schedule is saved or deleted, by any process on the store."""
        return int(self._redis.get(self._key("schedules_generation")) or 0)

    @unavailable
    def advance(self, schedule_id: str, expected_cursor: float | None, cursor: float,
                firings: builtins.list[Firing], running: builtins.list[str] | None = None) -> bool:
        """Record `firings` and move the cursor to `cursor`, if it is still `expected_cursor` and none of
        their slots was decided: the one claim of those slots. False, nothing written, otherwise."""
        strays = {f.schedule_id for f in firings} - {schedule_id}
        if strays:
            raise ValueError(f"firings of {sorted(strays)} given to advance schedule {schedule_id!r}")
        return self._record(schedule_id, firings, running, check=True, expected=_float(expected_cursor),
                            cursor=_float(cursor))

    @unavailable
    def add_firing(self, firing: Firing, running: builtins.list[str] | None = None) -> bool:
        """Record one firing outside the cursor (a manual trigger, a backfill slot); False if its slot
        was decided or the schedule is gone."""
        return self._record(firing.schedule_id, [firing], running, check=False, expected="", cursor="")

    def _record(self, schedule_id: str, firings: builtins.list[Firing], running: builtins.list[str] | None, *,
                check: bool, expected: str, cursor: str) -> bool:
        counts = _pairs(counts_of(firings))
        args = ["1" if check else "0", expected, cursor, "" if running is None else dumps(list(running)),
                len(counts) // 2, *counts]
        for firing in firings:
            args += [_float(firing.slot), _firing_json(firing)]
        return bool(self._fire(keys=self._schedule_keys(schedule_id), args=args))

    @unavailable
    def update_firing(self, schedule_id: str, slot: float, *, expected: Outcome, outcome: Outcome,
                      run_id: str | None = None, running: builtins.list[str] | None = None) -> bool:
        """Change a firing's outcome from `expected` to `outcome` (its run id when given, fired now);
        False, nothing written, if it is missing or its outcome is another."""
        keys = [self._key("schedule", schedule_id), self._key("firing", schedule_id)]
        return bool(self._update_firing(keys=keys, args=[_float(slot), expected, outcome, run_id or "",
                                                         "" if running is None else dumps(list(running))]))

    @unavailable
    def firings(self, schedule_id: str, *, limit: int = 10, outcome: str | None = None) -> builtins.list[Firing]:
        """A schedule's firings, newest slot first (only those with `outcome`, when given)."""
        found: builtins.list[Firing] = []
        start, page = 0, limit if outcome is None else max(limit, _PAGE)
        while len(found) < limit:
            slots = self._redis.zrevrange(self._key("firings", schedule_id), start, start + page - 1)
            if not slots:
                break
            start += len(slots)
            for text in self._redis.hmget(self._key("firing", schedule_id), slots):
                if text is not None:
                    firing = _firing(schedule_id, text)
                    if outcome is None or firing.outcome == outcome:
                        found.append(firing)
        return found[:limit]

    @unavailable
    def firing(self, schedule_id: str, slot: float) -> Firing | None:
        """The firing of one slot (a `missed` or `paused` row only by the last slot of its stretch)."""
        text = self._redis.hget(self._key("firing", schedule_id), _float(slot))
        return None if text is None else _firing(schedule_id, text)

    @unavailable
    def note_scheduler(self, at: float) -> None:
        """Note that a firing loop ran at `at` (the latest time noted stays)."""
        self._note_scheduler(keys=[self._key("scheduler_alive")], args=[_float(at)])

    @unavailable
    def scheduler_alive_at(self) -> float | None:
        at = self._redis.get(self._key("scheduler_alive"))
        return None if at is None else _time(at)
