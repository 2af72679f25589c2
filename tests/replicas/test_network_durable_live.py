"""A network run outlives its server: the server running it is SIGKILLed while its first workflow runs;
another server on the same data folder takes the network over, its first workflow's run resumes (not started
again), the second starts after it, and the network ends as an uninterrupted one would."""

from __future__ import annotations

import time
from pathlib import Path

from live import folder_servers

SLOW = {"name": "slow_step", "outputs": {"slept": "{{ nap.slept }}"},
        "nodes": [{"id": "nap", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 4}}]}
AFTER = {"name": "after_step", "inputs": {"type": "object", "properties": {"slept": {"type": "number"}}},
         "outputs": {"text": "{{ say.text }}"},
         "nodes": [{"id": "say", "type": "tool", "tool_name": "render_template",
                    "tool_args": {"template": "slept {{ inputs.slept }}"}}]}
MANIFEST = {"api_version": "network.v0", "name": "pair", "workflows": [
    {"id": "first", "ref": "slow_step"},
    {"id": "second", "ref": "after_step", "after": ["first"], "inputs": {"slept": "{{ first.slept }}"}}]}


def test_a_network_goes_on_after_its_server_is_sigkilled(tmp_path: Path) -> None:
    servers = folder_servers(tmp_path, [SLOW, AFTER], env={"ICE_MCP_LEASE_SECONDS": "2"})
    holder, other = servers
    try:
        for server in servers:
            server.start()
        started = holder.rpc("network.execute", manifest=MANIFEST, wait_seconds=0)
        network_id = started["network_id"]
        deadline = time.monotonic() + 20
        while (first := holder.rpc("run.status", run_id=network_id)["workflows"]["first"])["run_id"] is None:
            assert time.monotonic() < deadline, "the first workflow never started"
            time.sleep(0.1)
        first_run = first["run_id"]
        holder.kill()  # SIGKILL mid-way: the network and its first workflow's run are orphaned
        deadline = time.monotonic() + 60
        while (result := other.rpc("run.status", run_id=network_id))["status"] == "running":
            assert time.monotonic() < deadline, result
            time.sleep(0.3)
        runs = other.rpc("run.list", workflow="slow_step")["runs"]
    finally:
        for server in servers:
            server.stop()
    assert result["status"] == "succeeded", result
    assert result["workflows"]["first"]["run_id"] == first_run  # resumed, not started again
    assert [run["run_id"] for run in runs] == [first_run]
    assert result["workflows"]["second"]["outputs"] == {"text": "slept 4.0"}
