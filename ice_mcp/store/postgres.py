"""The PostgreSQL run store: what `--state postgresql://...` shares between MCP replicas and workers, as the system
of record.

Every record kind lives in tables made by the versioned migrations in store/migrations/postgres/ (applied at
open, under an advisory lock, so servers starting at once on a new database migrate it once). Records, events and
heartbeats are written by the writer thread (`base.QueuedWriter`), one transaction per batch; everything else is
one statement or one transaction through a connection pool. What PostgreSQL does better is used: NOTIFY tells
every process at once of signals, journals that grew, schedules that changed and runs that ended (no polling
delay: `on_change`), and claims take rows `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import time
from collections.abc import AsyncGenerator
from typing import Any

import psycopg
import psycopg_pool

from ice_mcp.errors import IceError
from ice_mcp.store.base import (
    SIGNAL_KINDS,
    Chunk,
    Item,
    Owner,
    QueuedWriter,
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
from ice_mcp.store.postgres_admissions import PgLimits
from ice_mcp.store.postgres_hooks import PgHooks, PgOutbox
from ice_mcp.store.postgres_room import (
    ADMISSIONS,
    JOURNAL,
    SIGNALS,
    Listener,
    PgRoom,
    migrate,
    redact,
)
from ice_mcp.store.postgres_schedules import PgSchedules
from ice_mcp.store.records import ACTIVE, Listed, RunRecord

__all__ = ["PostgresRunStore", "redact"]

SIGNAL_KEEP_SECONDS = 24 * 3600.0  # cancel requests and answers are kept this long
NOTIFY_LIMIT = 7000  # bytes of a NOTIFY payload (PostgreSQL's limit is 8,000): a larger signal is read by its seq
_ACTIVE = sorted(ACTIVE)
_UPSERT_RUN = ("INSERT INTO runs (run_id, workflow, status, started_at, idempotency_key, record, owner, blueprint,"
               " version, retry_of, principal, trigger_kind, summary, finished_at)"
               " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
               " ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, record = excluded.record,"
               " started_at = COALESCE(excluded.started_at, runs.started_at),"
               " owner = COALESCE(excluded.owner, runs.owner), summary = excluded.summary,"
               " finished_at = excluded.finished_at")
_UPSERT_OWNER = ("INSERT INTO owners (owner_id, host, pid, heartbeat) VALUES (%s, %s, %s, %s)"
                 " ON CONFLICT (owner_id) DO UPDATE SET heartbeat = excluded.heartbeat")
_NOTIFY_MANY = "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS t(c, p)"


def _run_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A queued run row as _UPSERT_RUN's parameters (the record and blueprint as JSON text)."""
    run_id, workflow, status, started, key, record, owner, blueprint, version, retry_of = row
    if isinstance(record, RunRecord):
        record = record.to_dict()
    listed = Listed.of(record)
    return (run_id, workflow, status, started, key, dumps(record), owner,
            blueprint if blueprint is None or isinstance(blueprint, str) else dumps(blueprint), version, retry_of,
            listed.principal, listed.trigger_kind, dumps(listed.summary), listed.finished_at)


def _cursor(cursor: str) -> tuple[float, int]:
    started, _, seq = cursor.rpartition(":")
    try:
        return float(started), int(seq)
    except ValueError:
        raise IceError("cursor: pass back the next_cursor a page answered", code="invalid_cursor") from None


class PostgresRunStore(PgSchedules, PgHooks, PgOutbox, PgLimits, PgRoom, QueuedWriter):
    """Every record kind in one PostgreSQL database, shared by every process that opens it."""

    shared = True

    def __init__(self, url: str, *, idempotency_key_seconds: float = 24 * 3600.0, timeout: float = 5.0,
                 pool_size: int = 8) -> None:
        self.url, self.location = url, redact(url)
        self.key_seconds = idempotency_key_seconds
        try:
            self._pool = psycopg_pool.ConnectionPool(
                url, min_size=1, max_size=pool_size, open=False, timeout=timeout, name="ice_mcp-state",
                kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))})
            self._pool.open(wait=True, timeout=timeout)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            with contextlib.suppress(Exception):
                self._pool.close(timeout=0)
            raise IceError(f"cannot reach the state store at {self.location}: {type(exc).__name__}: {exc}",
                           code="state_unavailable") from None
        try:
            with self._conn() as conn:
                migrate(conn)
        except (IceError, psycopg.Error) as exc:
            self._pool.close(timeout=0)
            if isinstance(exc, IceError):
                raise
            raise IceError(f"cannot migrate the state store at {self.location}: {type(exc).__name__}: {exc}",
                           code="state_unavailable") from None
        self._listener = Listener(url, self.location)
        self._start_queue()

    # -- writes ---------------------------------------------------------------------------------

    def create(self, record: RunRecord, *, idempotency_key: str | None = None, owner: str | None = None,
               blueprint: dict[str, Any] | str | None = None, version: int | None = None,
               retry_of: str | None = None) -> str | None:
        """Keep a new run at once (so any process finds it as soon as its id is handed out), unless its unexpired
        idempotency key already started a run: that run's id. The key's unique index decides between processes;
        an expired key passes to the new run."""
        row = _run_row((record.run_id, record.workflow, record.status, record.started_at, idempotency_key, record,
                        owner, blueprint, version, retry_of))
        for _ in range(3):
            try:
                with self._tx() as conn:
                    if idempotency_key:
                        found = conn.execute("SELECT run_id, started_at FROM runs WHERE idempotency_key = %s"
                                             " FOR UPDATE", (idempotency_key,)).fetchone()
                        if found is not None and found[0] != record.run_id:
                            if time.time() - (found[1] or 0) <= self.key_seconds:
                                return str(found[0])
                            conn.execute("UPDATE runs SET idempotency_key = NULL WHERE run_id = %s", (found[0],))
                    conn.execute(_UPSERT_RUN, row)
                return None
            except psycopg.errors.UniqueViolation:  # another process took the key in between: read it again
                continue
        raise IceError(f"idempotency key {idempotency_key!r} is contended", code="state_unavailable")

    def _write_batch(self, items: builtins.list[Item], chunks: builtins.list[Chunk]) -> None:
        runs = [_run_row(row) for _, kind, row in items if kind == "run"]
        owners = [row for _, kind, row in items if kind == "owner"]
        events = [(run_id, journal.events[journal.written].seq, journal.events[end - 1].seq,
                   journal_text(journal.events[journal.written:end])) for run_id, journal, end in chunks
                  if end > journal.written]
        notes = {(JOURNAL, row[0]) for row in runs} | {(JOURNAL, row[0]) for row in events}
        notes |= {(ADMISSIONS, row[1]) for row in runs if row[2] not in ACTIVE}  # a slot freed: queues look now
        if not (runs or owners or events):
            return
        with self._tx() as conn, conn.cursor() as cur:
            if runs:
                cur.executemany(_UPSERT_RUN, runs)
            if owners:
                cur.executemany(_UPSERT_OWNER, owners)
            if events:
                cur.executemany("INSERT INTO events (run_id, seq, last_seq, events) VALUES (%s, %s, %s, %s)"
                                " ON CONFLICT (run_id, seq) DO UPDATE SET last_seq = excluded.last_seq,"
                                " events = excluded.events", events)
            if notes:  # sent when the batch commits, so whoever wakes reads it
                channels, payloads = zip(*sorted(notes), strict=True)
                cur.execute(_NOTIFY_MANY, (list(channels), list(payloads)))

    # -- reads ----------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        row = self._one("SELECT record FROM runs WHERE run_id = %s", (run_id,))
        return None if row is None else RunRecord.from_dict(loads(row[0]))

    def run(self, run_id: str) -> StoredRun | None:
        row = self._one("SELECT record, owner, blueprint, version, idempotency_key, retry_of FROM runs"
                        " WHERE run_id = %s", (run_id,))
        if row is None:
            return None
        record, owner, blueprint, version, key, retry_of = row
        return StoredRun(RunRecord.from_dict(loads(record)), owner, None if blueprint is None else loads(blueprint),
                         version, key, retry_of)

    def events(self, run_id: str, after: int = -1) -> builtins.list[dict[str, Any]]:
        rows = self._rows("SELECT events FROM events WHERE run_id = %s AND last_seq > %s ORDER BY seq", (run_id, after))
        return [event_dict(e) for (text,) in rows for e in loads(text) if e["seq"] > after]

    async def follow(self, run_id: str, after: int = -1) -> AsyncGenerator[builtins.list[dict[str, Any]], None]:
        """A run's events after `after` as they are kept, in batches (an empty one each idle second); the
        caller stops following. A NOTIFY from the writer that kept them wakes it (no polling delay)."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def woken() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody follows any more
                loop.call_soon_threadsafe(wake.set)

        stop = self.on_change("journal", run_id, woken)
        try:
            async for batch in follow_journal(lambda seen: asyncio.to_thread(self.events, run_id, seen), after,
                                              wake=wake):
                yield batch
        finally:
            stop()

    def run_ids(self, prefix: str, limit: int = 10) -> builtins.list[str]:
        """Ids of kept runs that start with `prefix`, in order (at most `limit`): a range of the primary key."""
        rows = self._rows("SELECT run_id FROM runs WHERE run_id >= %s AND run_id < %s ORDER BY run_id LIMIT %s",
                          (prefix, prefix + "\U0010ffff", max(1, limit)))
        return [str(run_id) for (run_id,) in rows]

    def by_idempotency_key(self, key: str) -> str | None:
        row = self._one("SELECT run_id FROM runs WHERE idempotency_key = %s", (key,))
        return None if row is None else str(row[0])

    def list(self, *, status: str | None = None, workflow: str | None = None, limit: int = 50,
             principal: str | None = None) -> builtins.list[RunRecord]:
        """The newest runs, filtered (`principal`: only the runs it owns)."""
        clauses, args = _filters(status=status, workflow=workflow, principal=principal)
        rows = self._rows("SELECT record FROM runs" + clauses + " ORDER BY started_at DESC NULLS LAST, seq DESC"
                          " LIMIT %s", [*args, max(1, min(limit, 1000))])
        return [RunRecord.from_dict(loads(text)) for (text,) in rows]

    def page(self, *, status: str | None = None, workflow: str | None = None, trigger: str | None = None,
             principal: str | None = None, limit: int = 50, cursor: str | None = None
             ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Run summaries, newest first, filtered, and the next page's cursor (None: no more), through the
        filter's index: the cost does not grow with the number of runs."""
        clauses, args = _filters(status=status, workflow=workflow, trigger_kind=trigger, principal=principal)
        if cursor is not None:
            clauses += (" AND " if clauses else " WHERE ") + "(started_at, seq) < (%s, %s)"
            args += list(_cursor(cursor))
        limit = max(1, min(limit, 1000))
        rows = self._rows("SELECT summary, record, started_at, seq FROM runs" + clauses
                          + " ORDER BY started_at DESC NULLS LAST, seq DESC LIMIT %s", [*args, limit + 1])
        found = [loads(summary) if summary else RunRecord.from_dict(loads(record)).summary()
                 for summary, record, _, _ in rows[:limit]]
        more = len(rows) > limit
        return found, (f"{rows[limit - 1][2]!r}:{rows[limit - 1][3]}" if more else None)

    def prune(self, before: float, limit: int = 10_000) -> int:
        """Delete up to `limit` runs that ended before `before`, with their journals; never one under way (rows
        another process is writing are skipped, not waited for)."""
        with self._tx() as conn:
            ids = [row[0] for row in conn.execute(
                "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM runs WHERE finished_at < %s"
                " AND NOT (status = ANY(%s)) LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING run_id",
                (before, _ACTIVE, limit))]
            if ids:
                conn.execute("DELETE FROM events WHERE run_id = ANY(%s)", (ids,))
        return len(ids)

    # -- ownership ------------------------------------------------------------------------------

    def orphaned_runs(self, me: Owner, lease_seconds: float) -> builtins.list[tuple[str, str | None]]:
        """Runs still under way (ACTIVE) whose owner is gone: its lease ran out, or its process on this host died."""
        rows = self._rows("SELECT r.run_id, r.owner, o.host, o.pid, o.heartbeat FROM runs r"
                          " LEFT JOIN owners o ON o.owner_id = r.owner WHERE r.status = ANY(%s)", (_ACTIVE,))
        return [(run_id, owner) for run_id, owner, host, pid, beat in rows
                if owner_gone(owner, host, pid, beat, me, lease_seconds)]

    def owner_alive(self, owner_id: str | None, me: Owner, lease_seconds: float) -> bool:
        row = self._one("SELECT host, pid, heartbeat FROM owners WHERE owner_id = %s", (owner_id,))
        host, pid, beat = row if row is not None else (None, None, None)
        return not owner_gone(owner_id, host, pid, beat, me, lease_seconds)

    def claim(self, run_id: str, previous_owner: str | None, me: Owner) -> bool:
        """Take a run over from `previous_owner`; False if someone else took it (or is taking it) first: the
        row is taken FOR UPDATE SKIP LOCKED, so a second claimer never waits for the first."""
        return self._exec("UPDATE runs SET owner = %s WHERE run_id = (SELECT run_id FROM runs WHERE run_id = %s"
                          " AND owner IS NOT DISTINCT FROM %s FOR UPDATE SKIP LOCKED)",
                          (me.owner_id, run_id, previous_owner)) == 1

    def register_owner(self, me: Owner) -> None:
        self._exec(_UPSERT_OWNER, (me.owner_id, me.host, me.pid, time.time()))

    def release_owner(self, me: Owner) -> None:
        self._exec("DELETE FROM owners WHERE owner_id = %s", (me.owner_id,))

    # -- signals --------------------------------------------------------------------------------

    def _signal(self, kind: str, subject: str, data: dict[str, Any] | None = None) -> None:
        now = time.time()
        with self._tx() as conn:
            (seq,) = conn.execute("INSERT INTO signals (kind, subject, at, data) VALUES (%s, %s, %s, %s)"
                                  " RETURNING seq", (kind, subject, now, None if data is None else dumps(data))
                                  ).fetchone() or (0,)
            conn.execute("DELETE FROM signals WHERE at < %s", (now - SIGNAL_KEEP_SECONDS,))
            payload = dumps({"seq": seq, "kind": kind, "subject": subject, "data": data})
            if len(payload.encode()) > NOTIFY_LIMIT:
                payload = dumps({"seq": seq})
            conn.execute("SELECT pg_notify(%s, %s)", (SIGNALS, payload))

    def request_cancel(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to cancel it: kept (for one that resumes it later) and notified."""
        self._signal("cancel", run_id)

    def cancel_requested(self, run_id: str) -> bool:
        return self._one("SELECT 1 FROM signals WHERE kind = 'cancel' AND subject = %s LIMIT 1", (run_id,)) is not None

    def send_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        """Hand a person's answer to whichever process runs `run_id` (it listens)."""
        self._signal("answer", run_id, answer)

    async def signals(self) -> AsyncGenerator[Signal, None]:
        """Signals sent from now on by any process (this one included), as NOTIFY hands them over; IceError
        (`state_unavailable`) when listening broke (what was sent meanwhile is read from the store)."""
        loop = asyncio.get_running_loop()
        heard: asyncio.Queue[str | None] = asyncio.Queue()

        def hand_over(payload: str | None) -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(heard.put_nowait, payload)

        stop = self._listener.subscribe(SIGNALS, None, hand_over)
        try:
            if not await asyncio.to_thread(self._listener.ready.wait, 10.0):
                raise IceError(f"the state store at {self.location} did not answer: cannot listen",
                               code="state_unavailable")
            yield Signal("listening", "")
            while True:
                payload = await heard.get()
                if payload is None:
                    raise IceError(f"the state store at {self.location} did not answer: listening broke",
                                   code="state_unavailable")
                if (signal := await self._read_signal(payload)) is not None:
                    yield signal
        finally:
            stop()

    async def _read_signal(self, payload: str) -> Signal | None:
        message = loads(payload)
        if "kind" not in message:  # too large to travel in the notification: read by its seq
            row = await asyncio.to_thread(self._one, "SELECT kind, subject, data FROM signals WHERE seq = %s",
                                          (message["seq"],))
            if row is None:
                return None
            message = {"kind": row[0], "subject": row[1], "data": None if row[2] is None else loads(row[2])}
        kind, data = message["kind"], message.get("data")
        return Signal(kind, str(message["subject"]), data if isinstance(data, dict) else None) \
            if kind in SIGNAL_KINDS else None

    # -- caller spend, blobs, secrets -------------------------------------------------------------

    def add_spend(self, caller: str, usd: float) -> float:
        """Add to what `caller` has spent in all (atomic across processes); returns the new total."""
        row = self._one("INSERT INTO spend (caller, usd) VALUES (%s, %s) ON CONFLICT (caller)"
                        " DO UPDATE SET usd = spend.usd + excluded.usd RETURNING usd", (caller, usd))
        return float(row[0]) if row is not None else usd

    def spent(self, caller: str) -> float:
        row = self._one("SELECT usd FROM spend WHERE caller = %s", (caller,))
        return 0.0 if row is None else float(row[0])

    def put_blob(self, key: str, data: bytes) -> None:
        """Keep `data` under its content hash `key` (kept once)."""
        self._exec("INSERT INTO blobs (key, data) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (key, data))

    def get_blob(self, key: str) -> bytes:
        row = self._one("SELECT data FROM blobs WHERE key = %s", (key,))
        if row is None:
            raise IceError(f"no payload {key[:80]!r} in the run store", code="payload_missing")
        return bytes(row[0])

    def secret(self, name: str) -> bytes:
        """A random 32-byte secret every process on this store shares (made by the first to ask)."""
        row = self._one("WITH made AS (INSERT INTO secrets (name, value) VALUES (%s, %s) ON CONFLICT (name)"
                        " DO NOTHING RETURNING value) SELECT value FROM made UNION ALL"
                        " SELECT value FROM secrets WHERE name = %s LIMIT 1", (name, os.urandom(32), name))
        assert row is not None
        return bytes(row[0])

    # -- registered blueprints ------------------------------------------------------------------

    def save_blueprint(self, name: str, source: dict[str, Any], text: str | None = None) -> int:
        """Store a new version of a registered blueprint (`text`: the document as its editor saved it, kept byte
        for byte); returns its version number."""
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('ice_mcp.blueprint:' || %s))", (name,))
            row = conn.execute("INSERT INTO blueprints (name, version, source, created_at, text)"
                               " SELECT %s, COALESCE(MAX(version), 0) + 1, %s, %s, %s FROM blueprints WHERE name = %s"
                               " RETURNING version", (name, dumps(source), time.time(), text, name)).fetchone()
        self._signal("blueprint", name)
        return int(row[0]) if row is not None else 0

    def delete_blueprint(self, name: str) -> bool:
        deleted = self._exec("UPDATE blueprints SET deleted = TRUE WHERE name = %s AND NOT deleted", (name,)) > 0
        if deleted:
            self._signal("blueprint", name)
        return deleted

    def blueprints(self) -> builtins.list[StoredBlueprint]:
        """The current version of every registered blueprint that was not deleted."""
        rows = self._rows("SELECT DISTINCT ON (name) name, version, source, created_at, text, deleted FROM blueprints"
                          " ORDER BY name, version DESC")
        return [StoredBlueprint(name, version, loads(source), created, text)
                for name, version, source, created, text, deleted in rows if not deleted]

    def blueprint_versions(self, name: str) -> builtins.list[StoredBlueprint]:
        rows = self._rows("SELECT name, version, source, created_at, text FROM blueprints WHERE name = %s"
                          " ORDER BY version", (name,))
        return [StoredBlueprint(n, version, loads(source), created, text) for n, version, source, created, text in rows]

    def close(self) -> None:
        """Finish pending writes (bounded), stop the writer and the listener, close the pool."""
        if self._closed:
            return
        self._listener.close()
        if self._stop_writer():
            self._pool.close(timeout=5)


def _filters(**values: str | None) -> tuple[str, builtins.list[Any]]:
    """A WHERE clause of `column = value` for each value given (the column names are the callers' own)."""
    given = {column: value for column, value in values.items() if value is not None}
    return (" WHERE " + " AND ".join(f"{column} = %s" for column in given) if given else "", list(given.values()))
