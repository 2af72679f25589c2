"""Schedules and their firings in the PostgreSQL run store: a mixin `PostgresRunStore` inherits, each call one
transaction; a slot's claim takes the schedule's row FOR UPDATE, so one process decides it, exactly once."""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from typing import Any

import psycopg

from ice_mcp.store.base import dumps, loads
from ice_mcp.store.postgres_room import SCHEDULES, PgRoom
from ice_mcp.store.schedules import (
    Firing,
    Outcome,
    ScheduleRecord,
    add_counts,
    counts_of,
    stale_revision,
)

_COLUMNS = ("id, target, target_kind, spec, inputs, policy, paused, note, revision, created_at, updated_at,"
            " cursor, origin, running, counts, principal")
_FIRING_COLUMNS = "schedule_id, slot, outcome, run_id, fired_at, replica, count"
_NEXT_GENERATION = "UPDATE schedule_generation SET generation = generation + 1 WHERE id = 1"


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


class PgSchedules(PgRoom):
    """`ScheduleStore` (store/base.py); a save or delete NOTIFYs every process's firing loop at once."""

    def _claim(self, work: Callable[[psycopg.Connection[Any]], bool]) -> bool:
        """`work`'s answer in one transaction, committed if True; False and nothing written if it answered False
        or one of its slots was decided already."""
        with self._conn() as conn:
            try:
                with conn.transaction() as tx:
                    if not work(conn):
                        raise psycopg.Rollback(tx)
                    return True
            except psycopg.errors.UniqueViolation:
                return False
        return False

    def now(self) -> float:
        row = self._one("SELECT extract(epoch FROM clock_timestamp())::float8")
        return float(row[0]) if row is not None else time.time()

    def save_schedule(self, schedule: ScheduleRecord, *, if_revision: int | None = None) -> ScheduleRecord:
        """Create a schedule (revision 1) or replace its definition (revision + 1, its cursor, running runs and
        counts kept); StaleRevision, nothing written, if `if_revision` is not the stored revision."""
        with self._tx() as conn:
            conn.execute("SELECT generation FROM schedule_generation WHERE id = 1 FOR UPDATE")  # one save at a time
            found = conn.execute("SELECT revision FROM schedules WHERE id = %s", (schedule.id,)).fetchone()
            current = int(found[0]) if found else None
            if if_revision is not None and current != if_revision:
                raise stale_revision(schedule.id, current, if_revision)
            now = time.time()
            definition = (schedule.target, schedule.target_kind, dumps(schedule.spec), dumps(schedule.inputs),
                          dumps(schedule.policy), bool(schedule.paused), schedule.note, schedule.origin)
            if current is None:
                conn.execute(f"INSERT INTO schedules ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s,"
                             " %s, %s, %s, %s, %s)",
                             (schedule.id, *definition[:7], now, now,
                              None if schedule.cursor is None else float(schedule.cursor), definition[7],
                              dumps(list(schedule.running)), dumps(dict(schedule.counts)), schedule.principal))
            else:
                conn.execute("UPDATE schedules SET target = %s, target_kind = %s, spec = %s, inputs = %s, policy = %s,"
                             " paused = %s, note = %s, origin = %s, revision = revision + 1, updated_at = %s"
                             " WHERE id = %s", (*definition, now, schedule.id))
            conn.execute(_NEXT_GENERATION)
            conn.execute("SELECT pg_notify(%s, %s)", (SCHEDULES, schedule.id))
            row = conn.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = %s", (schedule.id,)).fetchone()
        assert row is not None
        return _schedule(row)

    def schedule(self, schedule_id: str) -> ScheduleRecord | None:
        row = self._one(f"SELECT {_COLUMNS} FROM schedules WHERE id = %s", (schedule_id,))
        return None if row is None else _schedule(row)

    def schedules(self, *, target: str | None = None) -> builtins.list[ScheduleRecord]:
        if target is None:
            return [_schedule(row) for row in self._rows(f"SELECT {_COLUMNS} FROM schedules ORDER BY id")]
        return [_schedule(row) for row in self._rows(f"SELECT {_COLUMNS} FROM schedules WHERE target = %s"
                                                     " ORDER BY id", (target,))]

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._tx() as conn:
            conn.execute("DELETE FROM firings WHERE schedule_id = %s", (schedule_id,))
            deleted = conn.execute("DELETE FROM schedules WHERE id = %s", (schedule_id,)).rowcount > 0
            conn.execute(_NEXT_GENERATION)
            conn.execute("SELECT pg_notify(%s, %s)", (SCHEDULES, schedule_id))
        return deleted

    def schedules_generation(self) -> int:
        """A number that changes whenever a schedule is saved or deleted, by any process on the store."""
        row = self._one("SELECT generation FROM schedule_generation WHERE id = 1")
        return 0 if row is None else int(row[0])

    def advance(self, schedule_id: str, expected_cursor: float | None, cursor: float,
                firings: builtins.list[Firing], running: builtins.list[str] | None = None) -> bool:
        """Record `firings` and move the cursor to `cursor`, if it is still `expected_cursor` and none of their
        slots was decided: the one claim of those slots. False, nothing written, otherwise."""
        strays = {f.schedule_id for f in firings} - {schedule_id}
        if strays:
            raise ValueError(f"firings of {sorted(strays)} given to advance schedule {schedule_id!r}")

        def work(conn: psycopg.Connection[Any]) -> bool:
            found = conn.execute("SELECT cursor, counts FROM schedules WHERE id = %s FOR UPDATE",
                                 (schedule_id,)).fetchone()
            if found is None or found[0] != (None if expected_cursor is None else float(expected_cursor)):
                return False
            _insert_firings(conn, firings)
            conn.execute("UPDATE schedules SET cursor = %s, counts = %s, running = COALESCE(%s, running)"
                         " WHERE id = %s", (float(cursor), dumps(add_counts(loads(found[1]), counts_of(firings))),
                                            None if running is None else dumps(running), schedule_id))
            return True

        return self._claim(work)

    def add_firing(self, firing: Firing, running: builtins.list[str] | None = None) -> bool:
        """Record one firing outside the cursor (a manual trigger, a backfill slot); False if its slot was
        decided or the schedule is gone."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            found = conn.execute("SELECT counts FROM schedules WHERE id = %s FOR UPDATE",
                                 (firing.schedule_id,)).fetchone()
            if found is None:
                return False
            _insert_firings(conn, [firing])
            conn.execute("UPDATE schedules SET counts = %s, running = COALESCE(%s, running) WHERE id = %s",
                         (dumps(add_counts(loads(found[0]), counts_of([firing]))),
                          None if running is None else dumps(running), firing.schedule_id))
            return True

        return self._claim(work)

    def update_firing(self, schedule_id: str, slot: float, *, expected: Outcome, outcome: Outcome,
                      run_id: str | None = None, running: builtins.list[str] | None = None) -> bool:
        """Change a firing's outcome from `expected` to `outcome` (its run id when given, fired now); False,
        nothing written, if it is missing or its outcome is another."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            found = conn.execute("SELECT f.outcome, f.count, s.counts FROM firings f JOIN schedules s"
                                 " ON s.id = f.schedule_id WHERE f.schedule_id = %s AND f.slot = %s FOR UPDATE",
                                 (schedule_id, float(slot))).fetchone()
            if found is None or found[0] != expected:
                return False
            conn.execute("UPDATE firings SET outcome = %s, run_id = COALESCE(%s, run_id), fired_at = %s"
                         " WHERE schedule_id = %s AND slot = %s",
                         (outcome, run_id, time.time(), schedule_id, float(slot)))
            counts = add_counts(loads(found[2]), {expected: -int(found[1])})
            conn.execute("UPDATE schedules SET counts = %s, running = COALESCE(%s, running) WHERE id = %s",
                         (dumps(add_counts(counts, {outcome: int(found[1])})),
                          None if running is None else dumps(running), schedule_id))
            return True

        return self._claim(work)

    def firings(self, schedule_id: str, *, limit: int = 10, outcome: str | None = None) -> builtins.list[Firing]:
        """A schedule's firings, newest slot first (only those with `outcome`, when given)."""
        if limit <= 0:
            return []
        if outcome is None:
            rows = self._rows(f"SELECT {_FIRING_COLUMNS} FROM firings WHERE schedule_id = %s ORDER BY slot DESC"
                              " LIMIT %s", (schedule_id, limit))
        else:
            rows = self._rows(f"SELECT {_FIRING_COLUMNS} FROM firings WHERE schedule_id = %s AND outcome = %s"
                              " ORDER BY slot DESC LIMIT %s", (schedule_id, outcome, limit))
        return [_firing(row) for row in rows]

    def firing(self, schedule_id: str, slot: float) -> Firing | None:
        row = self._one(f"SELECT {_FIRING_COLUMNS} FROM firings WHERE schedule_id = %s AND slot = %s",
                        (schedule_id, float(slot)))
        return None if row is None else _firing(row)

    def note_scheduler(self, at: float) -> None:
        """Note that a firing loop ran at `at` (the latest time noted stays)."""
        self._exec("INSERT INTO scheduler (name, alive_at) VALUES ('scheduler', %s) ON CONFLICT (name)"
                   " DO UPDATE SET alive_at = GREATEST(scheduler.alive_at, excluded.alive_at)", (float(at),))

    def scheduler_alive_at(self) -> float | None:
        row = self._one("SELECT alive_at FROM scheduler WHERE name = 'scheduler'")
        return None if row is None else float(row[0])


def _insert_firings(conn: psycopg.Connection[Any], firings: builtins.list[Firing]) -> None:
    """Raises UniqueViolation if a slot was decided already."""
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO firings ({_FIRING_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(f.schedule_id, float(f.slot), f.outcome, f.run_id, float(f.fired_at), f.replica,
                          int(f.count)) for f in firings])
