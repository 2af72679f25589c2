"""The built-in tools are declared once: MCP lists them, /rpc and the command line derive their methods from the table."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.cli import build_parser, main
from ice_mcp.operations.builtins import BUILTINS, BY_NAME
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.catalogue import Catalogue
from ice_mcp.server.protocol.server import build_server
from ice_mcp.server.web.rpc import RpcCaller, handle_rpc, rpc_methods
from ice_mcp.tools.builtin import register_builtin_tools

CHAIN = {"name": "table_demo", "nodes": [
    {"id": "greet", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "hi"}}]}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    registry = Registry()
    register_builtin_tools(registry)
    orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    yield orc
    await orc.aclose()


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add((*path, name))
                found |= commands(sub, (*path, name))
    return found


def test_every_entry_is_whole_and_its_scope_known() -> None:
    assert len(BY_NAME) == len(BUILTINS)
    for tool in BUILTINS:
        assert tool.scope in ("read", "run", "admin"), tool.name
        assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False
        assert (tool.scope == "read") == tool.annotations.read_only or tool.name == "run_respond"


def test_mcp_lists_every_builtin_as_declared(served: Orchestrator) -> None:
    catalogue = Catalogue(served, ServerOptions())
    listed = {tool.name: tool for tool in catalogue.listed(admin=True)}
    for builtin in BUILTINS:
        tool = listed[builtin.name]
        assert tool.input_schema == builtin.input_schema and tool.output_schema == builtin.output_schema
        assert tool.description == builtin.description
    anonymous = {tool.name for tool in catalogue.listed(admin=False)}
    assert {b.name for b in BUILTINS if b.admin}.isdisjoint(anonymous)
    assert catalogue.resolve("network.execute") is catalogue.resolve("network_execute")


async def test_rpc_offers_exactly_the_entries_with_a_method_name(served: Orchestrator) -> None:
    server = build_server(served)
    methods = rpc_methods(served, server.ice_calls)
    assert set(methods) == {tool.rpc for tool in BUILTINS if tool.rpc} | {"workflow.run"}

    async def rpc(method: str, **params: Any) -> dict[str, Any]:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        answer = await handle_rpc(body, methods)
        assert answer is not None
        return answer

    served.register_blueprint(served.compile(CHAIN).prepare())
    network = await rpc("network.execute", manifest={"api_version": "network.v0", "name": "n", "workflows": [
        {"id": "a", "ref": "table_demo"}]}, wait_seconds=30)
    assert network["result"]["status"] == "succeeded", network
    listed = (await rpc("run.list", limit=5))["result"]["runs"]
    assert {r["workflow"] for r in listed} == {"n", "table_demo"}  # the network's run beside its workflow's
    [run] = (await rpc("run.list", limit=5, workflow="table_demo"))["result"]["runs"]
    assert (await rpc("run.status", run_id=run["run_id"]))["result"]["status"] == "succeeded"
    assert (await rpc("run.result", run_id=run["run_id"]))["result"]["status"] == "succeeded"
    # Parameters are checked against the tool's own input schema: the same refusal as over MCP.
    refused = (await rpc("run.list", limit=0, colour="red"))["error"]
    assert refused["code"] == -32602 and refused["data"]["code"] == "invalid_arguments"
    assert "limit" in refused["message"] and "colour" in refused["message"]
    unknown = (await rpc("run.cancel", run_id="nope"))["error"]
    assert unknown["data"]["code"] == "unknown_run"
    read_only = rpc_methods(served, server.ice_calls, read_only=True)
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "run.cancel", "params": {"run_id": run["run_id"]}})
    forbidden = await handle_rpc(body.encode(), read_only)
    assert forbidden is not None and forbidden["error"]["code"] == -32003
    # An entry of admin scope answers only a caller who may administer, as over MCP.
    admin_methods = [tool for tool in BUILTINS if tool.admin and tool.rpc]
    assert admin_methods
    for tool in admin_methods:
        body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": tool.rpc, "params": {}})
        refused = await handle_rpc(body.encode(), methods, RpcCaller("someone", admin=False))
        assert refused is not None and refused["error"]["code"] == -32003, (tool.name, refused)
        assert refused["error"]["data"]["code"] == "forbidden"


def test_the_command_line_has_a_command_for_every_entry_with_a_path() -> None:
    found = commands(build_parser())
    assert {tool.cli for tool in BUILTINS if tool.cli} <= found
    assert {("runs", "show"), ("runs", "list"), ("runs", "retry"), ("validate",), ("run",), ("network", "run")} <= found


def test_a_derived_command_runs_the_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICE_MCP_WORKSPACE", str(tmp_path))
    data_dir = str(tmp_path / "d")
    blueprint = tmp_path / "chain.json"
    blueprint.write_text(json.dumps(CHAIN))
    assert main(["run", str(blueprint), "--data-dir", data_dir, "--no-progress"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    # `runs cancel` has no hand-written form: its arguments come from run_cancel's input schema.
    assert main(["runs", "cancel", run_id, "--data-dir", data_dir]) == 0
    assert json.loads(capsys.readouterr().out) == {"run_id": run_id, "cancelled": False, "status": "succeeded"}
    assert main(["runs", "cancel", "nope", "--data-dir", data_dir]) == 1
    assert "error [unknown_run]: unknown run 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["serve"], ["serve", "--templates"], ["serve", "--http", "--port", "0", "--pin", "a", "--pin", "b"],
    ["serve", "--read-only", "--include", "x*", "--exclude", "y", "--wait-seconds", "3", "--log-level", "DEBUG"],
])
def test_serve_parses_alone_as_in_the_whole_tree(argv: list[str]) -> None:
    """A host starts `serve` for every session: its own parser (~1 ms instead of ~10) reads the same arguments."""
    assert vars(build_parser("serve").parse_args(argv)) == vars(build_parser().parse_args(argv))
