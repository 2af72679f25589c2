"""Tasks are runs, so they outlive the server process: a task created over HTTP survives a SIGKILL and a
restart (`tasks/get` on the new process finds it, and it completes), and so does a question waiting on a
task (the same question, the same deadline; answered through `tasks/update` on the new process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from live import ServerProcess, healthz_watch
from mcp_helpers import http_client
from tasks_client import TasksClient, task_request

SLOW = {"name": "slow_task", "inputs": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "outputs": {"slept": "{{ nap.slept }}"},
        "nodes": [{"id": "nap", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": "{{ inputs.seconds }}"}}]}
GATE = {"name": "gate", "execution": "task",
        "outputs": {"by": "{{ ok.answered_by }}", "shipped": "{{ ship.text }}"},
        "nodes": [{"id": "ok", "type": "human", "approval": "Ship it?", "timeout_seconds": 3600},
                  {"id": "ship", "type": "tool", "tool_name": "render_template", "dependencies": ["ok"],
                   "tool_args": {"template": "shipped"}}]}


def start(tmp_path: Path) -> ServerProcess:
    folder = tmp_path / "blueprints"
    folder.mkdir(exist_ok=True)
    for blueprint in (SLOW, GATE):
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    server = ServerProcess(tmp_path, "--blueprints", str(folder), env={"ICE_MCP_TASK_AFTER_SECONDS": "0.3"})
    server.start()
    return server


async def until(url: str, task_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
    """Poll `tasks/get` on the server at `url` until the task reaches `status`."""
    async with http_client(url, extensions=[TasksClient()]) as client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            task = await task_request(client.session, "tasks/get", taskId=task_id)
            if task["status"] == status:
                return task
            await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never reached {status}: {task}")


@pytest.mark.slow
async def test_a_task_survives_sigkill_and_restart(tmp_path: Path) -> None:
    first = start(tmp_path)
    try:
        async with http_client(first.url, extensions=[TasksClient()]) as client:
            created = await client.session.call_tool("workflow_slow_task", {"seconds": 4}, allow_claimed=True)
        assert created.result_type == "task" and created.status == "working"  # type: ignore[union-attr]
        task_id = created.task_id  # type: ignore[union-attr]
        assert created.ttl_ms is None  # type: ignore[union-attr]  # kept in the run store: no expiry
        first.kill()  # the CreateTaskResult came after the run was on disk

        second = ServerProcess(tmp_path, *first.args, env=first.env)
        second.start()
        try:
            with healthz_watch(second.url) as watch:
                found = await until(second.url, task_id, "working")
                assert found["taskId"] == task_id and found["createdAt"] == created.created_at  # type: ignore[union-attr]
                done = await until(second.url, task_id, "completed")
            watch.assert_responsive()
            assert done["result"]["structuredContent"]["outputs"] == {"slept": 4}
            record = second.rpc("run.status", run_id=task_id)
            assert record["status"] == "succeeded" and record["duration_ms"] >= 4000  # one run, resumed
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.mark.slow
async def test_a_restart_while_a_task_waits_for_an_answer_loses_nothing(tmp_path: Path) -> None:
    first = start(tmp_path)
    try:
        async with http_client(first.url, extensions=[TasksClient()]) as client:
            created = await client.session.call_tool("workflow_gate", {}, allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        before = await until(first.url, task_id, "input_required")
        first.kill()

        second = ServerProcess(tmp_path, *first.args, env=first.env)
        second.start()
        try:
            after = await until(second.url, task_id, "input_required")
            assert after["inputRequests"] == before["inputRequests"]
            status = second.rpc("run.status", run_id=task_id)
            assert status["questions"]["ok"]["question"] == "Ship it?"
            async with http_client(second.url, extensions=[TasksClient()]) as client:
                ack = await task_request(client.session, "tasks/update", taskId=task_id, inputResponses={
                    "ok": {"action": "accept", "content": {"approved": True, "reason": "after the restart"}}})
                assert ack["resultType"] == "complete"
            done = await until(second.url, task_id, "completed")
            assert done["result"]["structuredContent"]["outputs"] == {"by": "mcp:tasks/update", "shipped": "shipped"}
            record = second.rpc("run.status", run_id=task_id)
            assert record["nodes"]["ok"]["output"]["answer"]["reason"] == "after the restart"
        finally:
            second.stop()
    finally:
        first.stop()
