"""HTTP-only behaviour: admin token, bearer token, /rpc, network.execute as a method on /mcp, /healthz."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from mcp_helpers import ADMIN, http_client, http_server, make_options, structured
from test_surface import MANIFEST, NEW_BLUEPRINT

from ice_mcp.orchestrator import Orchestrator

MODERN = "2026-07-28"


def modern_request(
    method: str, params: dict[str, Any], request_id: int = 1
) -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    return body, headers


def sse_or_json(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    return dict(message)
        raise AssertionError(response.text)
    return dict(response.json())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_catalogue_changes_need_the_admin_token(orc: Orchestrator, mode: str) -> None:
    async with http_server(orc, make_options()) as url:
        async with http_client(url, mode=mode, token=None) as anonymous:
            names = {t.name for t in (await anonymous.list_tools()).tools}
            assert "blueprint_register" not in names and "blueprint_delete" not in names
            assert "workflow_steps" in names
            refused = await anonymous.call_tool("blueprint_register", {"blueprint": NEW_BLUEPRINT})
            assert refused.is_error is True and "admin token" in refused.content[1].text
            refused = await anonymous.call_tool("blueprint_delete", {"name": "steps"})
            assert refused.is_error is True
            assert "steps" in orc.registry.workflows and "fresh" not in orc.registry.workflows
        async with http_client(url, mode=mode, token="wrong") as wrong:
            refused = await wrong.call_tool("blueprint_register", {"blueprint": NEW_BLUEPRINT})
            assert refused.is_error is True
        async with http_client(url, mode=mode, token=ADMIN) as admin:
            names = {t.name for t in (await admin.list_tools()).tools}
            assert "blueprint_register" in names
            assert (
                await admin.call_tool("blueprint_register", {"blueprint": NEW_BLUEPRINT})
            ).is_error is False
            assert "fresh" in orc.registry.workflows


async def test_rpc_changes_the_catalogue_only_with_the_admin_token(orc: Orchestrator) -> None:
    """/rpc's admin-scope methods (blueprint.save, blueprint.rollback) ask what MCP asks: the admin token."""
    text = "name: kept\nnodes:\n  - id: a\n    type: tool\n    tool_name: echo\n    tool_args: {value: 1}\n"
    body = {"jsonrpc": "2.0", "id": 1, "method": "blueprint.save", "params": {"name": "kept", "text": text}}
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient() as client:
        anonymous = (await client.post(f"{url}/rpc", json=body)).json()
        assert anonymous["error"]["code"] == -32003 and anonymous["error"]["data"]["code"] == "forbidden"
        admin = (await client.post(f"{url}/rpc", json=body, headers={"Authorization": f"Bearer {ADMIN}"})).json()
        # Let through: this orchestrator keeps no versions (no run store), which the method says in its own words.
        assert admin["error"]["data"]["code"] == "no_store", admin


async def test_read_only_refuses_even_the_admin(orc: Orchestrator) -> None:
    async with (
        http_server(orc, make_options(read_only=True)) as url,
        http_client(url, token=ADMIN) as admin,
    ):
        names = {t.name for t in (await admin.list_tools()).tools}
        assert "blueprint_register" not in names
        refused = await admin.call_tool("blueprint_delete", {"name": "steps"})
        assert refused.is_error is True and "read-only" in refused.content[1].text


async def test_bearer_token_guards_mcp_and_rpc(orc: Orchestrator) -> None:
    async with http_server(orc, make_options(), token="t0ken") as url:
        async with httpx2.AsyncClient() as http:
            body, headers = modern_request("tools/list", {})
            assert (await http.post(f"{url}/mcp", json=body, headers=headers)).status_code == 401
            bad = {**headers, "Authorization": "Bearer nope"}
            assert (await http.post(f"{url}/mcp", json=body, headers=bad)).status_code == 401
            rpc = {"jsonrpc": "2.0", "id": 1, "method": "run.status", "params": {"run_id": "x"}}
            assert (await http.post(f"{url}/rpc", json=rpc)).status_code == 401
            assert (await http.get(f"{url}/healthz")).status_code == 200
        async with http_client(url, token="t0ken") as client:
            assert "workflow_steps" in {t.name for t in (await client.list_tools()).tools}
        async with http_client(url, token=ADMIN) as admin:  # the admin token opens the door too
            assert (await admin.call_tool("workflow_steps", {"word": "a"})).is_error is False


async def test_network_execute_as_a_method_on_mcp(orc: Orchestrator) -> None:
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=60) as http:
        body, headers = modern_request("network.execute", {"manifest": MANIFEST})
        answer = sse_or_json(await http.post(f"{url}/mcp", json=body, headers=headers))
        assert answer["result"]["status"] == "succeeded", answer
        assert answer["result"]["workflows"]["summary"]["status"] == "succeeded"
        body, headers = modern_request("network.execute", {"manifest": "name: [unclosed"})
        answer = sse_or_json(await http.post(f"{url}/mcp", json=body, headers=headers))
        assert answer["error"]["code"] == -32602


async def test_rpc_endpoint(orc: Orchestrator) -> None:
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=60) as http:

        async def call(method: str, params: Any, request_id: int = 7) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            response = await http.post(f"{url}/rpc", json=body)
            assert response.status_code == 200
            return dict(response.json())

        network = await call("network.execute", {"manifest": MANIFEST})
        assert network["id"] == 7 and network["result"]["status"] == "succeeded"
        assert network["result"]["workflows"]["extract"]["outputs"]["count"] == 3

        run = await call("workflow.run", {"name": "steps", "inputs": {"word": "rpc"}})
        assert run["result"]["status"] == "succeeded" and run["result"]["outputs"] == {
            "upper": "RPC"
        }
        status = await call("run.status", {"run_id": run["result"]["run_id"]})
        assert status["result"]["nodes"]["first"]["status"] == "succeeded"
        assert (await call("run.cancel", {"run_id": run["result"]["run_id"]}))["result"][
            "cancelled"
        ] is False

        report = await call(
            "blueprint.validate",
            {
                "blueprint": {
                    "name": "x",
                    "nodes": [{"id": "a", "type": "tool", "tool_name": "ech0"}],
                }
            },
        )
        assert report["result"]["ok"] is False
        assert report["result"]["errors"][0]["suggestion"] == "echo"

        assert (await call("workflow.run", {"name": "nope"}))["error"]["code"] == -32602
        assert (await call("workflow.run", {"name": "steps", "inputs": {"word": 1}}))["error"][
            "code"
        ] == -32602
        assert (await call("run.status", {}))["error"]["code"] == -32602
        assert (await call("no.such", {}))["error"]["code"] == -32601
        batch = await http.post(
            f"{url}/rpc",
            json=[{"jsonrpc": "2.0", "id": 1, "method": "run.status", "params": {"run_id": "x"}}],
        )
        assert batch.json()["error"]["code"] == -32600
        assert (await http.get(f"{url}/healthz")).json()["status"] == "ok"


async def test_stateless_mode_serves_both_eras(orc: Orchestrator) -> None:
    async with http_server(orc, make_options(), stateless=True) as url:
        for mode in ("legacy", "auto"):
            async with http_client(url, mode=mode) as client:
                assert (
                    structured(await client.call_tool("workflow_steps", {"word": "s"}))["status"]
                    == "succeeded"
                )


async def test_canonical_names_option(orc: Orchestrator) -> None:
    async with (
        http_server(orc, make_options(canonical_names=True)) as url,
        http_client(url) as client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert "workflow:steps" in names and "network.execute" in names
        assert structured(await client.call_tool("workflow:steps", {"word": "c"}))["outputs"] == {
            "upper": "C"
        }


async def test_include_exclude_patterns(orc: Orchestrator) -> None:
    options = make_options(include=("workflow_*", "run_*"), exclude=("workflow:broken",))
    async with http_server(orc, options) as url, http_client(url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "workflow_steps" in names and "run_status" in names
        assert (
            "workflow_broken" not in names
            and "tool_echo" not in names
            and "network_execute" not in names
        )
