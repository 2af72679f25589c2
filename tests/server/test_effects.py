"""What a workflow may do comes from what its node types declare: MCP's hints and the read-only gate read it,
and a node type that declares nothing is taken to do anything (the gate denies it by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_helpers import echo, make_options, structured

from ice_mcp import Orchestrator, Settings
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.nodes import builtin_node_types
from ice_mcp.server import build_server
from ice_mcp.tools.builtin import register_builtin_tools
from ice_mcp.tools.registry import Registry, ToolAnnotations
from ice_mcp.types import EFFECTFUL, PURE, Effects, NodeResult

CHECK = {"name": "check", "inputs": {"type": "object", "properties": {"value": {"type": "integer"}}},
         "nodes": [{"id": "e", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ inputs.value }}"}},
                   {"id": "big", "type": "condition", "expression": "e.value > 10"}]}


def orchestrator(tmp_path: Path, *extra: NodeType) -> Orchestrator:
    """The built-in node types, each in `extra` taking the place of the built-in of its name."""
    builtins, _ = builtin_node_types()
    replaced = {t.name: t for t in [*builtins, *extra]}
    orc = Orchestrator(registry=Registry(), settings=Settings(persist_runs=False, workspace=tmp_path),
                       node_types=replaced.values())
    orc.registry.add_tool(echo, annotations=ToolAnnotations(read_only=True, idempotent=True))
    register_builtin_tools(orc.registry)
    return orc


def test_every_built_in_node_type_declares_what_it_may_do() -> None:
    types, _ = builtin_node_types()
    assert {t.name for t in types if t.effects is None} == set()
    by_name = {t.name: t.effects for t in types}
    assert by_name["condition"] == by_name["loop"] == by_name["parallel"] == PURE
    assert by_name["agent"] == EFFECTFUL


def test_a_workflows_effects_fold_its_nodes_sub_graphs_and_the_workflows_it_runs(tmp_path: Path) -> None:
    orc = orchestrator(tmp_path)
    orc.register_blueprint({"name": "reader", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "csv_reader", "tool_args": {"path": "x"}}]})
    orc.register_blueprint({"name": "writer", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "csv_reader", "tool_args": {"path": "x"}},
        {"id": "l", "type": "loop", "items": "{{ a.rows }}", "body": [
            {"id": "f", "type": "tool", "tool_name": "http_request", "tool_args": {"url": "http://x"}},
            {"id": "w", "type": "tool", "tool_name": "file_write", "tool_args": {"path": "o", "text": "t"}}]}]})
    orc.register_blueprint({"name": "asks", "nodes": [
        {"id": "run", "type": "workflow", "workflow_ref": "reader"},
        {"id": "ok", "type": "human", "prompt": "go on?", "dependencies": ["run"]}]})
    orc.register_blueprint({"name": "nested", "nodes": [{"id": "w", "type": "workflow", "workflow_ref": "writer"}]})
    assert orc.workflow_effects("reader") == Effects(read_only=True, destructive=False, idempotent=True,
                                                     open_world=False)
    assert orc.workflow_effects("writer") == Effects(read_only=False, destructive=True, idempotent=False,
                                                     open_world=True)
    # A person's answer comes from outside and may differ: read-only still, neither idempotent nor closed.
    assert orc.workflow_effects("asks") == Effects(read_only=True, destructive=False, idempotent=False,
                                                   open_world=True)
    assert orc.workflow_effects("nested") == orc.workflow_effects("writer")
    assert orc.workflow_effects("no_such_workflow") == EFFECTFUL


async def never_called(call: NodeCall) -> NodeResult:
    raise AssertionError("a read-only server must not run an effectful node")


@pytest.mark.parametrize("declared", [None, PURE], ids=["undeclared", "declared-pure"])
async def test_the_read_only_gate_refuses_a_node_type_that_declares_nothing(tmp_path: Path,
                                                                            declared: Effects | None) -> None:
    async def condition(call: NodeCall) -> NodeResult:
        return NodeResult({"result": bool(call.render("expression"))})

    orc = orchestrator(tmp_path, NodeType(name="condition", execute=condition, effects=declared))
    orc.register_blueprint(CHECK)
    try:
        async with Client(build_server(orc, make_options(read_only=True))) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            if declared is None:  # a read-only server lists only what it would run
                assert "workflow_check" not in listed
            else:
                hints = listed["workflow_check"].annotations
                assert hints is not None and hints.read_only_hint is True
            answer = await client.call_tool("workflow_check", {"value": 12})
            if declared is None:
                assert answer.is_error is True and structured(answer)["error"]["code"] == "forbidden"
                assert "read-only" in answer.content[0].text  # type: ignore[union-attr]
            else:
                result: dict[str, Any] = structured(answer)
                assert answer.is_error is False and result["status"] == "succeeded", result
    finally:
        await orc.aclose()
