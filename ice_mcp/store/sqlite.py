"""The SQLite run store (the default, in the data folder) and `open_store`, which picks a store for a URL.

Run records, every run's event journal, run ownership, caller spend, signals, registered
blueprints and schedules (`sqlite_schedules`) live in one SQLite file. The writer thread
(`stores.QueuedWriter`) writes records and events in batches; reads and the rare writes whose answer
is needed at once (claims, blueprint versions, spend, schedules) use a second connection; SQLite's
WAL lets them run beside the writer.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ice_mcp.errors import IceError
from ice_mcp.store.base import (
    SIGNAL_KINDS,
    Chunk,
    Item,
    Owner,
    QueuedWriter,
    RunStorage,
    Signal,
    StoredBlueprint,
    StoredRun,
    dumps,
    event_dict,
    follow_journal,
    journal_text,
    loads,
    owner_gone,
)
from ice_mcp.store.records import ACTIVE, Listed, RunRecord
from ice_mcp.store.sqlite_file import sqlite_file
from ice_mcp.store.sqlite_hooks import HOOK_SCHEMA, SqliteHooks
from ice_mcp.store.sqlite_limits import LIMITS_SCHEMA, SqliteLimits
from ice_mcp.store.sqlite_outbox import OUTBOX_SCHEMA, SqliteOutbox
from ice_mcp.store.sqlite_schedules import SCHEDULE_SCHEMA, SqliteSchedules

__all__ = ["Owner", "RunStorage", "RunStore", "StoredBlueprint", "StoredRun", "dumps", "loads", "open_store"]

SCHEMA_VERSION = 8  # 5: schedules, firings, scheduler; 6: runs' principals; 7: run summaries, list indexes;
# 8: blueprint versions' document texts
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at REAL,
    idempotency_key TEXT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blueprints (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    source TEXT NOT NULL,
    created_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    text TEXT,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS owners (
    owner_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS spend (
    caller TEXT PRIMARY KEY,
    usd REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    key TEXT PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_at DESC);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_key ON runs (idempotency_key) WHERE idempotency_key IS NOT NULL;
"""
# Columns added in schema 2 (durable runs); a folder written by an older version gains them.
_RUN_COLUMNS = {"owner": "TEXT", "blueprint": "TEXT", "version": "INTEGER", "retry_of": "TEXT",
                "principal": "TEXT",  # schema 6: runs owned by OAuth users
                "trigger_kind": "TEXT", "summary": "TEXT", "finished_at": "REAL"}  # schema 7: lists of millions
# Every filter a list takes has an index that also orders it (newest first); finished_at for retention.
_LIST_INDEXES = {"runs_by_principal": "principal, started_at DESC", "runs_by_workflow": "workflow, started_at DESC",
                 "runs_by_status": "status, started_at DESC", "runs_by_trigger": "trigger_kind, started_at DESC",
                 "runs_by_finish": "finished_at"}
SIGNAL_POLL_SECONDS = 0.2  # how often a server looks for signals other processes left in the file
SIGNAL_KEEP_SECONDS = 24 * 3600.0  # cancel requests and blueprint changes are kept this long


_UPSERT_RUN = ("INSERT INTO runs (run_id, workflow, status, started_at, idempotency_key, record, owner,"
               " blueprint, version, retry_of, principal, trigger_kind, summary, finished_at)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
               " ON CONFLICT(run_id) DO UPDATE SET status=excluded.status, record=excluded.record,"
               " started_at=COALESCE(excluded.started_at, runs.started_at),"
               " owner=COALESCE(excluded.owner, runs.owner), summary=excluded.summary,"
               " finished_at=excluded.finished_at")


_ACTIVE_SQL = ", ".join(f"'{status}'" for status in sorted(ACTIVE))


def _cursor(cursor: str) -> tuple[float, int]:
    """A page cursor back to (started_at, rowid); IceError(invalid_cursor) for anything else."""
    started, _, rowid = cursor.rpartition(":")
    try:
        return float(started), int(rowid)
    except ValueError:
        raise IceError("cursor: pass back the next_cursor a page answered", code="invalid_cursor") from None


def _run_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A queued run row as _UPSERT_RUN's parameters (the record and blueprint as JSON text)."""
    run_id, workflow, status, started, key, record, owner, blueprint, version, retry_of = row
    if isinstance(record, RunRecord):
        record = record.to_dict()
    listed = Listed.of(record)
    return (run_id, workflow, status, started, key, dumps(record), owner,
            blueprint if blueprint is None or isinstance(blueprint, str) else dumps(blueprint), version, retry_of,
            listed.principal, listed.trigger_kind, dumps(listed.summary), listed.finished_at)


def open_store(state_url: str | None, data_dir: Path, *,
               idempotency_key_seconds: float = 24 * 3600.0) -> RunStorage:
    """The run store for `--state URL`: None (SQLite in `data_dir`), `sqlite:///PATH`, `redis://...`
    (also `rediss://`, `unix://`) or `postgresql://...` (also `postgres://`). Raises IceError(code="invalid_state_url") for anything else."""
    path = sqlite_file(state_url, data_dir)
    if path is not None:
        return RunStore(path, idempotency_key_seconds=idempotency_key_seconds)
    assert state_url is not None
    scheme = urlsplit(state_url).scheme.lower()
    if scheme == "sqlite":
        raise IceError("a sqlite state URL names a file: sqlite:///path/to/runs.sqlite3", code="invalid_state_url")
    if scheme in ("redis", "rediss", "unix"):
        # The Redis client loads only when asked for.
        from ice_mcp.store.redis import RedisRunStore

        return RedisRunStore(state_url, idempotency_key_seconds=idempotency_key_seconds)
    if scheme in ("postgresql", "postgres"):
        from ice_mcp.store.postgres import PostgresRunStore  # psycopg loads only when asked for

        return PostgresRunStore(state_url, idempotency_key_seconds=idempotency_key_seconds)
    raise IceError(f"unknown state store {scheme or state_url!r}: use redis://HOST:PORT/DB,"
                   " postgresql://USER@HOST:PORT/DB or sqlite:///PATH",
                   code="invalid_state_url", details={"scheme": scheme})


def _wal(db: sqlite3.Connection, tries: int = 250) -> None:
    """WAL mode; switching a new file to it takes a lock SQLite's busy timeout does not wait for, so a process
    that meets another one switching it tries again (for up to ~5 s)."""
    for left in range(tries - 1, -1, -1):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or not left:
                raise
            time.sleep(0.02)


class RunStore(SqliteSchedules, SqliteHooks, SqliteOutbox, SqliteLimits, QueuedWriter):
    """The SQLite run store. `save` and `keep_journal` queue; reads never wait on the writer."""

    shared = False

    def __init__(self, path: Path | str, *, idempotency_key_seconds: float = 24 * 3600.0) -> None:
        self.path = Path(path)
        self.key_seconds = idempotency_key_seconds
        self.location = str(self.path)
        self._memory = str(path) == ":memory:"
        if not self._memory:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = f"file:ice_mcp_runs_{id(self)}?mode=memory&cache=shared" if self._memory else str(path)
        self._read = self._connect(target)
        self._read_lock = threading.Lock()
        with self._read_lock:
            # One process at a time makes and migrates the schema: two servers opening a new folder at once
            # would both add the same column (and one fail on "duplicate column name").
            self._read.executescript("BEGIN IMMEDIATE;" + _SCHEMA + SCHEDULE_SCHEMA + HOOK_SCHEMA + OUTBOX_SCHEMA
                                     + LIMITS_SCHEMA)
            try:
                self._migrate()
            except BaseException:
                self._read.execute("ROLLBACK")
                raise
            self._read.execute("COMMIT")
        self._write = self._connect(target)
        self._start_queue()

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> RunStore:
        return cls(data_dir / "runs.sqlite3")

    def _connect(self, target: str) -> sqlite3.Connection:
        db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, uri=self._memory, timeout=10.0)
        if not self._memory:
            _wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _migrate(self) -> None:
        have = {row[1] for row in self._read.execute("PRAGMA table_info(runs)")}
        self._legacy_events = "events" in have  # schema 1 kept a run's events as one blob, written at its end
        for column, kind in _RUN_COLUMNS.items():
            if column not in have:
                self._read.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
        if "trigger_kind" not in have:  # runs kept before schema 7: filterable and prunable too (summaries on read)
            self._read.execute("UPDATE runs SET trigger_kind = COALESCE(json_extract(record, '$.trigger.kind'), 'call'),"
                               " finished_at = (julianday(json_extract(record, '$.finished_at')) - 2440587.5) * 86400.0")
        for name, columns in _LIST_INDEXES.items():
            self._read.execute(f"CREATE INDEX IF NOT EXISTS {name} ON runs ({columns})")
        if "principal" not in {row[1] for row in self._read.execute("PRAGMA table_info(schedules)")}:
            self._read.execute("ALTER TABLE schedules ADD COLUMN principal TEXT")  # schema 6
        if "data" not in {row[1] for row in self._read.execute("PRAGMA table_info(signals)")}:
            self._read.execute("ALTER TABLE signals ADD COLUMN data TEXT")  # answers (schema 4)
        if "text" not in {row[1] for row in self._read.execute("PRAGMA table_info(blueprints)")}:
            self._read.execute("ALTER TABLE blueprints ADD COLUMN text TEXT")  # document texts (schema 8)
        self._read.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # -- writes ---------------------------------------------------------------------------------

    def create(self, record: RunRecord, *, idempotency_key: str | None = None, owner: str | None = None,
               blueprint: dict[str, Any] | str | None = None, version: int | None = None,
               retry_of: str | None = None) -> str | None:
        """Keep a new run's record at once (its id may be handed out next, and a process killed after that
        must not lose it), unless its unexpired idempotency key already started a run: that run's id. The key's
        unique index decides between two processes; an expired key passes to the new run."""
        if idempotency_key:
            rows = self._rows("SELECT run_id, started_at FROM runs WHERE idempotency_key = ?", (idempotency_key,))
            if rows and rows[0][0] != record.run_id:
                holder, started = rows[0]
                if time.time() - (started or 0) <= self.key_seconds:
                    return str(holder)
                with self._read_lock:
                    self._read.execute("UPDATE runs SET idempotency_key = NULL WHERE run_id = ?", (holder,))
        try:
            with self._read_lock:
                self._read.execute(_UPSERT_RUN, _run_row((record.run_id, record.workflow, record.status,
                                                          record.started_at, idempotency_key, record, owner,
                                                          blueprint, version, retry_of)))
        except sqlite3.IntegrityError:  # another process took the key in between
            rows = self._rows("SELECT run_id FROM runs WHERE idempotency_key = ?", (idempotency_key,))
            if rows:
                return str(rows[0][0])
            raise
        return None

    def _write_batch(self, items: builtins.list[Item], chunks: builtins.list[Chunk]) -> None:
        db = self._write
        db.execute("BEGIN")
        try:
            for _, kind, row in items:
                if kind == "run":
                    db.execute(_UPSERT_RUN, _run_row(row))
                elif kind == "owner":
                    db.execute("INSERT INTO owners (owner_id, host, pid, heartbeat) VALUES (?, ?, ?, ?)"
                               " ON CONFLICT(owner_id) DO UPDATE SET heartbeat=excluded.heartbeat", row)
            # A run's new events of one batch go in one row.
            db.executemany("INSERT OR REPLACE INTO events (run_id, seq, last_seq, events) VALUES (?, ?, ?, ?)",
                           [(run_id, journal.events[journal.written].seq, journal.events[end - 1].seq,
                             journal_text(journal.events[journal.written:end]))
                            for run_id, journal, end in chunks if end > journal.written])
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # -- reads ----------------------------------------------------------------------------------

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._read_lock:
            return self._read.execute(sql, tuple(args)).fetchall()

    def get(self, run_id: str) -> RunRecord | None:
        rows = self._rows("SELECT record FROM runs WHERE run_id = ?", (run_id,))
        return RunRecord.from_dict(loads(rows[0][0])) if rows else None

    def run(self, run_id: str) -> StoredRun | None:
        rows = self._rows("SELECT record, owner, blueprint, version, idempotency_key, retry_of FROM runs"
                          " WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        record, owner, blueprint, version, key, retry_of = rows[0]
        return StoredRun(RunRecord.from_dict(loads(record)), owner, None if blueprint is None else loads(blueprint),
                         version, key, retry_of)

    def events(self, run_id: str, after: int = -1) -> builtins.list[dict[str, Any]]:
        rows = self._rows("SELECT events FROM events WHERE run_id = ? AND last_seq > ? ORDER BY seq", (run_id, after))
        if not rows and self._legacy_events:
            rows = self._rows("SELECT events FROM runs WHERE run_id = ? AND events IS NOT NULL", (run_id,))
        return [event_dict(e) for (text,) in rows for e in loads(text) if e["seq"] > after]

    def follow(self, run_id: str, after: int = -1) -> AsyncGenerator[builtins.list[dict[str, Any]], None]:
        """A run's events after `after` as they are kept, in batches (an empty one each idle second);
        the caller stops following. Each read runs off the event loop."""
        return follow_journal(lambda seen: asyncio.to_thread(self.events, run_id, seen), after)

    def run_ids(self, prefix: str, limit: int = 10) -> builtins.list[str]:
        """Ids of kept runs that start with `prefix`, in order (at most `limit`): a range of the primary key."""
        rows = self._rows("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT ?",
                          (prefix, prefix + "\U0010ffff", max(1, limit)))
        return [str(run_id) for (run_id,) in rows]

    def by_idempotency_key(self, key: str) -> str | None:
        rows = self._rows("SELECT run_id FROM runs WHERE idempotency_key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def list(self, *, status: str | None = None, workflow: str | None = None, limit: int = 50,
             principal: str | None = None) -> list[RunRecord]:
        """The newest runs, filtered (`principal`: only the runs it owns)."""
        query, args = "SELECT record FROM runs", list[Any]()
        clauses = []
        if principal is not None:
            clauses.append("principal = ?")
            args.append(principal)
        if status:
            clauses.append("status = ?")
            args.append(status)
        if workflow:
            clauses.append("workflow = ?")
            args.append(workflow)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        args.append(max(1, min(limit, 1000)))
        return [RunRecord.from_dict(loads(text)) for (text,) in self._rows(query, args)]

    def page(self, *, status: str | None = None, workflow: str | None = None, trigger: str | None = None,
             principal: str | None = None, limit: int = 50, cursor: str | None = None
             ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Run summaries, newest first, filtered, and the cursor of the next page (None: no more). Read from
        the summary column through the filter's index: the cost does not grow with the number of runs."""
        clauses, args = [], list[Any]()
        for column, value in (("status", status), ("workflow", workflow), ("trigger_kind", trigger),
                              ("principal", principal)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if cursor is not None:
            started, rowid = _cursor(cursor)
            clauses.append("(started_at < ? OR (started_at = ? AND rowid < ?))")
            args += [started, started, rowid]
        query = ("SELECT summary, record, started_at, rowid FROM runs" + (" WHERE " + " AND ".join(clauses) if clauses
                 else "") + " ORDER BY started_at DESC, rowid DESC LIMIT ?")
        limit = max(1, min(limit, 1000))
        rows = self._rows(query, [*args, limit + 1])
        found = [loads(summary) if summary else RunRecord.from_dict(loads(record)).summary()  # rows kept before 7
                 for summary, record, _, _ in rows[:limit]]
        more = len(rows) > limit
        return found, (f"{rows[limit - 1][2]!r}:{rows[limit - 1][3]}" if more else None)

    def prune(self, before: float, limit: int = 10_000) -> int:
        """Delete up to `limit` runs that ended before `before` (Unix seconds), with their journals; a run
        under way or waiting is never touched. Returns how many went."""
        pruned = 0
        with self._immediate() as db:  # chosen and deleted in one write transaction
            ids = [row[0] for row in db.execute(
                f"SELECT run_id FROM runs WHERE finished_at < ? AND status NOT IN ({_ACTIVE_SQL}) LIMIT ?",
                (before, limit))]
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                marks = ", ".join("?" * len(part))
                db.execute(f"DELETE FROM events WHERE run_id IN ({marks})", part)
                pruned += db.execute(f"DELETE FROM runs WHERE run_id IN ({marks})", part).rowcount
        return pruned

    # -- ownership ------------------------------------------------------------------------------

    def orphaned_runs(self, me: Owner, lease_seconds: float) -> builtins.list[tuple[str, str | None]]:
        """Runs still under way (ACTIVE: running, waiting for a person, queued) whose owner is gone: its lease
        ran out, or its process on this host died."""
        rows = self._rows("SELECT r.run_id, r.owner, o.host, o.pid, o.heartbeat FROM runs r"
                          " LEFT JOIN owners o ON o.owner_id = r.owner"
                          f" WHERE r.status IN ({_ACTIVE_SQL})")
        return [(run_id, owner) for run_id, owner, host, pid, beat in rows
                if owner_gone(owner, host, pid, beat, me, lease_seconds)]

    def owner_alive(self, owner_id: str | None, me: Owner, lease_seconds: float) -> bool:
        """Whether `owner_id` still runs its runs (its lease lives and, on this host, its process)."""
        rows = self._rows("SELECT host, pid, heartbeat FROM owners WHERE owner_id = ?", (owner_id,))
        host, pid, beat = rows[0] if rows else (None, None, None)
        return not owner_gone(owner_id, host, pid, beat, me, lease_seconds)

    def claim(self, run_id: str, previous_owner: str | None, me: Owner) -> bool:
        """Take a run over from `previous_owner`; False if someone else took it first."""
        with self._read_lock:
            cursor = self._read.execute("UPDATE runs SET owner = ? WHERE run_id = ? AND owner IS ?",
                                        (me.owner_id, run_id, previous_owner))
            return cursor.rowcount == 1

    def register_owner(self, me: Owner) -> None:
        """Record this process's first heartbeat at once, before it claims anything."""
        with self._read_lock:
            self._read.execute("INSERT INTO owners (owner_id, host, pid, heartbeat) VALUES (?, ?, ?, ?)"
                               " ON CONFLICT(owner_id) DO UPDATE SET heartbeat=excluded.heartbeat",
                               (me.owner_id, me.host, me.pid, time.time()))

    def release_owner(self, me: Owner) -> None:
        with self._read_lock:
            self._read.execute("DELETE FROM owners WHERE owner_id = ?", (me.owner_id,))

    # -- signals between processes on this file ---------------------------------------------------

    def _signal(self, kind: str, subject: str, data: dict[str, Any] | None = None) -> None:
        now = time.time()
        with self._read_lock:
            self._read.execute("INSERT INTO signals (kind, subject, at, data) VALUES (?, ?, ?, ?)",
                               (kind, subject, now, None if data is None else dumps(data)))
            self._read.execute("DELETE FROM signals WHERE at < ?", (now - SIGNAL_KEEP_SECONDS,))

    def request_cancel(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to cancel it (it polls for signals)."""
        self._signal("cancel", run_id)

    def cancel_requested(self, run_id: str) -> bool:
        return bool(self._rows("SELECT 1 FROM signals WHERE kind = 'cancel' AND subject = ? LIMIT 1", (run_id,)))

    def send_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        """Hand a person's answer to whichever process runs `run_id` (it polls for signals)."""
        self._signal("answer", run_id, answer)

    async def signals(self) -> AsyncGenerator[Signal, None]:
        """Signals left in the file from now on (by any process), polled a few times a second."""
        (last,) = (await asyncio.to_thread(self._rows, "SELECT COALESCE(MAX(seq), 0) FROM signals"))[0]
        yield Signal("listening", "")
        while True:
            await asyncio.sleep(SIGNAL_POLL_SECONDS)
            rows = await asyncio.to_thread(self._rows, "SELECT seq, kind, subject, data FROM signals"
                                                       " WHERE seq > ? ORDER BY seq", (last,))
            for seq, kind, subject, data in rows:
                last = seq
                if kind in SIGNAL_KINDS:
                    yield Signal(kind, subject, None if data is None else loads(data))

    # -- caller spend ---------------------------------------------------------------------------

    def add_spend(self, caller: str, usd: float) -> float:
        """Add to what `caller` has spent in all; returns the new total."""
        with self._read_lock:
            (total,) = self._read.execute("INSERT INTO spend (caller, usd) VALUES (?, ?) ON CONFLICT(caller)"
                                          " DO UPDATE SET usd = usd + excluded.usd RETURNING usd",
                                          (caller, usd)).fetchone()
        return float(total)

    def spent(self, caller: str) -> float:
        rows = self._rows("SELECT usd FROM spend WHERE caller = ?", (caller,))
        return float(rows[0][0]) if rows else 0.0

    # -- blobs (large payloads that travel by reference) ------------------------------------------

    def put_blob(self, key: str, data: bytes) -> None:
        """Keep `data` under its content hash `key` (kept once)."""
        with self._read_lock:
            self._read.execute("INSERT OR IGNORE INTO blobs (key, data) VALUES (?, ?)", (key, data))

    def secret(self, name: str) -> bytes:
        """A random 32-byte secret every process on this store shares (made by the first to ask)."""
        with self._read_lock:
            self._read.execute("INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)", (name, os.urandom(32)))
        return bytes(self._rows("SELECT value FROM secrets WHERE name = ?", (name,))[0][0])

    def get_blob(self, key: str) -> bytes:
        rows = self._rows("SELECT data FROM blobs WHERE key = ?", (key,))
        if not rows:
            raise IceError(f"no payload {key[:80]!r} in the run store", code="payload_missing")
        return bytes(rows[0][0])

    # -- registered blueprints ------------------------------------------------------------------

    def save_blueprint(self, name: str, source: dict[str, Any], text: str | None = None) -> int:
        """Store a new version of a registered blueprint (with the document text it came from); returns its
        version number."""
        with self._read_lock:
            self._read.execute("BEGIN IMMEDIATE")
            try:
                (last,) = self._read.execute("SELECT COALESCE(MAX(version), 0) FROM blueprints WHERE name = ?",
                                             (name,)).fetchone()
                self._read.execute("INSERT INTO blueprints (name, version, source, created_at, text)"
                                   " VALUES (?, ?, ?, ?, ?)", (name, last + 1, dumps(source), time.time(), text))
                self._read.execute("COMMIT")
            except BaseException:
                self._read.execute("ROLLBACK")
                raise
        self._signal("blueprint", name)
        return int(last) + 1

    def delete_blueprint(self, name: str) -> bool:
        with self._read_lock:
            cursor = self._read.execute("UPDATE blueprints SET deleted = 1 WHERE name = ? AND deleted = 0", (name,))
            deleted = cursor.rowcount > 0
        if deleted:
            self._signal("blueprint", name)
        return deleted

    def blueprints(self) -> builtins.list[StoredBlueprint]:
        """The current version of every registered blueprint that was not deleted."""
        rows = self._rows("SELECT name, version, source, created_at, text FROM blueprints b WHERE deleted = 0 AND"
                          " version = (SELECT MAX(version) FROM blueprints WHERE name = b.name) ORDER BY name")
        return [StoredBlueprint(name, version, loads(source), created, text)
                for name, version, source, created, text in rows]

    def blueprint_versions(self, name: str) -> builtins.list[StoredBlueprint]:
        rows = self._rows("SELECT name, version, source, created_at, text FROM blueprints WHERE name = ?"
                          " ORDER BY version", (name,))
        return [StoredBlueprint(n, version, loads(source), created, text) for n, version, source, created, text in rows]

    def close(self) -> None:
        """Finish pending writes (bounded), stop the writer, close the database."""
        if self._closed:
            return
        stopped = self._stop_writer()
        with self._read_lock:
            self._read.close()
        if stopped:
            self._write.close()
