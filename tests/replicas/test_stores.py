"""The run-store contract, on both stores: SQLite in a data folder and Redis (a real redis-server)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ice_mcp.errors import IceError
from ice_mcp.store.base import Owner, RunStorage, Signal
from ice_mcp.store.events import EventLog
from ice_mcp.store.records import RunRecord
from ice_mcp.store.redis import RedisRunStore, redact
from ice_mcp.store.sqlite import RunStore, open_store
from ice_mcp_dev.cluster import free_port


def record(run_id: str, workflow: str = "w", status: str = "running", started: float = 1_700_000_000.0) -> RunRecord:
    return RunRecord(run_id=run_id, workflow=workflow, inputs={"x": 1}, status=status, started_at=started)


def test_open_store_picks_the_store_by_url(tmp_path: Path, redis_url: str) -> None:
    default = open_store(None, tmp_path)
    try:
        assert isinstance(default, RunStore) and default.path == tmp_path / "runs.sqlite3" and not default.shared
    finally:
        default.close()
    shared = open_store(redis_url, tmp_path)
    try:
        assert isinstance(shared, RedisRunStore) and shared.shared
    finally:
        shared.close()
    for bad in ("mysql://db/x", "sqlite://", "nonsense"):
        with pytest.raises(IceError) as caught:
            open_store(bad, tmp_path)
        assert caught.value.code == "invalid_state_url"


def test_an_unreachable_redis_is_a_clear_error(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(IceError) as caught:
        open_store(f"redis://:secret@127.0.0.1:{free_port()}/0", tmp_path)
    assert caught.value.code == "state_unavailable"
    assert "secret" not in caught.value.message and "***" in caught.value.message
    assert time.monotonic() - started < 6
    assert redact("redis://user:pw@host:1/2") == "redis://user:***@host:1/2"


def test_run_ids_by_prefix_for_short_ids(store: RunStorage, other: RunStorage) -> None:
    for run_id in ("feed01", "feed02", "fee*03", "beef"):
        store.save(record(run_id))
    assert store.flush()
    assert other.run_ids("feed") == ["feed01", "feed02"]
    assert other.run_ids("feed", limit=1) == ["feed01"]
    assert other.run_ids("fee*") == ["fee*03"]  # a pattern character is only itself
    assert other.run_ids("dead") == []


def test_records_lists_and_keys(store: RunStorage, other: RunStorage) -> None:
    store.save(record("a", "alpha", started=10.0), idempotency_key="key-a", owner="o1",
               blueprint={"name": "alpha"}, version=3)
    store.save(record("b", "beta", started=20.0))
    store.save(record("c", "alpha", "failed", started=30.0), retry_of="a")
    assert store.flush()
    done = record("a", "alpha", "succeeded", started=10.0)
    done.outputs = {"big": 2**70}  # beyond 64 bits: the stdlib fallback of the codec
    store.save(done)
    assert store.flush()

    kept = other.run("a")
    assert kept is not None and kept.record.status == "succeeded" and kept.record.outputs == {"big": 2**70}
    assert (kept.owner, kept.blueprint, kept.version, kept.idempotency_key, kept.retry_of) == (
        "o1", {"name": "alpha"}, 3, "key-a", None)
    assert other.run("c").retry_of == "a"  # type: ignore[union-attr]
    assert other.get("nope") is None and other.run("nope") is None
    assert other.by_idempotency_key("key-a") == "a" and other.by_idempotency_key("other") is None
    assert [r.run_id for r in other.list()] == ["c", "b", "a"]
    assert [r.run_id for r in other.list(limit=2)] == ["c", "b"]
    assert [r.run_id for r in other.list(workflow="alpha")] == ["c", "a"]
    assert [r.run_id for r in other.list(status="running")] == ["b"]
    assert [r.run_id for r in other.list(status="succeeded", workflow="alpha")] == ["a"]
    assert other.list(status="failed", workflow="beta") == []


async def test_journals_are_read_and_followed_as_they_grow(store: RunStorage, other: RunStorage) -> None:
    run = record("j")
    store.save(run)
    log = EventLog("j")
    store.keep_journal(log)
    log.emit("run_started")
    log.emit("node_started", "a", 1)
    assert store.flush()
    assert [e["type"] for e in other.events("j")] == ["run_started", "node_started"]
    assert other.events("j")[1] == {"type": "node_started", "run_id": "j", "seq": 1, "ts": log.events[1].ts,
                                    "node_id": "a", "attempt": 1}

    seen: list[dict[str, object]] = []
    quiet = 0

    async def follow() -> None:
        nonlocal quiet
        async with contextlib.aclosing(other.follow("j", after=0)) as batches:
            async for batch in batches:
                quiet += not batch
                seen.extend(batch)
                if any(e["type"] == "run_finished" for e in batch):
                    return

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.1)
    log.emit("node_succeeded", "a", 1, output={"v": 1})
    await asyncio.sleep(1.3)  # a quiet second: the follower gets an empty batch
    log.emit("run_finished", status="succeeded")
    run.status = "succeeded"
    store.save(run)
    await asyncio.wait_for(follower, 5)
    assert [e["seq"] for e in seen] == [1, 2, 3]
    assert seen[1]["data"] == {"output": {"v": 1}}
    assert quiet >= 1
    assert [e["seq"] for e in other.events("j", after=1)] == [2, 3]
    assert other.events("j", after=3) == []


def test_owners_leases_and_claims(store: RunStorage, other: RunStorage) -> None:
    me, them = Owner("me", "host-a", os.getpid()), Owner("them", "host-b", 1)
    store.register_owner(them)
    store.save(record("theirs"), owner="them")
    store.save(record("nobodys"))
    store.save(record("over", status="succeeded"), owner="ghost")
    assert store.flush()
    assert sorted(other.orphaned_runs(me, lease_seconds=10)) == [("nobodys", None)]
    assert other.owner_alive("them", me, 10) and not other.owner_alive("ghost", me, 10)
    assert not other.owner_alive(None, me, 10)
    time.sleep(0.05)
    assert sorted(other.orphaned_runs(me, lease_seconds=0.01)) == [("nobodys", None), ("theirs", "them")]
    store.heartbeat(them)
    assert store.flush()
    assert other.owner_alive("them", me, 5)  # heartbeats renew the lease
    # On this host a dead process is gone at once, whatever its lease says.
    dead = Owner("dead", me.host, 2**22 + 12345)
    store.register_owner(dead)
    assert not other.owner_alive("dead", me, 3600)

    assert other.claim("theirs", "them", me)
    assert not store.claim("theirs", "them", Owner("late", "h", 1))  # taken first
    assert other.run("theirs").owner == "me"  # type: ignore[union-attr]
    assert other.claim("nobodys", None, me) and not other.claim("missing", None, me)
    store.release_owner(them)
    assert not other.owner_alive("them", me, 3600)


async def test_signals_cancel_requests_and_blueprint_changes(store: RunStorage, other: RunStorage) -> None:
    heard: list[Signal] = []

    async def listen() -> None:
        async with contextlib.aclosing(other.signals()) as signals:
            async for signal in signals:
                heard.append(signal)

    listener = asyncio.create_task(listen())
    for _ in range(100):  # everything from `listening` on is heard
        if heard:
            break
        await asyncio.sleep(0.02)
    assert heard == [Signal("listening", "")]
    assert not other.cancel_requested("r1")
    store.request_cancel("r1")
    assert store.save_blueprint("bp", {"name": "bp"}) == 1
    assert store.delete_blueprint("bp") and not store.delete_blueprint("bp")
    for _ in range(100):
        if len(heard) == 4:
            break
        await asyncio.sleep(0.05)
    listener.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await listener
    assert heard[1:] == [Signal("cancel", "r1"), Signal("blueprint", "bp"), Signal("blueprint", "bp")]
    assert other.cancel_requested("r1") and not other.cancel_requested("r2")


def test_blueprint_versions_and_deletion(store: RunStorage, other: RunStorage) -> None:
    assert store.save_blueprint("b", {"name": "b", "v": 1}) == 1
    assert other.save_blueprint("b", {"name": "b", "v": 2}) == 2
    assert store.save_blueprint("a", {"name": "a"}) == 1
    assert [(b.name, b.version, b.source) for b in other.blueprints()] == [
        ("a", 1, {"name": "a"}), ("b", 2, {"name": "b", "v": 2})]
    assert [v.version for v in other.blueprint_versions("b")] == [1, 2]
    assert other.blueprint_versions("b")[0].created_at <= time.time()
    assert store.delete_blueprint("b") and not other.delete_blueprint("missing")
    assert [b.name for b in other.blueprints()] == ["a"]
    assert [v.version for v in other.blueprint_versions("b")] == [1, 2]  # kept: runs name their version
    assert store.save_blueprint("b", {"name": "b", "v": 3}) == 3  # registered again after a delete
    assert [(b.name, b.version) for b in other.blueprints()] == [("a", 1), ("b", 3)]


def test_caller_spend_adds_up_across_connections(store: RunStorage, other: RunStorage) -> None:
    assert store.spent("alice") == 0.0
    assert store.add_spend("alice", 0.25) == pytest.approx(0.25)
    assert other.add_spend("alice", 0.5) == pytest.approx(0.75)
    assert store.spent("alice") == pytest.approx(0.75) and other.spent("bob") == 0.0


def test_redis_idempotency_keys_expire(redis_url: str) -> None:
    store = RedisRunStore(redis_url, idempotency_key_seconds=0.2)
    try:
        store.save(record("k"), idempotency_key="short")
        store.save(record("k2"), idempotency_key="short")  # taken: the key stays with the first run
        assert store.flush()
        assert store.by_idempotency_key("short") == "k"
        assert store.run("k2").idempotency_key is None  # type: ignore[union-attr]
        time.sleep(0.3)
        assert store.by_idempotency_key("short") is None
    finally:
        store.close()


def test_a_redis_that_goes_away_is_a_clear_error(tmp_path: Path) -> None:
    from ice_mcp_dev.cluster import RedisProcess

    server = RedisProcess(tmp_path / "redis")
    server.start()
    store = RedisRunStore(server.url(), timeout=1.0)
    try:
        store.save(record("gone"))
        assert store.flush()
        server.stop()
        with pytest.raises(IceError) as caught:
            store.get("gone")
        assert caught.value.code == "state_unavailable"
        store.save(record("lost"))  # queued: the writer reports it, the caller is never stopped
        assert store.flush(timeout=10)
        assert store.write_errors >= 1
    finally:
        store.close()
        server.stop()


def test_an_idempotency_key_goes_to_the_first_run_created_even_without_a_flush(store: RunStorage,
                                                                                 other: RunStorage) -> None:
    # Two processes keep a run under the same key at once: the second gets the first's id, no write is lost.
    now = time.time()
    assert store.create(record("first", "alpha", started=now), idempotency_key="same") is None
    assert other.create(record("second", "alpha", started=now), idempotency_key="same") == "first"
    assert other.create(record("third", "alpha")) is None  # no key: no arbitration
    assert store.flush() and other.flush()
    assert other.by_idempotency_key("same") == "first" and other.run("second") is None
    assert getattr(store, "write_errors", 0) == getattr(other, "write_errors", 0) == 0


def test_large_payloads_are_kept_by_content_hash(store: RunStorage, other: RunStorage) -> None:
    key, data = "ab" * 32, b"x" * 300_000
    store.put_blob(key, data)
    store.put_blob(key, data)  # kept once
    assert other.get_blob(key) == data
    with pytest.raises(IceError) as missing:
        other.get_blob("cd" * 32)
    assert missing.value.code == "payload_missing"


def test_a_secret_is_made_once_and_shared(store: RunStorage, other: RunStorage) -> None:
    first = store.secret("request-state")
    assert len(first) == 32 and other.secret("request-state") == first == store.secret("request-state")
    assert other.secret("another") != first


def _open_after(path: str, barrier: Any) -> None:
    barrier.wait()  # every process opens the new folder at the same moment
    RunStore(Path(path)).close()


def test_processes_opening_a_new_data_folder_at_once_all_get_the_store(tmp_path: Path) -> None:
    """Two servers started together on a new folder: one makes and migrates the schema, the others wait for it
    (they used to fail with 'duplicate column name' or 'database is locked')."""
    context = multiprocessing.get_context("fork")  # the children start at once: the race is real
    for attempt in range(6):
        path = tmp_path / f"try{attempt}" / "runs.sqlite3"
        barrier = context.Barrier(4)
        processes = [context.Process(target=_open_after, args=(str(path), barrier)) for _ in range(4)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [process.exitcode for process in processes] == [0, 0, 0, 0]
        store = RunStore(path)
        assert store.get("none") is None
        store.close()


def _create_then_die(url: str, folder: str, run_ids: list[str]) -> None:
    opened = open_store(url, Path(folder))
    for run_id in run_ids:
        opened.create(record(run_id))
    os.kill(os.getpid(), 9)  # SIGKILL right after the ids could have been handed out: no flush, no close


def test_a_new_runs_record_outlives_its_process_killed_right_after_create(url: str, tmp_path: Path,
                                                                          store: RunStorage) -> None:
    """A run id handed out (a webhook's 202, a tool's answer) names a run every other process finds, even when
    the process that made it is SIGKILLed the next instant."""
    run_ids = [f"killed-{n}" for n in range(20)]
    child = multiprocessing.get_context("fork").Process(target=_create_then_die, args=(url, str(tmp_path), run_ids))
    child.start()
    child.join(60)
    assert child.exitcode == -9
    assert [run_id for run_id in run_ids if store.run(run_id) is None] == []


def test_blueprint_versions_keep_their_document_text(store: RunStorage, other: RunStorage) -> None:
    text = "# kept as written\nname: t\nnodes: []\n"
    assert store.save_blueprint("t", {"name": "t", "nodes": []}, text) == 1
    assert other.save_blueprint("t", {"name": "t", "nodes": [], "description": "d"}) == 2
    assert [(v.version, v.text) for v in other.blueprint_versions("t")] == [(1, text), (2, None)]
    assert [(b.version, b.text) for b in other.blueprints() if b.name == "t"] == [(2, None)]
