"""The tasks extension and human input over MCP, from the Python SDK client (a real HTTP server in this
process): tasks for long runs, an approval gate answered every way a client can (tasks/update, a
multi-round InputRequiredResult, elicitation on a 2025 session, run_respond), task status notifications,
and the log messages and resource subscriptions every 2025 session gets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import MCPError
from mcp_helpers import GATE, TASK_GATE, http_client, http_server, make_options, structured
from tasks_client import TASKS, TaskFailed, TasksClient, task_request

from ice_mcp.orchestrator import Orchestrator

APPROVE = {"action": "accept", "content": {"approved": True, "reason": "paid"}}


@pytest.fixture
async def url(orc: Orchestrator) -> AsyncIterator[str]:
    for blueprint in (GATE, TASK_GATE):
        orc.register_blueprint(blueprint)
    async with http_server(orc, make_options(wait_seconds=0.5, task_after_seconds=0.3)) as base:
        yield base


def approve(key: str, params: dict[str, Any]) -> dict[str, Any]:
    assert params["mode"] == "form" and params["requestedSchema"]["required"] == ["approved"]
    return APPROVE


async def test_a_run_outliving_the_budget_becomes_a_task(url: str) -> None:
    tasks = TasksClient()
    async with http_client(url, extensions=[tasks]) as client:
        quick = await client.call_tool("workflow_noop", {"value": 1})  # done within the budget: no task
        assert structured(quick)["status"] == "succeeded" and not tasks.created

        slow = await client.call_tool("workflow_slow", {"seconds": 1.0})
        assert structured(slow)["status"] == "succeeded" and structured(slow)["outputs"] == {"slept": 1.0}
        created = tasks.created[0]
        assert created.task_id == structured(slow)["run_id"] and created.status == "working"
        assert created.poll_interval_ms == 500 and created.ttl_ms is not None  # no store here: an hour
        assert tasks.seen[0]["status"] == "working" and tasks.seen[-1]["status"] == "completed"
        assert tasks.seen[-1]["result"]["resultType"] == "complete"

        cancelled = await client.session.call_tool("workflow_slow", {"seconds": 30}, allow_claimed=True)
        assert cancelled.result_type == "task"  # type: ignore[union-attr]
        task_id = cancelled.task_id  # type: ignore[union-attr]
        for _ in range(2):  # idempotent
            ack = await task_request(client.session, "tasks/cancel", taskId=task_id)
            assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
        assert (await task_request(client.session, "tasks/get", taskId=task_id))["status"] == "cancelled"
        with pytest.raises(MCPError) as unknown:
            await task_request(client.session, "tasks/get", taskId="no-such-task")
        assert unknown.value.error.code == -32602


async def test_clients_without_the_extension_keep_the_envelope(url: str) -> None:
    async with http_client(url) as client:
        answer = await client.call_tool("workflow_slow", {"seconds": 2})
        envelope = structured(answer)
        assert envelope["status"] == "running" and "run_result" in answer.content[-1].text
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(MCPError) as refused:
                await task_request(client.session, method, taskId=envelope["run_id"])
            assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
        # A workflow that runs only as a task is refused to a 2026 client that cannot take one.
        with pytest.raises(MCPError) as required:
            await client.call_tool("workflow_task_gate", {"customer": "ACME"})
        assert required.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert required.value.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        with pytest.raises(MCPError) as through_start:  # the same workflow through workflow_start: the same answer
            await client.call_tool("workflow_start", {"name": "task_gate", "inputs": {"customer": "ACME"}})
        assert through_start.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    async with http_client(url, mode="legacy") as legacy:  # 2025: no extensions on that wire, a handle
        envelope = structured(await legacy.call_tool("workflow_task_gate", {"customer": "ACME"}))
        assert envelope["status"] == "input_required" and "ok" in envelope["questions"]


async def test_approval_gate_answered_through_tasks_update(url: str) -> None:
    tasks = TasksClient(approve)
    async with http_client(url, extensions=[tasks]) as client:
        answer = await client.call_tool("workflow_task_gate", {"customer": "ACME"})
        assert structured(answer)["outputs"] == {"shipped": "shipped to ACME", "by": "mcp:tasks/update"}
        waiting = next(t for t in tasks.seen if t["status"] == "input_required")
        request = waiting["inputRequests"]["ok"]
        assert request["method"] == "elicitation/create" and request["params"]["message"] == "Ship it to ACME?"


async def test_approval_gate_answered_in_the_call_by_a_2026_client(url: str) -> None:
    """A 2026 client with elicitation (tasks or not) gets the question as a multi-round InputRequiredResult
    before any task exists: the SDK client answers it and retries with the sealed requestState."""
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approved": True, "reason": "sure"})

    for extensions in ([], [TasksClient()]):
        async with http_client(url, elicitation_callback=elicit, extensions=extensions) as client:
            answer = await client.call_tool("workflow_gate", {"customer": "ACME"})
            assert structured(answer)["outputs"] == {"shipped": "shipped to ACME", "by": "mcp:input_required"}
            assert all(not ext.created for ext in extensions)  # answered in the call, never a task
    assert asked == ["Ship it to ACME?", "Ship it to ACME?"]


async def test_approval_gate_by_elicitation_on_a_2025_session(url: str) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approved": True})

    async with http_client(url, mode="legacy", elicitation_callback=elicit) as client:
        answer = await client.call_tool("workflow_gate", {"customer": "ACME"})
        assert structured(answer)["outputs"] == {"shipped": "shipped to ACME", "by": "mcp:elicitation"}

    async def decline(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with http_client(url, mode="legacy", elicitation_callback=decline) as client:
        answer = await client.call_tool("workflow_gate", {"customer": "ACME"})
        assert answer.is_error and "rejected: declined" in answer.content[-1].text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_gate_by_run_respond(url: str, mode: str) -> None:
    """Neither tasks nor elicitation: the envelope shows the question; run_respond answers it."""
    async with http_client(url, mode=mode) as client:
        waiting = structured(await client.call_tool("workflow_gate", {"customer": "ACME"}))
        assert waiting["status"] == "input_required"
        assert waiting["questions"]["ok"]["question"] == "Ship it to ACME?"
        status = structured(await client.call_tool("run_status", {"run_id": waiting["run_id"]}))
        assert status["questions"]["ok"]["approval"] is True
        listed = structured(await client.call_tool("run_list", {"status": "input_required"}))
        assert waiting["run_id"] in [run["run_id"] for run in listed["runs"]]
        started = asyncio.get_running_loop().time()  # a pending question ends run_result's wait at once
        polled = await client.call_tool("run_result", {"run_id": waiting["run_id"], "wait_seconds": 30})
        assert structured(polled)["status"] == "input_required" and "run_respond" in polled.content[-1].text
        assert asyncio.get_running_loop().time() - started < 5

        wrong = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                       "answer": {"approved": "yes"}})
        assert wrong.is_error and structured(wrong)["error"]["code"] == "invalid_answer"
        done = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                      "answer": {"approved": True}})
        assert structured(done)["status"] == "succeeded"
        assert structured(done)["outputs"] == {"shipped": "shipped to ACME", "by": "mcp:run_respond"}
        again = await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                       "answer": {"approved": True}})
        assert again.is_error and structured(again)["error"]["code"] == "not_waiting"


async def test_run_respond_over_rpc(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url, timeout=10) as http:
        started = (await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "workflow.run", "params": {
            "name": "gate", "inputs": {"customer": "ACME"}, "wait_seconds": 0.2}})).json()["result"]
        assert started["status"] == "input_required"
        answered = (await http.post("/rpc", json={"jsonrpc": "2.0", "id": 2, "method": "run.respond", "params": {
            "run_id": started["run_id"], "node": "ok", "answer": {"approved": True}}})).json()
        assert answered["result"]["status"] == "succeeded"
        wrong = (await http.post("/rpc", json={"jsonrpc": "2.0", "id": 3, "method": "run.respond", "params": {
            "run_id": started["run_id"], "node": "ok", "answer": {"approved": True}}})).json()
        assert wrong["error"]["code"] == -32602 and wrong["error"]["data"]["code"] == "not_waiting"


async def test_task_status_notifications_on_a_listen_stream(url: str) -> None:
    tasks = TasksClient()
    async with http_client(url, extensions=[tasks]) as client:
        created = await client.session.call_tool("workflow_task_gate", {"customer": "ACME"}, allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
        body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                "params": {"_meta": meta, "notifications": {"taskIds": [task_id]}}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen",
                   "Accept": "application/json, text/event-stream"}
        frames: list[dict[str, Any]] = []

        async def listen() -> None:
            async with httpx2.AsyncClient(timeout=30) as http, http.stream(
                    "POST", f"{url}/mcp", json=body, headers=headers) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        frames.append(json.loads(line[5:]))
                        if frames[-1].get("params", {}).get("status") == "completed":
                            return

        listening = asyncio.create_task(listen())
        while not frames:
            await asyncio.sleep(0.02)
        await task_request(client.session, "tasks/update", taskId=task_id, inputResponses={"ok": APPROVE})
        await asyncio.wait_for(listening, 15)
    ack = frames[0]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    statuses = [f["params"]["status"] for f in frames[1:]]
    assert all(f["method"] == "notifications/tasks" and f["params"]["taskId"] == task_id for f in frames[1:])
    assert statuses[-1] == "completed" and "result" in frames[-1]["params"]
    assert all(f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7 for f in frames)


async def test_a_protocol_failure_is_a_failed_task(orc: Orchestrator, url: str) -> None:
    from ice_mcp.errors import IceError

    def explode() -> dict[str, Any]:
        raise IceError("the store went away", code="internal_error")

    orc.registry.add_tool(explode)
    orc.register_blueprint({"name": "broken_inside", "execution": "task",
                            "nodes": [{"id": "x", "type": "tool", "tool_name": "explode"}]})
    async with http_client(url, extensions=[TasksClient()]) as client:
        with pytest.raises(TaskFailed) as failed:
            await client.call_tool("workflow_broken_inside", {})
    error = failed.value.task["error"]
    assert error["code"] == -32603 and error["message"] == "the store went away" and "result" not in failed.value.task
    async with http_client(url, extensions=[TasksClient()]) as client:
        answer = await client.call_tool("workflow_broken", {})  # a tool failure: completed + isError
        assert answer.is_error


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated", "ignore:resources/subscribe is removed")
async def test_2025_sessions_hear_logs_and_run_updates(url: str) -> None:
    """logging/setLevel and resources/subscribe are the shipped server's, not a test mode's."""
    messages: list[Any] = []

    async def on_message(message: Any) -> None:
        messages.append(message)

    async with http_client(url, mode="legacy", message_handler=on_message,
                           logging_callback=lambda params: on_message(params)) as client:
        await client.set_logging_level("notice")
        waiting = structured(await client.call_tool("workflow_gate", {"customer": "ACME"}))
        uri = f"ice://runs/{waiting['run_id']}"
        await client.subscribe_resource(uri)
        await client.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok", "answer": {"approved": True}})
        for _ in range(200):
            if any(getattr(getattr(m, "params", None), "uri", None) == uri for m in messages):
                break
            await asyncio.sleep(0.02)
    logs = [m for m in messages if isinstance(m, types.LoggingMessageNotificationParams)]
    assert any(log.level == "notice" and "ok waits for an answer: Ship it to ACME?" in log.data for log in logs)
    assert any(getattr(getattr(m, "params", None), "uri", None) == uri for m in messages)
