"""`ice-mcp state copy FROM TO`: every record kind of one SQL run store copied into another (a data folder's SQLite
file into PostgreSQL, or back), table by table, rows the target already holds left as they are.

Both stores keep the same tables (store/sqlite*.py, store/migrations/postgres/): each table's columns that both
have are copied, in batches, in the source's order (runs keep their order in lists). The serial numbers a target
gives itself (runs' and signals' `seq`) are its own. Redis keeps its records in another shape: not copied here.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ice_mcp.errors import IceError
from ice_mcp.store.base import RunStorage
from ice_mcp.store.sqlite import RunStore, open_store

BATCH = 2000
# Every table, parents first; what orders a table's rows in the source (SQLite's rowid keeps insertion order).
TABLES = ("runs", "events", "blueprints", "owners", "spend", "secrets", "blobs", "signals", "schedules", "firings",
          "scheduler", "schedule_generation", "hooks", "deliveries", "notify_targets", "outbox", "admissions",
          "admission_queue")
_OWN_SERIALS = {"runs": {"seq"}, "signals": {"seq"}}
_ORDER = {"runs": {"sqlite": "rowid", "postgresql": "seq"}, "signals": {"sqlite": "seq", "postgresql": "seq"}}


@dataclass(slots=True)
class _Side:
    """One store's tables, read and written through its own synchronous connection."""

    store: RunStorage
    kind: str  # sqlite | postgresql

    def columns(self, table: str) -> dict[str, str]:
        """A table's columns and their types, in the table's order (empty: the store has no such table)."""
        if isinstance(self.store, RunStore):
            with self.store._read_lock:
                return {row[1]: str(row[2]).lower() for row in self.store._read.execute(f"PRAGMA table_info({table})")}
        with self.store._conn() as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s"
                                " AND table_schema = current_schema() ORDER BY ordinal_position", (table,)).fetchall()
        return {name: kind for name, kind in rows}

    def read(self, table: str, columns: builtins.list[str]) -> Iterator[builtins.list[tuple[Any, ...]]]:
        order = _ORDER.get(table, {}).get(self.kind)
        sql = f"SELECT {', '.join(columns)} FROM {table}" + (f" ORDER BY {order}" if order else "")
        if isinstance(self.store, RunStore):
            with self.store._read_lock:
                rows = self.store._read.execute(sql).fetchall()  # a consistent snapshot of the table
            for start in range(0, len(rows), BATCH):
                yield rows[start:start + BATCH]
            return
        with self.store._conn() as conn, conn.transaction(), conn.cursor(name=f"copy_{table}") as cursor:  # type: ignore[attr-defined]
            cursor.execute(sql)
            while batch := cursor.fetchmany(BATCH):
                yield batch

    def write(self, table: str, columns: builtins.list[str], rows: builtins.list[tuple[Any, ...]]) -> int:
        """Insert `rows`, leaving those whose key the table holds already; how many went in."""
        names = ", ".join(columns)
        if isinstance(self.store, RunStore):
            with self.store._read_lock:
                before = self.store._read.total_changes
                self.store._read.execute("BEGIN")
                try:
                    self.store._read.executemany(f"INSERT OR IGNORE INTO {table} ({names}) VALUES"
                                                 f" ({', '.join('?' * len(columns))})", rows)
                except BaseException:
                    self.store._read.execute("ROLLBACK")
                    raise
                self.store._read.execute("COMMIT")
                return int(self.store._read.total_changes - before)
        with self.store._conn() as conn, conn.transaction(), conn.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
                               " ON CONFLICT DO NOTHING", rows, returning=False)
            return max(0, cursor.rowcount)


def _kept_signals(side: _Side, columns: builtins.list[str]) -> set[tuple[Any, ...]]:
    return {tuple(row) for batch in side.read("signals", columns) for row in batch}


def _side(store: RunStorage, url: str) -> _Side:
    if isinstance(store, RunStore):
        return _Side(store, "sqlite")
    if type(store).__name__ == "PostgresRunStore":
        return _Side(store, "postgresql")
    store.close()
    raise IceError(f"state copy copies between SQLite and PostgreSQL stores, not {store.location}",
                   code="invalid_state_url", details={"url": url})


def open_location(location: str, data_dir: Path) -> RunStorage:
    """A store by URL, or a data folder's SQLite store by the folder's path."""
    if "://" not in location:
        folder = Path(location).expanduser()
        if not folder.is_dir():
            raise IceError(f"no data folder at {location} (give a folder, or a URL: sqlite:///FILE, postgresql://...)",
                           code="invalid_state_url")
        return open_store(None, folder)
    return open_store(location, data_dir)


def copy_state(source_url: str, target_url: str, data_dir: Path) -> dict[str, int]:
    """Copy every record of the store at `source_url` into the one at `target_url` (made and migrated if new);
    the rows copied, by table. Rows the target holds already (same key) are kept as they are, so a copy can be
    run again after an interruption."""
    source = open_location(source_url, data_dir)
    try:
        target = open_location(target_url, data_dir)
    except BaseException:
        source.close()
        raise
    try:
        reading, writing = _side(source, source_url), _side(target, target_url)
        source.flush()
        copied: dict[str, int] = {}
        for table in TABLES:
            have, want = reading.columns(table), writing.columns(table)
            columns = [c for c in want if c in have and c not in _OWN_SERIALS.get(table, set())]
            if not have or not columns:
                continue
            flags = [want[c] == "boolean" for c in columns]  # SQLite's 0/1 into PostgreSQL's booleans
            copied[table] = 0
            kept = _kept_signals(writing, columns) if table == "signals" else set()
            for batch in reading.read(table, columns):
                if kept:  # signals have no key but their serial number: the same one is not sent twice
                    batch = [row for row in batch if tuple(row) not in kept]
                rows = [tuple(bool(v) if flag and v is not None else v for v, flag in zip(row, flags, strict=True))
                        for row in batch] if any(flags) else batch
                copied[table] += writing.write(table, columns, rows)
        return copied
    except sqlite3.Error as exc:
        raise IceError(f"state copy failed: {exc}", code="state_unavailable") from None
    finally:
        source.close()
        target.close()
