"""What an agent can call: registry tools and registered workflows, behind one shape."""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from ice_mcp.llm.types import ToolSpec
from ice_mcp.tools.context import CURRENT_CALL, ToolCall
from ice_mcp.tools.registry import ToolEntry, as_object
from ice_mcp.types import NodeResult, Usage

Invoke = Callable[[dict[str, Any]], Awaitable["ToolOutcome"]]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(slots=True)
class ToolOutcome:
    """A tool's result and what it cost. `charged` is False when the cost was already charged
    to the run elsewhere (a workflow's own nodes charge the run themselves)."""

    output: dict[str, Any]
    cost_usd: float = 0.0
    usage: Usage | None = None
    charged: bool = False


@dataclass(frozen=True, slots=True)
class AgentTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    invoke: Invoke
    kind: str = "tool"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


def valid_tool_name(name: str) -> bool:
    """Providers accept tool names of letters, digits, `_` and `-`, at most 64 long."""
    return bool(_NAME.match(name))


def object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """An object schema (providers require one for tool arguments)."""
    if not schema or schema.get("type") != "object":
        return {"type": "object", "properties": dict((schema or {}).get("properties", {}))}
    return schema


def registry_tool(entry: ToolEntry, caller: ToolCall | None = None) -> AgentTool:
    """A registry tool as an agent tool; a metered tool's `NodeResult` keeps its spend. With `caller`
    (the agent node's attempt), each call's tool sees its own ToolCall (`.../<tool>#<n>`)."""
    counter = itertools.count(1)

    async def invoke(arguments: dict[str, Any]) -> ToolOutcome:
        if caller is not None:
            CURRENT_CALL.set(replace(caller, node_path=f"{caller.node_path}/{entry.name}#{next(counter)}"))
        result = await entry.call(arguments)
        if isinstance(result, NodeResult):  # a metered tool reports its own spend
            return ToolOutcome(as_object(result.output), result.cost_usd, result.usage)
        return ToolOutcome(as_object(result))

    # An upstream tool (`server.tool`) is offered to the model under its provider-safe name (`server__tool`).
    return AgentTool(entry.model_name, entry.description or entry.name, object_schema(entry.input_schema), invoke)


def workflow_tool(name: str, description: str, inputs_schema: dict[str, Any],
                  run: Callable[[str, dict[str, Any]], Awaitable[Any]]) -> AgentTool:
    """A registered workflow as a tool: `run(name, inputs)` runs it inside the current run."""

    async def invoke(arguments: dict[str, Any]) -> ToolOutcome:
        result = await run(name, arguments)
        output = getattr(result, "output", result)
        cost = float(getattr(result, "cost_usd", 0.0) or 0.0)
        return ToolOutcome(output if isinstance(output, dict) else {"result": output}, cost, charged=True)

    return AgentTool(name, description or f"Run the workflow {name}.", object_schema(inputs_schema), invoke,
                     kind="workflow")
