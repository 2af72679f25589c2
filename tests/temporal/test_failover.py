"""Temporal runs survive their workers: a worker killed with SIGKILL mid-run hands the run to another (finished
nodes not run again, the node in flight run again with the same idempotency key); a cancel reaches the
running activity; big payloads travel by reference; long runs continue as new."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporal_cluster import Cluster, Marks, Workers, make_settings, with_test_tools

from ice_mcp import Orchestrator, Registry
from ice_mcp.engines.temporal.client import TemporalEngine
from ice_mcp.engines.temporal.wire import Tuning

STEP = 0.5  # seconds each chained node waits: long enough to kill a worker while one is in flight


def chain(labels: list[str], seconds: float = STEP, timeout: float | None = None) -> dict[str, Any]:
    nodes = [{"id": label, "type": "tool", "tool_name": "mark", "tool_args": {"label": label, "seconds": seconds},
              **({"dependencies": [labels[i - 1]]} if i else {}),
              **({"timeout_seconds": timeout, "retries": 0} if timeout is not None else {})}
             for i, label in enumerate(labels)]
    return {"name": "six", "nodes": nodes, "outputs": {"last": f"{{{{ {labels[-1]}.label }}}}"}}


@pytest.fixture
async def client(tmp_path: Path, workers: Workers) -> AsyncIterator[Orchestrator]:
    settings = make_settings(tmp_path, "temporal", workers.address, workers.queue)
    orc = Orchestrator(registry=Registry(), settings=settings)
    with_test_tools(orc)
    yield orc
    await orc.aclose()


@pytest.mark.slow
async def test_a_killed_worker_hands_the_run_to_another(client: Orchestrator, workers: Workers, marks: Marks) -> None:
    first = workers.start()
    labels = [f"n{i}" for i in range(1, 7)]
    handle = await client.start(chain(labels), {})
    await marks.wait_for("n3", timeout=60)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    workers.start()
    record = await handle.wait(timeout=120)
    assert record.status == "succeeded", record.error
    assert record.outputs == {"last": "n6"}
    counts = marks.counts()
    assert {label: counts[label] for label in labels if label != "n3"} == dict.fromkeys(set(labels) - {"n3"}, 1)
    assert counts["n3"] == 2  # the node in flight ran again, on the other worker ...
    first_key, again_key = marks.keys("n3")
    assert first_key == again_key == f"{handle.run_id}/n3/1"  # ... with the same idempotency key
    stored = client.store.get(handle.run_id)
    assert stored is not None and stored.status == "succeeded"
    assert [n.status for n in stored.nodes.values()] == ["succeeded"] * 6


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [10.0, 3.0])
async def test_a_lost_worker_never_fails_a_node_with_a_timeout(client: Orchestrator, workers: Workers, marks: Marks,
                                                              timeout: float) -> None:
    """Two workers; the one running node 3 of a 6-node chain (each node `timeout_seconds`, no retries) is
    SIGKILLed: noticing it (the heartbeat timeout) costs the node nothing, its run again has the whole
    timeout, the run succeeds, finished nodes ran once and the one in flight at most twice."""
    running = [workers.start(), workers.start()]
    labels = [f"n{i}" for i in range(1, 7)]
    handle = await client.start(chain(labels, seconds=STEP, timeout=timeout), {})
    await marks.wait_for("n3", timeout=60)
    [holder] = [p for p in running if p.pid == marks.pids("n3")[0]]
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    record = await handle.wait(timeout=120)
    assert record.status == "succeeded", record.error
    counts = marks.counts()
    assert {label: counts[label] for label in labels if label != "n3"} == dict.fromkeys(set(labels) - {"n3"}, 1)
    assert 1 <= counts["n3"] <= 2 and len(set(marks.keys("n3"))) == 1  # one attempt, run at most twice
    assert holder.pid not in marks.pids("n6")


@pytest.mark.slow
async def test_cancel_reaches_the_running_activity(cluster: Cluster, marks: Marks) -> None:
    with_test_tools(cluster.client, cluster.worker)
    handle = await cluster.client.start(chain(["slow", "after"], seconds=60), {})
    await marks.wait_for("slow")
    assert await cluster.client.cancel(handle.run_id)
    record = await handle.wait(timeout=30)  # the node sleeps 60 s: ended only because the cancel reached it
    assert record.status == "cancelled", (record.error, marks.lines())
    assert marks.keys("slow:cancelled") == [f"{handle.run_id}/slow/1"]  # the tool itself saw the cancellation
    assert "after" not in marks.counts()
    assert cluster.client.store.get(handle.run_id).status == "cancelled"  # type: ignore[union-attr]
    assert not await cluster.client.cancel(handle.run_id)


@pytest.mark.slow
async def test_big_payloads_travel_by_reference(cluster: Cluster) -> None:
    with_test_tools(cluster.client, cluster.worker)
    size = 600_000
    blueprint = {"name": "big", "nodes": [
        {"id": "make", "type": "tool", "tool_name": "blob", "tool_args": {"size": size}},
        {"id": "echo", "type": "tool", "tool_name": "json_query",
         "tool_args": {"data": {"text": "{{ make.text }}"}, "path": "length(text)"}}],
        "outputs": {"size": "{{ make.size }}", "length": "{{ echo.result }}", "text": "{{ make.text }}"}}
    record = await cluster.client.run(blueprint, {})
    assert record.status == "succeeded", record.error
    assert record.outputs is not None and record.outputs["size"] == record.outputs["length"] == size
    assert len(record.outputs["text"]) == size
    with contextlib.closing(sqlite3.connect(cluster.root / "data" / "runs.sqlite3")) as db:
        sizes = [size for (size,) in db.execute("SELECT length(data) FROM blobs")]  # kept in the run store
    assert sizes and all(size > 256 * 1024 for size in sizes)


@pytest.mark.slow
async def test_a_long_loop_continues_as_new_and_finishes(cluster: Cluster, marks: Marks) -> None:
    with_test_tools(cluster.client, cluster.worker)
    engine = cluster.client.engine
    assert isinstance(engine, TemporalEngine)
    engine.tuning = Tuning(heartbeat_seconds=2.0, history_limit=60)
    blueprint = {"name": "long", "nodes": [
        {"id": "each", "type": "loop", "items": "{{ range(30) | list }}", "item_var": "i", "concurrency": 3,
         "body": [{"id": "step", "type": "tool", "tool_name": "mark", "tool_args": {"label": "item{{ i }}"}}]}],
        "outputs": {"labels": "{{ each.results | map(attribute='label') | list }}"}}
    record = await cluster.client.run(blueprint, {})
    assert record.status == "succeeded", record.error
    assert record.outputs == {"labels": [f"item{i}" for i in range(30)]}
    assert set(marks.counts().values()) == {1}  # no item ran twice across the executions
    client = await engine.client()
    executions = [e async for e in client.list_workflows(f"WorkflowId = '{record.run_id}'")]
    assert len(executions) >= 3
    events = cluster.client.store.events(record.run_id)
    assert [e["seq"] for e in events] == list(range(len(events)))
