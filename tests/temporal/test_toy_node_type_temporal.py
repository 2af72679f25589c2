"""Node types from a package outside ice_mcp run on Temporal as on the embedded engine, each where its type places
it: `shout` in an activity, `twice` (a container) in the workflow's own code (tests/core/test_toy_node_type.py
has the rest of their life: validation, drawing, the read-only gate)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from core.toy_blueprint import TOY, import_toy
from temporal_cluster import Cluster, make_settings
from temporalio.api.enums.v1 import EventType

from ice_mcp import Orchestrator, Registry
from ice_mcp.engines.temporal.client import TemporalEngine
from ice_mcp.engines.temporal.planning import dispatch, plans_for
from ice_mcp.engines.temporal.wire import NODE_ACTIVITY
from ice_mcp.engines.temporal.worker import run_worker
from ice_mcp.nodes import builtin_node_types


@pytest.fixture
async def toy_cluster(tmp_path: Path, temporal_address: str) -> AsyncIterator[tuple[Cluster, ModuleType]]:
    """The conftest's cluster, every orchestrator given the toy node types beside the built-ins."""
    toy = import_toy(tmp_path)
    queue = f"test-{uuid.uuid4().hex[:8]}"
    builtins, _ = builtin_node_types()
    made = [Orchestrator(registry=Registry(), settings=make_settings(tmp_path, engine, temporal_address, queue),
                         node_types=[*builtins, toy.SHOUT_NODE, toy.TWICE_NODE])
            for engine in ("embedded", "temporal", "compare")]
    worker, client, embedded = made
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(worker, stop=stop))
    try:
        yield Cluster(client, worker, embedded, tmp_path), toy
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        for orc in made:
            await orc.aclose()


@pytest.mark.slow
async def test_toy_node_types_give_the_same_outputs_on_both_engines(toy_cluster: tuple[Cluster, ModuleType]) -> None:
    cluster, toy = toy_cluster
    embedded, temporal = [await orc.run(TOY, {"word": "hey"}) for orc in (cluster.embedded, cluster.client)]
    assert embedded.status == "succeeded", embedded.error
    assert temporal.status == "succeeded", temporal.error
    assert temporal.outputs == embedded.outputs == {
        "top": "HEY!!", "each": [{"text": "A0!"}, {"text": "B1!"}],
        "rounds": [{"text": "ROUND 1 OF HEY!!!"}, {"text": "ROUND 2 OF HEY!!!"}]}
    assert {n: (r.status, r.output) for n, r in temporal.nodes.items()} == {
        n: (r.status, r.output) for n, r in embedded.nodes.items()}
    # The worker wrote the journal where every server reads it, the toy container's nodes named as on embedded.
    assert cluster.client.store is not None
    ended = sorted(e["node_id"] for e in cluster.client.store.events(temporal.run_id) if e["type"] == "node_succeeded")
    assert ended == ["each", "each[0].inner", "each[1].inner", "s", "t", "t[1].r", "t[1].tail", "t[2].r", "t[2].tail"]
    # Each where its type placed it: the worker's workflows send shouts (and tools) to activities, run `twice` itself.
    plans = plans_for(cluster.worker.settings.temporal_task_queue)
    assert plans.node_types["shout"].execute is dispatch and plans.node_types["twice"].execute is toy.execute_twice
    engine = cluster.client.engine
    assert isinstance(engine, TemporalEngine)
    history = (await engine.client()).get_workflow_handle(temporal.run_id)
    activities: list[Any] = [event.activity_task_scheduled_event_attributes.activity_type.name
                             async for event in history.fetch_history_events()
                             if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert activities.count(NODE_ACTIVITY) == 7  # s, each[0..1].inner, t[1..2].r and t[1..2].tail
