"""Webhooks and their deliveries in the SQLite run store: a mixin `RunStore` inherits, each call one statement."""

from __future__ import annotations

import builtins
import time

from ice_mcp.store.hooks import HookRecord
from ice_mcp.store.sqlite_bodies import SqliteBodies

HOOK_SCHEMA = """
CREATE TABLE IF NOT EXISTS hooks (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
    hook_id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    received_at REAL NOT NULL,
    PRIMARY KEY (hook_id, delivery_id)
);
"""


class SqliteHooks(SqliteBodies):
    """`HookStore` (store/base.py), on the store's synchronous connection (seen by other processes at once)."""

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
        with self._read_lock:
            row = self._read.execute("SELECT run_id FROM deliveries WHERE hook_id = ? AND delivery_id = ?",
                                     (hook_id, delivery_id)).fetchone()
        return None if row is None else str(row[0])

    def note_delivery(self, hook_id: str, delivery_id: str, run_id: str) -> str:
        """Keep the run a delivery started, unless one is kept already: the run id kept (for good)."""
        with self._read_lock:
            self._read.execute("INSERT OR IGNORE INTO deliveries (hook_id, delivery_id, run_id, received_at)"
                               " VALUES (?, ?, ?, ?)", (hook_id, delivery_id, run_id, time.time()))
            row = self._read.execute("SELECT run_id FROM deliveries WHERE hook_id = ? AND delivery_id = ?",
                                     (hook_id, delivery_id)).fetchone()
        return str(row[0])
