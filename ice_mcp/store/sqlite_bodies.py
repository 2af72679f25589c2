"""Tables of JSON bodies by id (webhooks, notification targets) in the SQLite run store: what their mixins share."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from ice_mcp.store.base import dumps, loads


class SqliteBodies:
    """A table `(id TEXT PRIMARY KEY, body TEXT)` read and written on the store's synchronous connection.
    `table` is always one of the store's own table names, never a caller's text."""

    _read: sqlite3.Connection
    _read_lock: threading.Lock

    def _save_body(self, table: str, key: str, body: Any) -> None:
        with self._read_lock:
            self._read.execute(f"INSERT INTO {table} (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET"
                               " body = excluded.body", (key, dumps(body)))

    def _body(self, table: str, key: str) -> Any | None:
        with self._read_lock:
            row = self._read.execute(f"SELECT body FROM {table} WHERE id = ?", (key,)).fetchone()
        return None if row is None else loads(row[0])

    def _bodies(self, table: str) -> list[Any]:
        with self._read_lock:
            rows = self._read.execute(f"SELECT body FROM {table} ORDER BY id").fetchall()
        return [loads(row[0]) for row in rows]

    def _delete_body(self, table: str, key: str, *, also: str, column: str) -> bool:
        """Delete a row and, in table `also`, the rows whose `column` is its id: True if the row was there."""
        with self._read_lock:
            deleted = self._read.execute(f"DELETE FROM {table} WHERE id = ?", (key,)).rowcount
            self._read.execute(f"DELETE FROM {also} WHERE {column} = ?", (key,))
        return bool(deleted)
