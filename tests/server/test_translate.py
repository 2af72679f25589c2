"""The MCP and /rpc layers only translate: direct tool calls without a blueprint, arguments checked once,
unknown workflow arguments refused with the nearest field, network runs that can be followed by id."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp_helpers import http_server, make_options, structured

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server

SLOW_NETWORK = {"api_version": "network.v0", "name": "slowly",
                "workflows": [{"id": "nap", "ref": "slow", "inputs": {"seconds": 0.4}},
                              {"id": "after", "ref": "noop", "after": "nap", "inputs": {"value": "{{ nap.slept }}"}}]}


def texts(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_direct_tool_call_runs_without_compiling_a_blueprint(orc: Orchestrator, monkeypatch: Any) -> None:
    def no_compiling(source: Any) -> Any:
        raise AssertionError(f"compiled {source!r}")

    monkeypatch.setattr(orc, "compile", no_compiling)
    async with Client(build_server(orc, make_options())) as client:
        result = await client.call_tool("tool_echo", {"value": {"a": [1, 2]}, "idempotency_key": "once"})
        envelope = structured(result)
        assert result.is_error is False and envelope["outputs"] == {"result": {"value": {"a": [1, 2]}}}
        record = orc.get_run(envelope["run_id"])
        assert record is not None and record.inputs == {"value": {"a": [1, 2]}}
        assert record.nodes["call"].status == "succeeded" and record.workflow == "tool_echo"
        again = await client.call_tool("tool_echo", {"value": "other", "idempotency_key": "once"})
        assert structured(again)["run_id"] == envelope["run_id"]  # the same key attaches to the same run


async def test_bad_tool_arguments_are_refused_before_any_run(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        result = await client.call_tool("tool_sleep", {"secnds": 1})
        assert result.is_error is True
        error = structured(result)["error"]
        assert error["code"] == "invalid_arguments"
        assert "secnds: unknown argument; did you mean 'seconds'?" in error["message"]
        assert "seconds: Field required" in texts(result)
    assert orc.list_runs() == []


async def test_an_unknown_workflow_argument_names_the_nearest_field(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        result = await client.call_tool("workflow_steps", {"word": "hi", "wrod": "typo"})
        assert result.is_error is True
        error = structured(result)["error"]
        assert error["code"] == "invalid_inputs"
        assert error["message"] == "wrod: unknown input; did you mean 'word'?"
        assert error["details"]["errors"] == [{"path": "wrod", "message": "unknown input; did you mean 'word'?"}]
        ok = await client.call_tool("workflow_steps", {"word": "hi"})
        assert structured(ok)["outputs"] == {"upper": "HI"}
    assert [run.status for run in orc.list_runs()] == ["succeeded"]  # the refused call started nothing


async def test_a_network_past_its_wait_can_be_followed_by_id(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        started = await client.call_tool("network_execute", {"manifest": SLOW_NETWORK, "wait_seconds": 0.05})
        result = structured(started)
        assert started.is_error is False and result["status"] == "running"
        network_id = result["network_id"]
        assert network_id.startswith("net_") and result["workflows"]["nap"]["status"] == "running"
        assert result["workflows"]["nap"]["run_id"] is not None  # the workflow run itself is followable too
        assert f"run_result(run_id='{network_id}')" in texts(started)
        status = structured(await client.call_tool("run_status", {"run_id": network_id}))
        assert status["network_id"] == network_id and status["status"] in ("running", "succeeded")
        finished = structured(await client.call_tool("run_result", {"run_id": network_id, "wait_seconds": 10}))
        assert finished["status"] == "succeeded"
        assert finished["workflows"]["after"]["outputs"] == {"echo": {"value": 0.4}}
        unknown = await client.call_tool("run_result", {"run_id": "net_nope"})
        assert unknown.is_error is True and structured(unknown)["error"]["code"] == "unknown_run"


async def test_rpc_follows_a_network_by_id_and_refuses_unknown_inputs(orc: Orchestrator) -> None:
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answer: dict[str, Any] = (await http.post(f"{url}/rpc", json=body)).json()
            return answer

        started = await call("network.execute", {"manifest": SLOW_NETWORK, "wait_seconds": 0.05})
        network_id = started["result"]["network_id"]
        assert started["result"]["status"] == "running"
        status = await call("run.status", {"run_id": network_id})
        assert status["result"]["network_id"] == network_id
        refused = await call("workflow.run", {"name": "steps", "inputs": {"word": "x", "wrod": "y"}})
        assert refused["error"]["code"] == -32602
        assert refused["error"]["message"] == "wrod: unknown input; did you mean 'word'?"
        unknown = await call("workflow.run", {"name": "stpes"})
        assert unknown["error"]["message"] == "unknown workflow 'stpes'; did you mean 'steps'?"
        await orc.get_network(network_id).wait(10)  # type: ignore[union-attr]
