"""What every part of the PostgreSQL run store shares: the connection pool, store errors as one IceError, the
versioned migrations run under an advisory lock, and the listener that hears NOTIFY on the store's channels."""

from __future__ import annotations

import builtins
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg_pool

from ice_mcp.errors import IceError
from ice_mcp.store.base import dumps, loads

logger = logging.getLogger(__name__)

MIGRATIONS_PACKAGE = "ice_mcp.store.migrations.postgres"
MIGRATION_LOCK = 0x1CE_3C9  # pg_advisory_xact_lock's key: one process at a time migrates a database
# The channels the store NOTIFYs on (a database's own: stores in other databases never hear them).
SIGNALS, JOURNAL, SCHEDULES, ADMISSIONS = "ice_mcp_signals", "ice_mcp_journal", "ice_mcp_schedules", "ice_mcp_admissions"
CHANNELS = (SIGNALS, JOURNAL, SCHEDULES, ADMISSIONS)
TOPICS = {"signals": SIGNALS, "journal": JOURNAL, "schedules": SCHEDULES, "admissions": ADMISSIONS}
LISTEN_WAIT_SECONDS = 0.25  # the listener thread looks at its stop flag this often
RECONNECT_SECONDS = 1.0
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def unavailable(location: str, exc: BaseException) -> IceError:
    return IceError(f"the state store at {location} did not answer: {type(exc).__name__}: {exc}",
                    code="state_unavailable")


def migrations() -> builtins.list[tuple[int, str, str]]:
    """The package's migrations, (version, name, SQL text), in version order."""
    found = []
    for entry in resources.files(MIGRATIONS_PACKAGE).iterdir():
        if (match := _MIGRATION_FILE.match(entry.name)) is not None:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(conn: psycopg.Connection[Any]) -> builtins.list[int]:
    """Apply the migrations this database lacks, in one transaction under an advisory lock, so servers starting
    at once on a new database wait for the first and then find nothing left to do. Returns the versions applied."""
    applied = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at DOUBLE PRECISION NOT NULL)")
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in migrations():
            if version in done:
                continue
            conn.execute(sql.encode())  # no parameters: several statements in one go
            conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                         (version, name, time.time()))
            applied.append(version)
    return applied


class Listener:
    """One connection LISTENing on the store's channels, read by a thread of its own; each notification goes to
    the callbacks registered for its channel and payload (key) or for the whole channel (key None). When the
    connection breaks, every callback hears None (whatever it waits for may have happened meanwhile) and the
    thread connects again."""

    def __init__(self, conninfo: str, location: str) -> None:
        self._conninfo, self._location = conninfo, location
        self._subscribers: dict[tuple[str, str | None], set[Callable[[str | None], None]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.ready = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, channel: str, key: str | None, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call `callback(payload)` for each notification on `channel` (whose payload is `key`, unless None);
        returns what unsubscribes."""
        with self._lock:
            self._subscribers.setdefault((channel, key), set()).add(callback)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._listen, name="ice_mcp-pg-listen", daemon=True)
                self._thread.start()

        def unsubscribe() -> None:
            with self._lock:
                found = self._subscribers.get((channel, key))
                if found is not None:
                    found.discard(callback)
                    if not found:
                        del self._subscribers[(channel, key)]

        return unsubscribe

    def _hand(self, channel: str, payload: str | None) -> None:
        with self._lock:
            callbacks = [*self._subscribers.get((channel, None), ()),
                         *(self._subscribers.get((channel, payload), ()) if payload is not None else
                           [cb for (ch, _), cbs in self._subscribers.items() if ch == channel for cb in cbs])]
        for callback in callbacks:
            try:
                callback(payload)
            except Exception:  # one listener's bug must not deafen the others
                logger.exception("state store: a notification's callback failed")

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as conn:
                    for channel in CHANNELS:
                        conn.execute(f"LISTEN {channel}")
                    self.ready.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=LISTEN_WAIT_SECONDS):
                            self._hand(note.channel, note.payload)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                logger.warning("state store at %s: listening stopped (%s); again in a second", self._location, exc)
            self.ready.clear()
            for channel in CHANNELS:  # what was sent while nobody listened: everyone reads again
                self._hand(channel, None)
            self._stop.wait(RECONNECT_SECONDS)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=4 * LISTEN_WAIT_SECONDS)


class PgRoom:
    """The pool and the calls each part of the store makes through it; store errors become IceError
    (`state_unavailable`), never a traceback."""

    _pool: psycopg_pool.ConnectionPool[Any]
    _listener: Listener
    location: str

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise unavailable(self.location, exc) from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction, committed when the block ends (rolled back on an error)."""
        with self._conn() as conn, conn.transaction():
            yield conn

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._conn() as conn:
            return conn.execute(sql, tuple(args)).fetchall()

    def _one(self, sql: str, args: Iterable[Any] = ()) -> tuple[Any, ...] | None:
        with self._conn() as conn:
            return conn.execute(sql, tuple(args)).fetchone()

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> int:
        """Run one statement; how many rows it touched."""
        with self._conn() as conn:
            return conn.execute(sql, tuple(args)).rowcount

    def on_change(self, topic: str, key: str | None, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake()` (from another thread) as soon as a `topic` ('journal', 'schedules', 'admissions',
        'signals') of `key` (a run id, a workflow; None: any) may have changed, as NOTIFY tells; returns what
        stops it."""
        return self._listener.subscribe(TOPICS[topic], key, lambda _payload: wake())

    # Tables of JSON bodies by id (webhooks, notification targets); `table` is one of the store's own names.

    def _save_body(self, table: str, key: str, body: Any) -> None:
        self._exec(f"INSERT INTO {table} (id, body) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET"
                   " body = excluded.body", (key, dumps(body)))

    def _body(self, table: str, key: str) -> Any | None:
        row = self._one(f"SELECT body FROM {table} WHERE id = %s", (key,))
        return None if row is None else loads(row[0])

    def _bodies(self, table: str) -> builtins.list[Any]:
        return [loads(row[0]) for row in self._rows(f"SELECT body FROM {table} ORDER BY id")]

    def _delete_body(self, table: str, key: str, *, also: str, column: str) -> bool:
        with self._tx() as conn:
            deleted = conn.execute(f"DELETE FROM {table} WHERE id = %s", (key,)).rowcount
            conn.execute(f"DELETE FROM {also} WHERE {column} = %s", (key,))
        return bool(deleted)
