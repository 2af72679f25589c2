"""`ice-mcp state copy FROM TO` on real stores: a data folder's SQLite store, holding every record kind, copied
into a new PostgreSQL database by the real command line; everything reads back the same there, and running the
copy again copies nothing twice."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from ice_mcp.store.base import Owner
from ice_mcp.store.events import EventLog
from ice_mcp.store.hooks import HookRecord
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.records import RunRecord
from ice_mcp.store.schedules import Firing, ScheduleRecord
from ice_mcp.store.sqlite import RunStore, open_store
from ice_mcp.store.vocabulary import EventType


def fill(folder: Path) -> None:
    """One of every record kind, through the store's own API."""
    store = RunStore.in_data_dir(folder)
    try:
        now = time.time()
        for n in range(5):
            record = RunRecord(run_id=f"run-{n}", workflow="wf" if n % 2 else "other", inputs={"n": n},
                               status="succeeded" if n < 4 else "running", started_at=now + n)
            store.create(record, idempotency_key=f"key-{n}" if n == 1 else None, owner="owner-a")
            log = EventLog(record.run_id)
            store.keep_journal(log)
            log.emit(EventType.RUN_STARTED)
            log.emit(EventType.NODE_STARTED, "a", 1)
            store.save(record)
        store.flush()
        store.register_owner(Owner("owner-a", "host", 1))
        store.save_blueprint("bp", {"name": "bp", "v": 1})
        store.save_blueprint("bp", {"name": "bp", "v": 2})
        store.save_blueprint("gone", {"name": "gone"})
        store.delete_blueprint("gone")
        store.save_schedule(ScheduleRecord(id="nightly", target="wf", target_kind="workflow",
                                           spec={"cron": "0 3 * * *"}, inputs={}, policy={"overlap": "skip"}))
        assert store.advance("nightly", None, 1_767_225_600.25,
                             [Firing("nightly", 1_767_225_600.25, "started", "run-1", now, "r1")])
        store.save_hook(HookRecord("gh", "wf", "workflow", auth="github"))
        store.note_delivery("gh", "d1", "run-2")
        store.save_target(NotifyTarget("t1", "http://example.org/in", "whsec_x", ["failed"], workflow="wf"))
        store.enqueue([OutboxEntry("e1", "t1", {"type": "run.failed"}, next_at=100.0, created_at=100.0)])
        assert store.admit("wf", "run-4", now, max_concurrent=5, per_minute=None) is None
        store.admit_next("lined", {"queued-1": now}, now, max_concurrent=0, per_minute=None)
        store.add_spend("caller", 1.25)
        store.put_blob("sha256:abc", b"\x00payload\xff")
        store.request_cancel("run-4")
        store.note_scheduler(now)
        store.secret("request_state")
    finally:
        store.close()


def state_copy(source: str, target: str, cwd: Path) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-m", "ice_mcp", "state", "copy", source, target], capture_output=True,
                          text=True, cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_data_folder_is_copied_into_postgresql_whole(tmp_path: Path, postgres_url: str) -> None:
    folder = tmp_path / "data"
    fill(folder)
    copied = state_copy(str(folder), postgres_url, tmp_path)
    assert copied["runs"] == 5 and copied["events"] == 5 and copied["blueprints"] == 3
    for table in ("firings", "schedules", "hooks", "deliveries", "notify_targets", "outbox", "admissions",
                  "admission_queue", "spend", "blobs", "secrets", "owners", "scheduler"):
        assert copied[table] == 1, (table, copied)
    assert copied["signals"] == 5  # a cancel request and four blueprint changes
    again = state_copy(f"sqlite://{folder / 'runs.sqlite3'}", postgres_url, tmp_path)
    assert set(again.values()) == {0}  # every row was there: nothing copied twice
    source, target = open_store(None, folder), open_store(postgres_url, tmp_path)
    try:
        assert [r.run_id for r in target.list(limit=10)] == [r.run_id for r in source.list(limit=10)]
        assert target.page(workflow="wf")[0] == source.page(workflow="wf")[0]
        for n in range(5):
            assert target.run(f"run-{n}") == source.run(f"run-{n}")
            assert target.events(f"run-{n}") == source.events(f"run-{n}")
        assert target.by_idempotency_key("key-1") == "run-1"
        assert [(b.name, b.version, b.source) for b in target.blueprints()] == [("bp", 2, {"name": "bp", "v": 2})]
        assert len(target.blueprint_versions("gone")) == 1
        assert target.schedule("nightly") == source.schedule("nightly")
        assert target.firings("nightly") == source.firings("nightly")
        assert target.hook("gh") == source.hook("gh") and target.delivery_run("gh", "d1") == "run-2"
        assert target.target("t1") == source.target("t1") and target.outbox("t1") == source.outbox("t1")
        assert target.spent("caller") == 1.25 and target.get_blob("sha256:abc") == b"\x00payload\xff"
        assert target.secret("request_state") == source.secret("request_state")
        assert target.cancel_requested("run-4") and target.scheduler_alive_at() == source.scheduler_alive_at()
        assert [r for r, _ in target.orphaned_runs(Owner("me", "host", 2), 3600)] == []  # owner-a's lease holds
        # The copied admissions count: run-4 (running) holds wf's one place; queued-1 still heads `lined`'s queue.
        assert target.admit("wf", "run-9", time.time(), max_concurrent=1, per_minute=None) is not None
        assert target.admit_next("lined", {"queued-1": 0.0}, time.time(), max_concurrent=1,
                                 per_minute=None)[0] == "queued-1"
        # Servers on the copy go on: a new run is listed first, after the copied ones.
        target.create(RunRecord(run_id="run-new", workflow="wf", inputs={}, status="running",
                                started_at=time.time() + 100))
        assert [r.run_id for r in target.list(limit=2)] == ["run-new", "run-4"]
    finally:
        source.close()
        target.close()


def test_a_store_that_is_not_sql_is_a_clear_error(tmp_path: Path, redis_url: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ice_mcp", "state", "copy", str(tmp_path), redis_url],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and "error [invalid_state_url]" in done.stderr and "SQLite and PostgreSQL" in done.stderr
    missing = subprocess.run([sys.executable, "-m", "ice_mcp", "state", "copy", str(tmp_path / "nope"), redis_url],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert missing.returncode == 1 and "no data folder" in missing.stderr
