"""Per-workflow admission in the SQLite run store: a mixin `RunStore` inherits; one write transaction decides."""

from __future__ import annotations

import sqlite3
import threading

from ice_mcp.store.records import ACTIVE

LIMITS_SCHEMA = """
CREATE TABLE IF NOT EXISTS admissions (
    workflow TEXT NOT NULL,
    run_id TEXT NOT NULL,
    admitted_at REAL NOT NULL,
    PRIMARY KEY (workflow, run_id)
);
"""
WINDOW_SECONDS = 60.0  # runs_per_minute counts admissions this far back
UNWRITTEN_SECONDS = 30.0  # an admitted run whose record is not written yet counts as running this long


class SqliteLimits:
    _read: sqlite3.Connection
    _read_lock: threading.Lock

    def admit(self, workflow: str, run_id: str, now: float, *, max_concurrent: int | None,
              per_minute: int | None) -> float | None:
        """Admit a run of `workflow` if its limits allow (None), else the seconds until one may be admitted.
        Running: admitted runs whose record is active (or not written yet); a dead server's run stops
        counting once it ends, or is taken over and goes on counting."""
        with self._read_lock:
            db = self._read
            db.execute("BEGIN IMMEDIATE")
            try:
                rows = db.execute("SELECT a.run_id, a.admitted_at, r.status FROM admissions a LEFT JOIN runs r"
                                  " ON r.run_id = a.run_id WHERE a.workflow = ?", (workflow,)).fetchall()
                running = [r for r in rows if r[2] in ACTIVE or (r[2] is None and now - r[1] < UNWRITTEN_SECONDS)]
                recent = sorted(r[1] for r in rows if r[1] > now - WINDOW_SECONDS)
                stale = [(workflow, r[0]) for r in rows if r not in running and r[1] <= now - WINDOW_SECONDS]
                db.executemany("DELETE FROM admissions WHERE workflow = ? AND run_id = ?", stale)
                wait = None
                if max_concurrent is not None and len(running) >= max_concurrent:
                    wait = 1.0
                if per_minute is not None and len(recent) >= per_minute:
                    wait = max(wait or 0.0, recent[-per_minute] + WINDOW_SECONDS - now)
                if wait is None:
                    db.execute("INSERT OR REPLACE INTO admissions (workflow, run_id, admitted_at) VALUES (?, ?, ?)",
                               (workflow, run_id, now))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return wait
