"""Both engines keep a run through a dead server alike: a network of two workflows, the first waiting on a `human`
node, is started on one server; that server is SIGKILLed while the question waits; another server on the same
data folder (and, on Temporal, the same task queue and worker) takes the answer, and the network ends with the
same outputs, its first workflow's run kept (not started again)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live import ROOT, folder_servers
from mcp_helpers import subprocess_env

REVIEW = {
    "name": "review",
    "inputs": {"type": "object", "properties": {"draft": {"type": "string"}}, "required": ["draft"]},
    "nodes": [
        {"id": "shape", "type": "tool", "tool_name": "render_template",
         "tool_args": {"template": "draft: {{ inputs.draft }}"}},
        {"id": "approve", "type": "human", "prompt": "Title for '{{ shape.text }}'?", "dependencies": ["shape"],
         "schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}},
    ],
    "outputs": {"text": "{{ shape.text }}", "title": "{{ approve.answer.title }}"},
}
PUBLISH = {
    "name": "publish",
    "inputs": {"type": "object", "properties": {"title": {"type": "string"}, "text": {"type": "string"}}},
    "nodes": [{"id": "page", "type": "tool", "tool_name": "render_template",
               "tool_args": {"template": "{{ inputs.title }} / {{ inputs.text }}"}}],
    "outputs": {"page": "{{ page.text }}"},
}
MANIFEST = {"api_version": "network.v0", "name": "review_then_publish", "workflows": [
    {"id": "review", "ref": "review", "inputs": {"draft": "ice melts"}},
    {"id": "publish", "ref": "publish", "after": ["review"],
     "inputs": {"title": "{{ review.title }}", "text": "{{ review.text }}"}}]}
EXPECTED = {"review": {"text": "draft: ice melts", "title": "Thaw"}, "publish": {"page": "Thaw / draft: ice melts"}}


def until(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)
    return found


@pytest.fixture
def engine_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The servers' environment for the engine under test; on Temporal, a worker process on its own queue."""
    env = {"ICE_MCP_LEASE_SECONDS": "2"}
    if request.param == "embedded":
        yield env
        return
    address = request.getfixturevalue("temporal_address")
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    env |= {"ICE_MCP_ENGINE": "temporal", "ICE_MCP_TEMPORAL": address, "ICE_MCP_TEMPORAL_TASK_QUEUE": queue}
    (tmp_path / "ws").mkdir()
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "ice_mcp.cli", "worker", "--temporal", address, "--task-queue", queue,
             "--data-dir", str(tmp_path / "data"), "--workspace", str(tmp_path / "ws")],
            stdout=log, stderr=subprocess.STDOUT, env=subprocess_env(tmp_path / "ws"), cwd=ROOT)
    try:
        yield env
    finally:
        worker.terminate()
        worker.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("engine_env", ["embedded", "temporal"], indirect=True)
def test_a_waiting_network_outlives_its_server_alike_on_both_engines(tmp_path: Path,
                                                                      engine_env: dict[str, str]) -> None:
    servers = folder_servers(tmp_path, [REVIEW, PUBLISH], env=engine_env)
    holder, other = servers
    try:
        for server in servers:
            server.start()
        network_id = holder.rpc("network.execute", manifest=MANIFEST, wait_seconds=0)["network_id"]
        first = until(lambda: holder.rpc("run.status", run_id=network_id)["workflows"]["review"]["run_id"],
                      "the first workflow started")
        until(lambda: holder.rpc("run.status", run_id=first)["status"] == "input_required", "the question asked")
        holder.kill()  # SIGKILL while a person is asked: the network's server is gone

        # Answered at once: on embedded, the other server takes the run over while the answer waits.
        answered = other.rpc("run.respond", run_id=first, node="approve", answer={"title": "Thaw"}, wait_seconds=0)
        assert "approve" not in answered.get("questions", {}), answered
        result = until(lambda: (r := other.rpc("run.status", run_id=network_id))["status"] != "running" and r,
                       "the network ended")
        runs = other.rpc("run.list", workflow="review")["runs"]
    finally:
        for server in servers:
            server.stop()
    assert result["status"] == "succeeded", result
    assert {wid: w["outputs"] for wid, w in result["workflows"].items()} == EXPECTED
    assert result["workflows"]["review"]["run_id"] == first  # kept, not started again
    assert [run["run_id"] for run in runs] == [first]
