"""Webhooks with their deliveries, and notification targets with the outbox, in the PostgreSQL run store: mixins
`PostgresRunStore` inherits. A due outbox entry is claimed `FOR UPDATE SKIP LOCKED` and leased by moving its
`next_at`: one sender takes it, others skip it without waiting; a sender that dies leaves it due once the lease ends."""

from __future__ import annotations

import builtins
import time

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.hooks import HookRecord
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.postgres_room import PgRoom


class PgHooks(PgRoom):
    """`HookStore` (store/base.py): each call one statement, seen by every process at once."""

    def save_hook(self, hook: HookRecord) -> None:
        self._save_body("hooks", hook.id, hook.to_json())

    def hook(self, hook_id: str) -> HookRecord | None:
        body = self._body("hooks", hook_id)
        return None if body is None else HookRecord.from_json(body)

    def hooks(self) -> builtins.list[HookRecord]:
        return [HookRecord.from_json(body) for body in self._bodies("hooks")]

    def delete_hook(self, hook_id: str) -> bool:
        """Delete a hook and the record of its deliveries (their runs stay)."""
        return self._delete_body("hooks", hook_id, also="deliveries", column="hook_id")

    def delivery_run(self, hook_id: str, delivery_id: str) -> str | None:
        row = self._one("SELECT run_id FROM deliveries WHERE hook_id = %s AND delivery_id = %s", (hook_id, delivery_id))
        return None if row is None else str(row[0])

    def note_delivery(self, hook_id: str, delivery_id: str, run_id: str) -> str:
        """Keep the run a delivery started, unless one is kept already: the run id kept (for good)."""
        while True:
            if self._one("INSERT INTO deliveries (hook_id, delivery_id, run_id, received_at) VALUES (%s, %s, %s, %s)"
                         " ON CONFLICT (hook_id, delivery_id) DO NOTHING RETURNING run_id",
                         (hook_id, delivery_id, run_id, time.time())) is not None:
                return run_id
            # A statement of its own: one that also read would see the racing insert's row only in its own snapshot,
            # taken before that insert committed (it read nothing, and two runs were kept).
            kept = self.delivery_run(hook_id, delivery_id)
            if kept is not None:
                return kept


class PgOutbox(PgRoom):
    """`Outbox` (store/base.py); a claim is one transaction over rows no other sender holds."""

    def save_target(self, target: NotifyTarget) -> None:
        self._save_body("notify_targets", target.id, target.to_json())

    def target(self, target_id: str) -> NotifyTarget | None:
        body = self._body("notify_targets", target_id)
        return None if body is None else NotifyTarget.from_json(body)

    def targets(self) -> builtins.list[NotifyTarget]:
        return [NotifyTarget.from_json(body) for body in self._bodies("notify_targets")]

    def delete_target(self, target_id: str) -> bool:
        return self._delete_body("notify_targets", target_id, also="outbox", column="target_id")

    def enqueue(self, entries: builtins.list[OutboxEntry]) -> None:
        """Add entries; one already there for the same event and target stays as it is."""
        if not entries:
            return
        with self._conn() as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO outbox (event_id, target_id, state, next_at, created_at, body)"
                            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (event_id, target_id) DO NOTHING",
                            [(e.event_id, e.target_id, e.state, e.next_at, e.created_at, dumps(e.to_json()))
                             for e in entries])

    def claim_due(self, now: float, lease_seconds: float, limit: int = 50) -> builtins.list[OutboxEntry]:
        """Pending entries due by `now`, each now leased to the caller (due again `lease_seconds` later)."""
        rows = self._rows("UPDATE outbox SET next_at = %s WHERE (event_id, target_id) IN (SELECT event_id, target_id"
                          " FROM outbox WHERE state = 'pending' AND next_at <= %s ORDER BY next_at LIMIT %s"
                          " FOR UPDATE SKIP LOCKED) RETURNING body, next_at",
                          (now + lease_seconds, now, limit))
        claimed = [OutboxEntry.from_json(loads(body)) for body, _ in rows]
        return sorted(claimed, key=lambda entry: entry.next_at)

    def settle(self, entry: OutboxEntry) -> None:
        """Write an entry back after an attempt (its state, next time and attempt log)."""
        self._exec("UPDATE outbox SET state = %s, next_at = %s, body = %s WHERE event_id = %s AND target_id = %s",
                   (entry.state, entry.next_at, dumps(entry.to_json()), entry.event_id, entry.target_id))

    def outbox(self, target_id: str, limit: int = 50) -> builtins.list[OutboxEntry]:
        """A target's entries, newest first."""
        rows = self._rows("SELECT body FROM outbox WHERE target_id = %s ORDER BY created_at DESC LIMIT %s",
                          (target_id, limit))
        return [OutboxEntry.from_json(loads(row[0])) for row in rows]
