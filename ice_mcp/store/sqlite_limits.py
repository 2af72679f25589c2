"""Per-workflow admission in the SQLite run store: a mixin `RunStore` inherits; one write transaction decides."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager

from ice_mcp.store.records import ACTIVE

LIMITS_SCHEMA = """
CREATE TABLE IF NOT EXISTS admissions (
    workflow TEXT NOT NULL,
    run_id TEXT NOT NULL,
    admitted_at REAL NOT NULL,
    PRIMARY KEY (workflow, run_id)
);
CREATE TABLE IF NOT EXISTS admission_queue (
    workflow TEXT NOT NULL,
    run_id TEXT NOT NULL,
    queued_at REAL NOT NULL,
    PRIMARY KEY (workflow, run_id)
);
"""
WINDOW_SECONDS = 60.0  # runs_per_minute counts admissions this far back
UNWRITTEN_SECONDS = 30.0  # an admitted (or queued) run whose record is not written yet counts this long
POLL_SECONDS = 1.0  # how soon a run that may not start yet (a slot, or runs ahead in the queue) asks again


class SqliteLimits:
    """`Admissions` (store/base.py) on the store's synchronous connection, each decision one write transaction."""

    _immediate: Callable[[], AbstractContextManager[sqlite3.Connection]]  # SqliteSchedules': one write transaction

    def admit(self, workflow: str, run_id: str, now: float, *, max_concurrent: int | None,
              per_minute: int | None) -> float | None:
        """Admit a run of `workflow` if its limits allow (None), else the seconds until one may be admitted.
        Running: admitted runs whose record is active (or not written yet); a dead server's run stops
        counting once it ends, or is taken over and goes on counting."""
        with self._immediate() as db:
            wait = _limit_wait(db, workflow, now, max_concurrent, per_minute)
            if wait is None:
                _admitted(db, workflow, run_id, now)
            return wait

    def forget_admission(self, workflow: str, run_id: str) -> None:
        """A run admitted but never made (its idempotency key had started another run first) stops counting."""
        with self._immediate() as db:
            db.execute("DELETE FROM admissions WHERE workflow = ? AND run_id = ?", (workflow, run_id))

    def admit_next(self, workflow: str, waiting: Mapping[str, float], now: float, *, max_concurrent: int | None,
                   per_minute: int | None) -> tuple[str | None, float]:
        """The queue's first run, admitted if it is one of `waiting` (run id -> when it was queued; one not
        in the queue yet joins it in that place) and the limits allow: `(run_id, 0)`; else `(None, seconds to
        wait)`. A queued run leaves the queue once its record ends (cancelled) or was never written."""
        with self._immediate() as db:
            rows = db.execute("SELECT q.run_id, q.queued_at, r.status FROM admission_queue q LEFT JOIN runs r"
                              " ON r.run_id = q.run_id WHERE q.workflow = ?", (workflow,)).fetchall()
            live = {r[0]: r[1] for r in rows if _still_queued(r[2], r[1], now)}
            db.executemany("DELETE FROM admission_queue WHERE workflow = ? AND run_id = ?",
                           [(workflow, r[0]) for r in rows if r[0] not in live])
            joining = [run_id for run_id in waiting if run_id not in live]
            live.update((run_id, waiting[run_id]) for run_id in joining)
            db.executemany("INSERT INTO admission_queue (workflow, run_id, queued_at) VALUES (?, ?, ?)",
                           [(workflow, run_id, live[run_id]) for run_id in joining])
            head = min(live, key=lambda run_id: (live[run_id], run_id)) if live else None
            wait = _limit_wait(db, workflow, now, max_concurrent, per_minute)
            if head is None or head not in waiting:
                return None, max(wait or 0.0, POLL_SECONDS)  # runs ahead of these wait in other processes
            if wait is not None:
                return None, wait
            db.execute("DELETE FROM admission_queue WHERE workflow = ? AND run_id = ?", (workflow, head))
            _admitted(db, workflow, head, now)
            return head, 0.0


def _still_queued(status: str | None, queued_at: float, now: float) -> bool:
    return status == "queued" or (status is None and now - queued_at < UNWRITTEN_SECONDS)


def _limit_wait(db: sqlite3.Connection, workflow: str, now: float, max_concurrent: int | None,
                per_minute: int | None) -> float | None:
    """Seconds until the limits admit one more run (None: now); forgets admissions that no longer count."""
    rows = db.execute("SELECT a.run_id, a.admitted_at, r.status FROM admissions a LEFT JOIN runs r"
                      " ON r.run_id = a.run_id WHERE a.workflow = ?", (workflow,)).fetchall()
    running = [r for r in rows if r[2] in ACTIVE or (r[2] is None and now - r[1] < UNWRITTEN_SECONDS)]
    recent = sorted(r[1] for r in rows if r[1] > now - WINDOW_SECONDS)
    stale: builtins.list[tuple[str, str]] = [(workflow, r[0]) for r in rows
                                            if r not in running and r[1] <= now - WINDOW_SECONDS]
    db.executemany("DELETE FROM admissions WHERE workflow = ? AND run_id = ?", stale)
    wait = None
    if max_concurrent is not None and len(running) >= max_concurrent:
        wait = POLL_SECONDS
    if per_minute is not None and len(recent) >= per_minute:
        wait = max(wait or 0.0, recent[-per_minute] + WINDOW_SECONDS - now)
    return wait


def _admitted(db: sqlite3.Connection, workflow: str, run_id: str, now: float) -> None:
    db.execute("INSERT OR REPLACE INTO admissions (workflow, run_id, admitted_at) VALUES (?, ?, ?)",
               (workflow, run_id, now))
