"""The run store's lists at scale, on both stores: summaries newest first, filtered by workflow, status, trigger
and principal, paged by cursor without gaps or repeats while runs keep arriving; retention deletes ended runs
(and their journals) and never one under way."""

from __future__ import annotations

import pytest

from ice_mcp.errors import IceError
from ice_mcp.store.base import RunStorage
from ice_mcp.store.events import EventLog
from ice_mcp.store.records import RunRecord


def made(n: int, *, status: str = "succeeded", workflow: str = "w", trigger: dict | None = None,
         principal: str | None = None) -> RunRecord:
    finished = 1_000.0 + n + 0.5 if status not in ("running", "queued", "input_required") else None
    return RunRecord(run_id=f"r{n:04d}", workflow=workflow, inputs={"n": n}, status=status, started_at=1_000.0 + n,
                     finished_at=finished, duration_ms=500.0, trigger=trigger, principal=principal,
                     error={"code": "node_failed", "message": "x" * 5000} if status == "failed" else None)


def test_pages_follow_each_other_newest_first_with_every_filter(store: RunStorage, other: RunStorage) -> None:
    for n in range(60):
        store.save(made(n, status="failed" if n % 10 == 0 else "succeeded", workflow="a" if n % 2 else "b",
                        trigger={"kind": "schedule", "schedule_id": "s"} if n % 3 == 0 else None,
                        principal="oauth:i#alice" if n < 30 else None))
    assert store.flush()
    seen, cursor = [], None
    while True:
        rows, cursor = other.page(limit=7, cursor=cursor)
        seen += [row["run_id"] for row in rows]
        if cursor is None:
            break
        store.save(made(100 + len(seen)))  # a newer run meanwhile: it does not shift the pages
        assert store.flush()
    assert seen == [f"r{n:04d}" for n in range(59, -1, -1)]
    failed, _ = other.page(status="failed", limit=50)
    assert [r["run_id"] for r in failed] == [f"r{n:04d}" for n in (50, 40, 30, 20, 10, 0)]
    assert len(failed[0]["error"]["message"]) == 300  # a summary stays small
    scheduled, _ = other.page(trigger="schedule", workflow="a", limit=50)
    assert [r["run_id"] for r in scheduled] == [f"r{n:04d}" for n in range(59, -1, -1) if n % 3 == 0 and n % 2]
    calls, _ = other.page(trigger="call", status="failed", limit=50)
    assert [r["run_id"] for r in calls] == ["r0050", "r0040", "r0020", "r0010"]
    mine, more = other.page(principal="oauth:i#alice", limit=5)
    assert [r["run_id"] for r in mine] == ["r0029", "r0028", "r0027", "r0026", "r0025"] and more is not None
    assert set(mine[0]) >= {"run_id", "workflow", "status", "started_at", "finished_at", "duration_ms", "cost_usd"}
    with pytest.raises(IceError):
        other.page(cursor="not a cursor")


def test_retention_deletes_ended_runs_and_their_journals_never_one_under_way(store: RunStorage,
                                                                             other: RunStorage) -> None:
    for n in range(10):
        store.save(made(n, status="running" if n == 3 else "failed" if n == 4 else "succeeded"))
        log = EventLog(f"r{n:04d}")
        log.emit("run_started")
        store.keep_journal(log)
    assert store.flush()
    assert other.prune(before=1_006.0) == 5  # r0000..r0005 ended before 1006, but r0003 still runs
    assert store.flush()
    left = [row["run_id"] for row in other.page(limit=50)[0]]
    assert left == ["r0009", "r0008", "r0007", "r0006", "r0003"]
    assert other.get("r0000") is None and other.events("r0000") == []
    assert other.get("r0003") is not None and other.events("r0003") != []
    assert other.prune(before=10_000.0) == 4 and [r["run_id"] for r in other.page()[0]] == ["r0003"]
