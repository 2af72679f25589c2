"""Per-workflow admission in the PostgreSQL run store: a mixin `PostgresRunStore` inherits. Each decision is one
transaction holding the workflow's advisory lock, so processes deciding for one workflow take turns and those
deciding for others never wait; a decision that frees or fills a place NOTIFYs the workflow's queues."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg

from ice_mcp.store.postgres_room import ADMISSIONS, PgRoom
from ice_mcp.store.records import ACTIVE
from ice_mcp.store.sqlite_limits import POLL_SECONDS, UNWRITTEN_SECONDS, WINDOW_SECONDS


class PgLimits(PgRoom):
    """`Admissions` (store/base.py), the same rules as the SQLite store's (store/sqlite_limits.py)."""

    @contextmanager
    def _decide(self, workflow: str) -> Iterator[psycopg.Connection[Any]]:
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('ice_mcp.admission:' || %s))", (workflow,))
            yield conn

    def admit(self, workflow: str, run_id: str, now: float, *, max_concurrent: int | None,
              per_minute: int | None) -> float | None:
        """Admit a run of `workflow` if its limits allow (None), else the seconds until one may be admitted."""
        with self._decide(workflow) as conn:
            wait = _limit_wait(conn, workflow, now, max_concurrent, per_minute)
            if wait is None:
                _admitted(conn, workflow, run_id, now)
            return wait

    def forget_admission(self, workflow: str, run_id: str) -> None:
        """A run admitted but never made (its idempotency key had started another run first) stops counting."""
        with self._decide(workflow) as conn:
            conn.execute("DELETE FROM admissions WHERE workflow = %s AND run_id = %s", (workflow, run_id))
            conn.execute("SELECT pg_notify(%s, %s)", (ADMISSIONS, workflow))

    def admit_next(self, workflow: str, waiting: Mapping[str, float], now: float, *, max_concurrent: int | None,
                   per_minute: int | None) -> tuple[str | None, float]:
        """The queue's first run, admitted if it is one of `waiting` (run id -> when it was queued; one not in
        the queue yet joins it in that place) and the limits allow: `(run_id, 0)`; else `(None, seconds to
        wait)`. A queued run leaves the queue once its record ends (cancelled) or was never written."""
        with self._decide(workflow) as conn:
            rows = conn.execute("SELECT q.run_id, q.queued_at, r.status FROM admission_queue q LEFT JOIN runs r"
                                " ON r.run_id = q.run_id WHERE q.workflow = %s", (workflow,)).fetchall()
            live = {r[0]: r[1] for r in rows if _still_queued(r[2], r[1], now)}
            gone = [r[0] for r in rows if r[0] not in live]
            if gone:
                conn.execute("DELETE FROM admission_queue WHERE workflow = %s AND run_id = ANY(%s)", (workflow, gone))
            joining = [run_id for run_id in waiting if run_id not in live]
            live.update((run_id, waiting[run_id]) for run_id in joining)
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO admission_queue (workflow, run_id, queued_at) VALUES (%s, %s, %s)"
                                " ON CONFLICT (workflow, run_id) DO NOTHING",
                                [(workflow, run_id, live[run_id]) for run_id in joining])
            head = min(live, key=lambda run_id: (live[run_id], run_id)) if live else None
            wait = _limit_wait(conn, workflow, now, max_concurrent, per_minute)
            if head is None or head not in waiting:
                return None, max(wait or 0.0, POLL_SECONDS)  # runs ahead of these wait in other processes
            if wait is not None:
                return None, wait
            conn.execute("DELETE FROM admission_queue WHERE workflow = %s AND run_id = %s", (workflow, head))
            _admitted(conn, workflow, head, now)
            conn.execute("SELECT pg_notify(%s, %s)", (ADMISSIONS, workflow))  # the next in line is first now
            return head, 0.0


def _still_queued(status: str | None, queued_at: float, now: float) -> bool:
    return status == "queued" or (status is None and now - queued_at < UNWRITTEN_SECONDS)


def _limit_wait(conn: psycopg.Connection[Any], workflow: str, now: float, max_concurrent: int | None,
                per_minute: int | None) -> float | None:
    """Seconds until the limits admit one more run (None: now); forgets admissions that no longer count."""
    rows = conn.execute("SELECT a.run_id, a.admitted_at, r.status FROM admissions a LEFT JOIN runs r"
                        " ON r.run_id = a.run_id WHERE a.workflow = %s", (workflow,)).fetchall()
    running = [r for r in rows if r[2] in ACTIVE or (r[2] is None and now - r[1] < UNWRITTEN_SECONDS)]
    recent = sorted(r[1] for r in rows if r[1] > now - WINDOW_SECONDS)
    stale: builtins.list[str] = [r[0] for r in rows if r not in running and r[1] <= now - WINDOW_SECONDS]
    if stale:
        conn.execute("DELETE FROM admissions WHERE workflow = %s AND run_id = ANY(%s)", (workflow, stale))
    wait = None
    if max_concurrent is not None and len(running) >= max_concurrent:
        wait = POLL_SECONDS
    if per_minute is not None and len(recent) >= per_minute:
        wait = max(wait or 0.0, recent[-per_minute] + WINDOW_SECONDS - now)
    return wait


def _admitted(conn: psycopg.Connection[Any], workflow: str, run_id: str, now: float) -> None:
    conn.execute("INSERT INTO admissions (workflow, run_id, admitted_at) VALUES (%s, %s, %s)"
                 " ON CONFLICT (workflow, run_id) DO UPDATE SET admitted_at = excluded.admitted_at",
                 (workflow, run_id, now))
