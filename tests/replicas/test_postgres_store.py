"""What only the PostgreSQL run store does, on a real PostgreSQL: picked by its URL, a clear error when away,
versioned migrations that servers starting at once apply exactly once, NOTIFY waking followers, firing loops
and admission queues as soon as something changed, and a blueprint's document text kept byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ice_mcp.errors import IceError
from ice_mcp.store.events import EventLog
from ice_mcp.store.postgres import PostgresRunStore
from ice_mcp.store.postgres_room import migrations
from ice_mcp.store.records import RunRecord
from ice_mcp.store.schedules import ScheduleRecord
from ice_mcp.store.sqlite import open_store
from ice_mcp.store.vocabulary import EventType
from ice_mcp_dev.cluster import free_port


def test_open_store_picks_postgresql_by_its_url(tmp_path: Path, postgres_url: str) -> None:
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = open_store(url, tmp_path)
        try:
            assert isinstance(store, PostgresRunStore) and store.shared and store.location == url
        finally:
            store.close()


def test_an_unreachable_postgresql_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IceError) as caught:
        open_store(f"postgresql://ice:secret@127.0.0.1:{free_port()}/x", tmp_path)
    assert caught.value.code == "state_unavailable"
    assert "secret" not in caught.value.message and "ice:***@127.0.0.1" in caught.value.message


def _open_after(url: str, barrier: Any) -> None:
    barrier.wait()  # every process opens the new database at the same moment
    PostgresRunStore(url).close()


def test_servers_starting_at_once_migrate_a_new_database_once(postgres_url: str) -> None:
    """Four processes open one new database together: the advisory lock lets one apply every migration while
    the others wait, then find nothing left to do (no 'relation already exists')."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_open_after, args=(postgres_url, barrier)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    with psycopg.connect(postgres_url) as conn:
        applied = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert applied == [(version, name) for version, name, _ in migrations()]
    assert [version for version, _ in applied] == list(range(1, len(applied) + 1))


def test_a_migration_the_database_lacks_is_applied_on_open(postgres_url: str) -> None:
    """A database made by an earlier version (its last migration not applied) gains it when a server opens it."""
    PostgresRunStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE blueprints DROP COLUMN text")
        conn.execute("DELETE FROM schema_migrations WHERE version = 2")
    store = PostgresRunStore(postgres_url)
    try:
        store.save_blueprint("b", {"name": "b"}, text="name: b\n")
        assert [bp.text for bp in store.blueprint_versions("b")] == ["name: b\n"]
    finally:
        store.close()


def test_a_blueprints_text_is_kept_byte_for_byte(postgres_url: str, tmp_path: Path) -> None:
    pg = open_store(postgres_url, tmp_path)
    try:
        text = "# the editor's comment\nname: b   \nnodes: []\n\n"
        assert isinstance(pg, PostgresRunStore)
        assert pg.save_blueprint("b", {"name": "b"}, text=text) == 1
        assert pg.save_blueprint("b", {"name": "b", "v": 2}) == 2
        assert [(bp.version, bp.text) for bp in pg.blueprint_versions("b")] == [(1, text), (2, None)]
        [current] = pg.blueprints()
        assert current.version == 2 and current.text is None
    finally:
        pg.close()


def _record(run_id: str, workflow: str = "wf", status: str = "running") -> RunRecord:
    return RunRecord(run_id=run_id, workflow=workflow, inputs={}, status=status, started_at=time.time())


async def test_a_follower_wakes_as_soon_as_the_journal_grows(postgres_url: str, tmp_path: Path) -> None:
    """The writer's NOTIFY wakes the follower on another connection: it reads each batch without polling."""
    writer, reader = open_store(postgres_url, tmp_path), open_store(postgres_url, tmp_path)
    try:
        record = _record("r1")
        writer.create(record)
        log = EventLog("r1")
        writer.keep_journal(log)
        got: list[int] = []
        woken = threading.Event()
        assert isinstance(reader, PostgresRunStore)
        stop = reader.on_change("journal", "r1", woken.set)
        async with contextlib.aclosing(reader.follow("r1")) as batches:
            first = asyncio.ensure_future(anext(batches))
            await asyncio.sleep(0.05)
            while not reader._listener.ready.is_set():  # the listener connected
                await asyncio.sleep(0.01)
            log.emit(EventType.RUN_STARTED)
            got += [e["seq"] for e in await asyncio.wait_for(first, 5)]
        stop()
        assert got == [0] and woken.is_set()
    finally:
        writer.close()
        reader.close()


def test_schedule_changes_and_ended_runs_notify_every_process(postgres_url: str, tmp_path: Path) -> None:
    """What the firing loops (a schedule saved or deleted) and the admission queues (a run of their workflow
    ended) wait for reaches another process's store as a NOTIFY."""
    one, two = open_store(postgres_url, tmp_path), open_store(postgres_url, tmp_path)
    assert isinstance(two, PostgresRunStore)
    try:
        schedules, admissions, others = threading.Event(), threading.Event(), threading.Event()
        stops = [two.on_change("schedules", None, schedules.set), two.on_change("admissions", "wf", admissions.set),
                 two.on_change("admissions", "other", others.set)]
        assert two._listener.ready.wait(10)
        one.save_schedule(ScheduleRecord(id="s", target="wf", target_kind="workflow", spec={"every": "1h"},
                                         inputs={}, policy={}))
        assert schedules.wait(5)
        record = _record("r2")
        one.create(record)
        record.status = "succeeded"
        one.save(record)
        assert admissions.wait(5) and not others.is_set()
        for stop in stops:
            stop()
    finally:
        one.close()
        two.close()


async def test_an_answer_too_large_for_a_notification_is_read_from_the_store(postgres_url: str, tmp_path: Path) -> None:
    """NOTIFY carries at most 8,000 bytes: a larger answer travels by its number and is read where it is kept."""
    one, two = open_store(postgres_url, tmp_path), open_store(postgres_url, tmp_path)
    big = {"node": "ok", "answer": {"text": "y" * 20_000}, "by": "ann", "declined": False}
    try:
        async with contextlib.aclosing(two.signals()) as signals:
            assert (await anext(signals)).kind == "listening"
            one.send_answer("r1", big)
            one.request_cancel("r2")
            heard = [await asyncio.wait_for(anext(signals), 5) for _ in range(2)]
        assert [(s.kind, s.subject, s.data) for s in heard] == [("answer", "r1", big), ("cancel", "r2", None)]
    finally:
        one.close()
        two.close()
