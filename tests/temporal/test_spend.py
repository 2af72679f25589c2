"""Caller spend on Temporal is charged by the workers in the shared run store as nodes finish, so every server
sees it and a caller's budget holds across runs, workers and servers."""

from __future__ import annotations

import pytest
from temporal_cluster import Cluster

from ice_mcp.errors import IceError
from ice_mcp.store.sqlite import RunStore

HELLO = {"name": "hello", "nodes": [{"id": "hi", "type": "llm", "model": "gpt-4o-mini", "prompt": "say hello"}]}


@pytest.mark.slow
async def test_caller_spend_is_shared_and_its_budget_holds(cluster: Cluster) -> None:
    cluster.client.settings.caller_budget_usd = 1.0
    record = await cluster.client.run(HELLO, {}, caller="alice")
    assert record.status == "succeeded", record.error
    assert record.cost_usd > 0
    # Another server on the same store reads what the worker charged.
    store = RunStore.in_data_dir(cluster.root / "data")
    try:
        assert store.spent("alice") == pytest.approx(record.cost_usd)
        assert store.spent("bob") == 0.0
        # Spent elsewhere (another worker, another server) up to its budget: the next run is refused at start.
        store.add_spend("alice", 1.0 - record.cost_usd)
        spend = cluster.client.caller_spend("alice")
        assert spend is not None and spend.remaining() == pytest.approx(0.0, abs=1e-9)
        with pytest.raises(IceError) as refused:
            await cluster.client.start(HELLO, {}, caller="alice")
        assert refused.value.code == "over_budget"
        other = await cluster.client.run(HELLO, {}, caller="bob")
        assert other.status == "succeeded", other.error
    finally:
        store.close()
