"""Notification targets and the outbox in the SQLite run store: a mixin `RunStore` inherits.

A due entry is claimed by moving its `next_at` past a lease in one write transaction: one process sends it;
a process that dies mid-send leaves it due again once the lease ends.
"""

from __future__ import annotations

import builtins

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.sqlite_bodies import SqliteBodies

OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS notify_targets (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    event_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    state TEXT NOT NULL,
    next_at REAL NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (event_id, target_id)
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_at);
"""


class SqliteOutbox(SqliteBodies):
    """`Outbox` (store/base.py) on the store's synchronous connection; a claim is one write transaction."""

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
        with self._read_lock:
            self._read.executemany(
                "INSERT OR IGNORE INTO outbox (event_id, target_id, state, next_at, created_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(e.event_id, e.target_id, e.state, e.next_at, e.created_at, dumps(e.to_json())) for e in entries])

    def claim_due(self, now: float, lease_seconds: float, limit: int = 50) -> builtins.list[OutboxEntry]:
        """Pending entries due by `now`, each now leased to the caller (due again `lease_seconds` later)."""
        with self._read_lock:
            db = self._read
            # Most looks find nothing: a plain read first, so an idle server never takes the file's write lock.
            if db.execute("SELECT 1 FROM outbox WHERE state = 'pending' AND next_at <= ? LIMIT 1",
                          (now,)).fetchone() is None:
                return []
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = db.execute("SELECT body FROM outbox WHERE state = 'pending' AND next_at <= ?"
                                  " ORDER BY next_at LIMIT ?", (now, limit)).fetchall()
                claimed = [OutboxEntry.from_json(loads(row[0])) for row in rows]
                db.executemany("UPDATE outbox SET next_at = ? WHERE event_id = ? AND target_id = ?",
                               [(now + lease_seconds, e.event_id, e.target_id) for e in claimed])
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return claimed

    def settle(self, entry: OutboxEntry) -> None:
        """Write an entry back after an attempt (its state, next time and attempt log)."""
        with self._read_lock:
            self._read.execute("UPDATE outbox SET state = ?, next_at = ?, body = ? WHERE event_id = ? AND target_id = ?",
                               (entry.state, entry.next_at, dumps(entry.to_json()), entry.event_id, entry.target_id))

    def outbox(self, target_id: str, limit: int = 50) -> builtins.list[OutboxEntry]:
        """A target's entries, newest first."""
        with self._read_lock:
            rows = self._read.execute("SELECT body FROM outbox WHERE target_id = ? ORDER BY created_at DESC LIMIT ?",
                                      (target_id, limit)).fetchall()
        return [OutboxEntry.from_json(loads(row[0])) for row in rows]
