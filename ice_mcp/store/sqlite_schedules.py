"""Schedules and their firings in the SQLite run store: a mixin `RunStore` inherits, each call one transaction."""

from __future__ import annotations

import builtins
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.schedules import (
    Firing,
    Outcome,
    ScheduleRecord,
    add_counts,
    counts_of,
    stale_revision,
)

SCHEDULE_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    inputs TEXT NOT NULL,
    policy TEXT NOT NULL,
    paused INTEGER NOT NULL,
    note TEXT,
    revision INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    cursor REAL,
    origin TEXT NOT NULL,
    running TEXT NOT NULL,
    counts TEXT NOT NULL,
    principal TEXT
);
CREATE TABLE IF NOT EXISTS firings (
    schedule_id TEXT NOT NULL,
    slot REAL NOT NULL,
    outcome TEXT NOT NULL,
    run_id TEXT,
    fired_at REAL NOT NULL,
    replica TEXT,
    count INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, slot)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scheduler (
    name TEXT PRIMARY KEY,
    alive_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS schedule_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS schedules_by_target ON schedules (target, id);
"""
_COLUMNS = ("id, target, target_kind, spec, inputs, policy, paused, note, revision, created_at, updated_at,"
            " cursor, origin, running, counts, principal")
_FIRING_COLUMNS = "schedule_id, slot, outcome, run_id, fired_at, replica, count"
_NEXT_GENERATION = ("INSERT INTO schedule_generation (id, generation) VALUES (1, 1)"
                    " ON CONFLICT(id) DO UPDATE SET generation = generation + 1")


def _schedule(row: tuple[Any, ...]) -> ScheduleRecord:
    (id_, target, target_kind, spec, inputs, policy, paused, note, revision, created, updated, cursor, origin,
     running, counts, principal) = row
    return ScheduleRecord(id=id_, target=target, target_kind=target_kind, spec=loads(spec), inputs=loads(inputs),
                          policy=loads(policy), paused=bool(paused), note=note, revision=int(revision),
                          created_at=float(created), updated_at=float(updated),
                          cursor=None if cursor is None else float(cursor), origin=origin, running=loads(running),
                          counts=loads(counts), principal=principal)


def _firing(row: tuple[Any, ...]) -> Firing:
    schedule_id, slot, outcome, run_id, fired_at, replica, count = row
    return Firing(schedule_id, float(slot), outcome, run_id, float(fired_at), replica, int(count))


class SqliteSchedules:
    """`ScheduleStore` (store/base.py) on the store's synchronous connection (not the queued writer), so
    another process on the file sees each one as soon as it returns; a firing claim is `BEGIN IMMEDIATE`."""

    _read: sqlite3.Connection
    _read_lock: threading.Lock

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that holds the file's write lock from its first statement."""
        with self._read_lock:
            db = self._read
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _claim(self, work: Callable[[sqlite3.Connection], bool]) -> bool:
        """`work`'s answer in one write transaction, committed if True; False and nothing written if it
        answered False or a firing's slot was decided already."""
        with self._read_lock:
            db = self._read
            db.execute("BEGIN IMMEDIATE")
            try:
                done = work(db)
            except sqlite3.IntegrityError:
                done = False
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT" if done else "ROLLBACK")
            return done

    def now(self) -> float:
        return time.time()

    def save_schedule(self, schedule: ScheduleRecord, *, if_revision: int | None = None) -> ScheduleRecord:
        """Create a schedule (revision 1) or replace its definition (revision + 1, its cursor, running runs
        and counts kept); StaleRevision, nothing written, if `if_revision` is not the stored revision."""
        with self._immediate() as db:
            found = db.execute("SELECT revision FROM schedules WHERE id = ?", (schedule.id,)).fetchone()
            current = int(found[0]) if found else None
            if if_revision is not None and current != if_revision:
                raise stale_revision(schedule.id, current, if_revision)
            now = time.time()
            definition = (schedule.target, schedule.target_kind, dumps(schedule.spec), dumps(schedule.inputs),
                          dumps(schedule.policy), int(schedule.paused), schedule.note, schedule.origin)
            if current is None:
                db.execute(f"INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
                           (schedule.id, *definition[:7], now, now,
                            None if schedule.cursor is None else float(schedule.cursor), definition[7],
                            dumps(list(schedule.running)), dumps(dict(schedule.counts)), schedule.principal))
            else:
                db.execute("UPDATE schedules SET target = ?, target_kind = ?, spec = ?, inputs = ?, policy = ?,"
                           " paused = ?, note = ?, origin = ?, revision = revision + 1, updated_at = ? WHERE id = ?",
                           (*definition, now, schedule.id))
            db.execute(_NEXT_GENERATION)
            row = db.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule.id,)).fetchone()
        return _schedule(row)

    def schedule(self, schedule_id: str) -> ScheduleRecord | None:
        with self._read_lock:
            row = self._read.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
        return None if row is None else _schedule(row)

    def schedules(self, *, target: str | None = None) -> builtins.list[ScheduleRecord]:
        query, args = f"SELECT {_COLUMNS} FROM schedules", builtins.list[str]()
        if target is not None:
            query, args = query + " WHERE target = ?", [target]
        with self._read_lock:
            rows = self._read.execute(query + " ORDER BY id", args).fetchall()
        return [_schedule(row) for row in rows]

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._immediate() as db:
            db.execute("DELETE FROM firings WHERE schedule_id = ?", (schedule_id,))
            deleted = db.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0
            db.execute(_NEXT_GENERATION)
            return deleted

    def schedules_generation(self) -> int:
        """A number that changes whenever a schedule is saved or deleted, by any process on the file."""
        with self._read_lock:
            row = self._read.execute("SELECT generation FROM schedule_generation WHERE id = 1").fetchone()
        return 0 if row is None else int(row[0])

    def advance(self, schedule_id: str, expected_cursor: float | None, cursor: float,
                firings: builtins.list[Firing], running: builtins.list[str] | None = None) -> bool:
        """Record `firings` and move the cursor to `cursor`, if it is still `expected_cursor` and none of
        their slots was decided: the one claim of those slots. False, nothing written, otherwise."""
        _same_schedule(schedule_id, firings)

        def work(db: sqlite3.Connection) -> bool:
            found = db.execute("SELECT cursor, counts FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
            if found is None or found[0] != (None if expected_cursor is None else float(expected_cursor)):
                return False
            self._insert_firings(db, firings)
            db.execute("UPDATE schedules SET cursor = ?, counts = ?, running = COALESCE(?, running) WHERE id = ?",
                       (float(cursor), dumps(add_counts(loads(found[1]), counts_of(firings))),
                        None if running is None else dumps(running), schedule_id))
            return True

        return self._claim(work)

    def add_firing(self, firing: Firing, running: builtins.list[str] | None = None) -> bool:
        """Record one firing outside the cursor (a manual trigger, a backfill slot); False if its slot
        was decided or the schedule is gone."""

        def work(db: sqlite3.Connection) -> bool:
            found = db.execute("SELECT counts FROM schedules WHERE id = ?", (firing.schedule_id,)).fetchone()
            if found is None:
                return False
            self._insert_firings(db, [firing])
            db.execute("UPDATE schedules SET counts = ?, running = COALESCE(?, running) WHERE id = ?",
                       (dumps(add_counts(loads(found[0]), counts_of([firing]))),
                        None if running is None else dumps(running), firing.schedule_id))
            return True

        return self._claim(work)

    @staticmethod
    def _insert_firings(db: sqlite3.Connection, firings: builtins.list[Firing]) -> None:
        """Raises sqlite3.IntegrityError if a slot was decided already."""
        db.executemany(f"INSERT INTO firings ({_FIRING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(f.schedule_id, float(f.slot), f.outcome, f.run_id, float(f.fired_at), f.replica, int(f.count))
                        for f in firings])

    def update_firing(self, schedule_id: str, slot: float, *, expected: Outcome, outcome: Outcome,
                      run_id: str | None = None, running: builtins.list[str] | None = None) -> bool:
        """Change a firing's outcome from `expected` to `outcome` (its run id when given, fired now);
        False, nothing written, if it is missing or its outcome is another."""

        def work(db: sqlite3.Connection) -> bool:
            found = db.execute("SELECT f.outcome, f.count, s.counts FROM firings f JOIN schedules s"
                               " ON s.id = f.schedule_id WHERE f.schedule_id = ? AND f.slot = ?",
                               (schedule_id, float(slot))).fetchone()
            if found is None or found[0] != expected:
                return False
            db.execute("UPDATE firings SET outcome = ?, run_id = COALESCE(?, run_id), fired_at = ?"
                       " WHERE schedule_id = ? AND slot = ?", (outcome, run_id, time.time(), schedule_id, float(slot)))
            counts = add_counts(loads(found[2]), {expected: -int(found[1])})
            db.execute("UPDATE schedules SET counts = ?, running = COALESCE(?, running) WHERE id = ?",
                       (dumps(add_counts(counts, {outcome: int(found[1])})),
                        None if running is None else dumps(running), schedule_id))
            return True

        return self._claim(work)

    def firings(self, schedule_id: str, *, limit: int = 10, outcome: str | None = None) -> builtins.list[Firing]:
        """A schedule's firings, newest slot first (only those with `outcome`, when given)."""
        if limit <= 0:
            return []
        query, args = f"SELECT {_FIRING_COLUMNS} FROM firings WHERE schedule_id = ?", [schedule_id]
        if outcome is not None:
            query += " AND outcome = ?"
            args.append(outcome)
        with self._read_lock:
            rows = self._read.execute(query + " ORDER BY slot DESC LIMIT ?", (*args, limit)).fetchall()
        return [_firing(row) for row in rows]

    def firing(self, schedule_id: str, slot: float) -> Firing | None:
        """The firing of one slot (a `missed` or `paused` row only by the last slot of its stretch)."""
        with self._read_lock:
            row = self._read.execute(f"SELECT {_FIRING_COLUMNS} FROM firings WHERE schedule_id = ? AND slot = ?",
                                     (schedule_id, float(slot))).fetchone()
        return None if row is None else _firing(row)

    def note_scheduler(self, at: float) -> None:
        """Note that a firing loop ran at `at` (the latest time noted stays)."""
        with self._read_lock:
            self._read.execute("INSERT INTO scheduler (name, alive_at) VALUES ('scheduler', ?) ON CONFLICT(name)"
                               " DO UPDATE SET alive_at = MAX(alive_at, excluded.alive_at)", (float(at),))

    def scheduler_alive_at(self) -> float | None:
        with self._read_lock:
            row = self._read.execute("SELECT alive_at FROM scheduler WHERE name = 'scheduler'").fetchone()
        return None if row is None else float(row[0])


def _same_schedule(schedule_id: str, firings: builtins.list[Firing]) -> None:
    strays = {f.schedule_id for f in firings} - {schedule_id}
    if strays:
        raise ValueError(f"firings of {sorted(strays)} given to advance schedule {schedule_id!r}")
