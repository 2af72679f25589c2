"""A retry on Temporal journals the nodes it reuses (reused_from), as on the embedded engine, so the retry can
itself be retried (or resumed) without running them again; a call retried after its server died before the
run's workflow started starts it."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from temporal_cluster import Cluster

from ice_mcp.engines.temporal.client import TemporalEngine
from ice_mcp.run_handles import new_run_id
from ice_mcp.store.journal import replay_from_events
from ice_mcp.store.records import RunRecord

THREE = {"name": "three", "nodes": [
    {"id": "a", "type": "tool", "tool_name": "step", "tool_args": {"label": "a"}},
    {"id": "b", "type": "tool", "tool_name": "step", "tool_args": {"label": "b"}, "dependencies": ["a"]},
    {"id": "c", "type": "tool", "tool_name": "step", "tool_args": {"label": "c"}, "dependencies": ["b"]},
], "outputs": {"last": "{{ c.label }}"}}


@pytest.mark.slow
async def test_a_retry_journals_what_it_reuses(cluster: Cluster) -> None:
    calls: Counter[str] = Counter()
    failing = {"c"}

    def step(label: str) -> dict[str, Any]:
        calls[label] += 1
        if label in failing:
            raise RuntimeError(f"{label} is broken")
        return {"label": label}

    for orc in (cluster.client, cluster.worker):
        orc.registry.add_tool(step, name="step")
    failed = await cluster.client.run(THREE, {})
    assert failed.status == "failed"

    failing.clear()
    retried = await (await cluster.client.retry(failed.run_id)).wait()
    assert retried.status == "succeeded", retried.error
    assert retried.retry_of == failed.run_id and retried.outputs == {"last": "c"}
    assert calls == Counter({"a": 1, "b": 1, "c": 2})
    journal = cluster.client.store.events(retried.run_id)
    assert journal[0]["type"] == "run_started" and journal[0]["data"]["retry_of"] == failed.run_id
    reused = [e["node_id"] for e in journal if e.get("data", {}).get("reused_from") == failed.run_id]
    assert reused == ["a", "b"]
    assert set(replay_from_events(journal).outcomes) == {"a", "b", "c"}

    again = await (await cluster.client.retry(retried.run_id)).wait()  # the retry of a retry runs nothing again
    assert again.status == "succeeded", again.error
    assert calls == Counter({"a": 1, "b": 1, "c": 2})


@pytest.mark.slow
async def test_a_run_whose_server_died_before_starting_its_workflow_is_started_by_the_next_call(
        cluster: Cluster) -> None:
    # As a server killed between keeping the run (its idempotency key taken) and starting its workflow leaves it.
    for orc in (cluster.client, cluster.worker):
        orc.registry.add_tool(lambda label: {"label": label}, name="step")
    plan = cluster.client.compile(THREE)
    record = RunRecord(run_id=new_run_id(), workflow="three", inputs={}, started_at=time.time())
    engine = cluster.client.engine
    assert isinstance(engine, TemporalEngine) and cluster.client.store is not None
    assert cluster.client.store.create(record, idempotency_key="lost-1", owner=engine.owner_id,
                                       blueprint=plan.source_text()) is None
    again = await cluster.client.start(THREE, {}, idempotency_key="lost-1")  # the client's retry of its call
    assert again.run_id == record.run_id
    done = await again.wait(timeout=60)
    assert done.status == "succeeded", done.error
    assert done.outputs == {"last": "c"}
    assert cluster.client.get_run(record.run_id).status == "succeeded"  # type: ignore[union-attr]
