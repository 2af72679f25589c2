"""Webhooks and their deliveries in the SQLite run store: a mixin `RunStore` inherits, each call one statement."""

from __future__ import annotations

import builtins
import sqlite3
import threading
import time

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.hooks import HookRecord

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


class SqliteHooks:
    """`HookStore` (store/base.py), on the store's synchronous connection (seen by other processes at once)."""

    _read: sqlite3.Connection
    _read_lock: threading.Lock

    def save_hook(self, hook: HookRecord) -> None:
        with self._read_lock:
            self._read.execute("INSERT INTO hooks (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET"
                               " body = excluded.body", (hook.id, dumps(hook.to_json())))

    def hook(self, hook_id: str) -> HookRecord | None:
        with self._read_lock:
            row = self._read.execute("SELECT body FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        return None if row is None else HookRecord.from_json(loads(row[0]))

    def hooks(self) -> builtins.list[HookRecord]:
        with self._read_lock:
            rows = self._read.execute("SELECT body FROM hooks ORDER BY id").fetchall()
        return [HookRecord.from_json(loads(row[0])) for row in rows]

    def delete_hook(self, hook_id: str) -> bool:
        """Delete a hook and the record of its deliveries (their runs stay)."""
        with self._read_lock:
            deleted = self._read.execute("DELETE FROM hooks WHERE id = ?", (hook_id,)).rowcount
            self._read.execute("DELETE FROM deliveries WHERE hook_id = ?", (hook_id,))
        return bool(deleted)

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
