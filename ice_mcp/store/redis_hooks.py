"""Webhooks and their deliveries in the Redis run store: a mixin `RedisRunStore` inherits.

Keys: `hooks` (hash: id -> the hook as JSON) and `deliveries:{hook_id}` (hash: delivery id -> run id,
each set once with HSETNX, so the first run a delivery started is the one every server answers with).
"""

from __future__ import annotations

import builtins

from ice_mcp.store.hooks import HookRecord
from ice_mcp.store.redis_schedules import RedisRoom, unavailable


class RedisHooks(RedisRoom):
    """`HookStore` (store/base.py) on Redis."""

    @unavailable
    def save_hook(self, hook: HookRecord) -> None:
        self._save_body("hooks", hook.id, hook.to_json())

    @unavailable
    def hook(self, hook_id: str) -> HookRecord | None:
        body = self._body("hooks", hook_id)
        return None if body is None else HookRecord.from_json(body)

    @unavailable
    def hooks(self) -> builtins.list[HookRecord]:
        return [HookRecord.from_json(body) for body in self._bodies("hooks")]

    @unavailable
    def delete_hook(self, hook_id: str) -> bool:
        """Delete a hook and the record of its deliveries (their runs stay)."""
        pipe = self._redis.pipeline()
        pipe.hdel(self._key("hooks"), hook_id)
        pipe.delete(self._key("deliveries", hook_id))
        deleted, _ = pipe.execute()
        return bool(deleted)

    @unavailable
    def delivery_run(self, hook_id: str, delivery_id: str) -> str | None:
        run_id = self._redis.hget(self._key("deliveries", hook_id), delivery_id)
        return None if run_id is None else (run_id.decode() if isinstance(run_id, bytes) else str(run_id))

    @unavailable
    def note_delivery(self, hook_id: str, delivery_id: str, run_id: str) -> str:
        """Keep the run a delivery started, unless one is kept already: the run id kept (for good)."""
        key = self._key("deliveries", hook_id)
        self._redis.hsetnx(key, delivery_id, run_id)
        kept = self._redis.hget(key, delivery_id)
        return kept.decode() if isinstance(kept, bytes) else str(kept)
