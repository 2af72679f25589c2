"""A `human` node of a Temporal run is answered through every channel an embedded run's is: a task's
`tasks/update`, a 2026 client's multi-round InputRequiredResult, elicitation on a 2025 session, and
run_respond (the server over HTTP in this process; the run on the test's worker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp_helpers import GATE, TASK_GATE, http_client, http_server, make_options, structured
from tasks_client import TasksClient
from temporal_cluster import Cluster

SHIPPED = "shipped to ACME"


async def accept(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert params.message == "Ship it to ACME?"
    return types.ElicitResult(action="accept", content={"approved": True})


@pytest.fixture
async def url(cluster: Cluster) -> AsyncIterator[str]:
    for orc in (cluster.client, cluster.worker):
        orc.register_blueprint(GATE)
        orc.register_blueprint(TASK_GATE)
    # A call waits up to 3 s: long enough for the node after the answer on a busy machine
    async with http_server(cluster.client, make_options(wait_seconds=3, task_after_seconds=0.3)) as base:
        yield base


async def test_through_a_task(url: str) -> None:
    tasks = TasksClient(lambda key, params: {"action": "accept", "content": {"approved": True}})
    async with http_client(url, extensions=[tasks]) as client:
        answer = await client.call_tool("workflow_task_gate", {"customer": "ACME"})
    assert structured(answer)["outputs"] == {"shipped": SHIPPED, "by": "mcp:tasks/update"}
    waiting = next(t for t in tasks.seen if t["status"] == "input_required")
    assert waiting["inputRequests"]["ok"]["params"]["message"] == "Ship it to ACME?"


async def test_in_the_call_and_by_elicitation(url: str) -> None:
    async with http_client(url, elicitation_callback=accept) as client:  # 2026: a multi-round call
        answer = await client.call_tool("workflow_gate", {"customer": "ACME"})
    assert structured(answer)["outputs"] == {"shipped": SHIPPED, "by": "mcp:input_required"}
    async with http_client(url, mode="legacy", elicitation_callback=accept) as client:  # 2025: elicitation
        answer = await client.call_tool("workflow_gate", {"customer": "ACME"})
    assert structured(answer)["outputs"] == {"shipped": SHIPPED, "by": "mcp:elicitation"}


async def test_by_run_respond(url: str) -> None:
    async with http_client(url) as client:
        waiting = structured(await client.call_tool("workflow_gate", {"customer": "ACME"}))
        assert waiting["status"] == "input_required"
        assert waiting["questions"]["ok"]["question"] == "Ship it to ACME?"
        status = structured(await client.call_tool("run_status", {"run_id": waiting["run_id"]}))
        assert status["questions"]["ok"]["approval"] is True
        listed = structured(await client.call_tool("run_list", {"status": "input_required"}))
        assert waiting["run_id"] in [run["run_id"] for run in listed["runs"]]
        wrong = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                       "answer": {"approved": "yes"}})
        assert wrong.is_error and structured(wrong)["error"]["code"] == "invalid_answer"
        done = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                      "answer": {"approved": True}, "wait_seconds": 30})
        assert structured(done)["status"] == "succeeded"
        assert structured(done)["outputs"] == {"shipped": SHIPPED, "by": "mcp:run_respond"}
        again = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                       "answer": {"approved": True}})
        assert again.is_error and structured(again)["error"]["code"] == "not_waiting"
