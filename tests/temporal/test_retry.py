"""A retry on Temporal journals the nodes it reuses (reused_from), as on the embedded engine, so the retry can
itself be retried (or resumed) without running them again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from temporal_cluster import Cluster

from ice_mcp.engine.journal import replay_from_events

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
