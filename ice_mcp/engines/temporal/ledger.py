"""What each caller (an MCP client's token hash) has spent, shared by every server and worker of a cluster:
a small SQLite table beside the run store (one machine), charged atomically as nodes finish."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class SpendLedger:
    """Caller spend in `path` (SQLite, WAL: several processes on one machine share it)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS caller_spend (caller TEXT PRIMARY KEY, usd REAL NOT NULL)")
        self._lock = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> SpendLedger:
        return cls(data_dir / "spend.sqlite3")

    def charge(self, caller: str, usd: float) -> float:
        """Add `usd` to the caller's spend; returns the new total."""
        with self._lock:
            row = self._db.execute("INSERT INTO caller_spend (caller, usd) VALUES (?, ?) ON CONFLICT(caller)"
                                   " DO UPDATE SET usd = usd + excluded.usd RETURNING usd", (caller, usd)).fetchone()
        return float(row[0])

    def spent(self, caller: str) -> float:
        with self._lock:
            row = self._db.execute("SELECT usd FROM caller_spend WHERE caller = ?", (caller,)).fetchone()
        return float(row[0]) if row else 0.0

    def close(self) -> None:
        with self._lock:
            self._db.close()
