"""A run on `--engine temporal` notifies like an embedded one: the server following it enqueues the event with
the run's final record once its workflow's result is in, and its outbox delivers it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from standardwebhooks import Webhook
from temporal_cluster import Cluster

from ice_mcp.errors import IceError


async def test_a_failed_temporal_run_is_notified_with_its_final_record(cluster: Cluster, make_receiver: Any) -> None:
    orc = cluster.client
    for each in (orc, cluster.worker):
        each.register_blueprint({"name": "breaks", "nodes": [
            {"id": "b", "type": "code", "code": "raise ValueError('no sales file')", "retries": 0}]})
    orc.settings.allow_net = ("127.0.0.1",)
    orc.notifications.start_loop()
    with make_receiver([]) as (got, url):
        target = orc.notifications.set(workflow="breaks", url=url, on=["failed"])
        record = await orc.run("breaks", {})
        assert record.status == "failed"
        deadline = time.monotonic() + 20
        while not got.received:
            assert time.monotonic() < deadline, "no notification"
            await asyncio.sleep(0.05)
    [(headers, body, _)] = got.received
    event = Webhook(target["secret"]).verify(body, headers)
    assert event["type"] == "run.failed" and event["data"]["run_id"] == record.run_id
    assert "no sales file" in event["data"]["error"]["message"] and event["data"]["status"] == "failed"


async def test_queueing_over_a_limit_is_refused_on_temporal_with_a_clear_error(cluster: Cluster) -> None:
    """`on_limit: queue` keeps its queue with the embedded engine's leases: on Temporal a start says so."""
    cluster.client.register_blueprint({"name": "lined", "limits": {"max_concurrent_runs": 1, "on_limit": "queue"},
                                       "nodes": [{"id": "t", "type": "tool", "tool_name": "render_template",
                                                  "tool_args": {"template": "x"}}]})
    with pytest.raises(IceError) as refused:
        await cluster.client.start("lined", {})
    assert refused.value.code == "unsupported" and "embedded engine" in refused.value.message
    assert "reject" in refused.value.message
