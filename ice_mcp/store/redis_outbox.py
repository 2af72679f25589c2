"""Notification targets and the outbox in the Redis run store: a mixin `RedisRunStore` inherits.

Keys: `notify_targets` (hash id -> JSON), `outbox` (hash `event|target` -> entry JSON), `outbox:due`
(sorted set of pending entries by next attempt time) and `outbox:of:{target}` (its entries by creation).
A due entry is claimed by one Lua script that moves its score past a lease: one process sends it, and
one that dies mid-send leaves it due again once the lease ends.
"""

from __future__ import annotations

import builtins

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.redis_schedules import RedisRoom, unavailable

_CLAIM_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[2], member) end
if #due == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(due))
"""


def _member(entry: OutboxEntry) -> str:
    return f"{entry.event_id}|{entry.target_id}"


class RedisOutbox(RedisRoom):
    """`Outbox` (store/base.py) on Redis."""

    def _register_outbox_scripts(self) -> None:
        self._claim_due = self._redis.register_script(_CLAIM_DUE)

    @unavailable
    def save_target(self, target: NotifyTarget) -> None:
        self._save_body("notify_targets", target.id, target.to_json())

    @unavailable
    def target(self, target_id: str) -> NotifyTarget | None:
        body = self._body("notify_targets", target_id)
        return None if body is None else NotifyTarget.from_json(body)

    @unavailable
    def targets(self) -> builtins.list[NotifyTarget]:
        return [NotifyTarget.from_json(body) for body in self._bodies("notify_targets")]

    @unavailable
    def delete_target(self, target_id: str) -> bool:
        members = self._redis.zrange(self._key("outbox", "of", target_id), 0, -1)
        pipe = self._redis.pipeline()
        if members:
            pipe.hdel(self._key("outbox"), *members)
            pipe.zrem(self._key("outbox", "due"), *members)
        pipe.delete(self._key("outbox", "of", target_id))
        pipe.hdel(self._key("notify_targets"), target_id)
        return bool(pipe.execute()[-1])

    @unavailable
    def enqueue(self, entries: builtins.list[OutboxEntry]) -> None:
        """Add entries; one already there for the same event and target stays as it is."""
        for entry in entries:
            member = _member(entry)
            if self._redis.hsetnx(self._key("outbox"), member, dumps(entry.to_json())):
                pipe = self._redis.pipeline()
                pipe.zadd(self._key("outbox", "due"), {member: entry.next_at})
                pipe.zadd(self._key("outbox", "of", entry.target_id), {member: entry.created_at})
                pipe.execute()

    @unavailable
    def claim_due(self, now: float, lease_seconds: float, limit: int = 50) -> builtins.list[OutboxEntry]:
        """Pending entries due by `now`, each now leased to the caller (due again `lease_seconds` later)."""
        found = self._claim_due(keys=[self._key("outbox", "due"), self._key("outbox")],
                                args=[repr(float(now)), repr(float(now + lease_seconds)), limit])
        return [OutboxEntry.from_json(loads(text)) for text in found if text is not None]

    @unavailable
    def settle(self, entry: OutboxEntry) -> None:
        """Write an entry back after an attempt (its state, next time and attempt log)."""
        member = _member(entry)
        pipe = self._redis.pipeline()
        pipe.hset(self._key("outbox"), member, dumps(entry.to_json()))
        if entry.state == "pending":
            pipe.zadd(self._key("outbox", "due"), {member: entry.next_at})
        else:
            pipe.zrem(self._key("outbox", "due"), member)
        pipe.execute()

    @unavailable
    def outbox(self, target_id: str, limit: int = 50) -> builtins.list[OutboxEntry]:
        """A target's entries, newest first."""
        members = self._redis.zrevrange(self._key("outbox", "of", target_id), 0, limit - 1)
        if not members:
            return []
        return [OutboxEntry.from_json(loads(t)) for t in self._redis.hmget(self._key("outbox"), members) if t]
