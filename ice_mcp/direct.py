"""Direct calls of one registered tool or agent (MCP `tool_<name>`, `agent_<name>`), as one-node runs.

A tool call is planned without a blueprint: its arguments are checked once, by the tool, and the
one node calls it with them. The blueprint document kept for a resumed run is the equivalent
templated one, which only a resume compiles.
"""

from __future__ import annotations

import re
from typing import Any

from ice_mcp.blueprint.issues import CostEstimate
from ice_mcp.blueprint.models import Blueprint, ToolNode
from ice_mcp.blueprint.schemas import schema_validator
from ice_mcp.core.executor import NodeCall
from ice_mcp.core.plan import Graph, Plan, PlanNode
from ice_mcp.core.scheduler import GraphShape
from ice_mcp.core.templates import compile_value
from ice_mcp.nodes.tool import run_tool
from ice_mcp.tools.registry import ToolEntry
from ice_mcp.types import NodeResult

NODE_ID = "call"
_SAFE = re.compile(r"[^a-z0-9_]")
_OUTPUTS = compile_value({"result": "{{ call }}"})
_ANY_OBJECT = schema_validator({"type": "object"})
_SHAPE = GraphShape(order=(NODE_ID,), deps={NODE_ID: ()}, gates={NODE_ID: ()}, on_error={NODE_ID: "fail"})


def slug(prefix: str, name: str) -> str:
    """A workflow name for a direct call (`tool_csv_reader`)."""
    text = _SAFE.sub("_", f"{prefix}_{name}".lower())
    return text[:48] if text[0].isalpha() else f"x{text}"[:48]


def tool_plan(entry: ToolEntry, kwargs: dict[str, Any], arguments: dict[str, Any]) -> Plan:
    """A one-node plan calling `entry` with `kwargs` (checked by `entry.parse_arguments(arguments)`)."""
    document = tool_document(entry.name, arguments)
    spec = ToolNode.model_construct(id=NODE_ID, tool_name=entry.name, tool_args={})
    blueprint = Blueprint.model_construct(name=document["name"], description=document["description"],
                                          inputs=document["inputs"], nodes=[spec])

    async def call_tool(call: NodeCall) -> NodeResult:
        return await run_tool(call, entry, kwargs)

    node = PlanNode(NODE_ID, spec, call_tool, ())
    graph = Graph({NODE_ID: node}, _SHAPE, (NODE_ID,), 1)
    return Plan(blueprint, graph, _OUTPUTS, _ANY_OBJECT, CostEstimate(), document=document)


def tool_document(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The one-node blueprint equivalent to calling the tool with exactly these arguments."""
    return {
        "name": slug("tool", name),
        "description": f"Direct call of the tool {name}",
        "inputs": {"type": "object"},
        "outputs": {"result": "{{ call }}"},
        "nodes": [{"id": NODE_ID, "type": "tool", "tool_name": name,
                   "tool_args": {k: f"{{{{ inputs[{k!r}] }}}}" for k in arguments}}],
    }


def agent_document(name: str) -> dict[str, Any]:
    """The one-node blueprint asking the agent (compiled once per agent)."""
    return {
        "name": slug("agent", name),
        "description": f"Direct call of the agent {name}",
        "inputs": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]},
        "nodes": [{"id": "agent", "type": "agent", "agent": name, "input": "{{ inputs.input }}"}],
        "outputs": {"text": "{{ agent.text }}", "result": "{{ agent }}"},
    }
