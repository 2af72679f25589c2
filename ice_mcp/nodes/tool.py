"""`tool` nodes: call a registered tool with the rendered `tool_args`."""

from __future__ import annotations

from ice_mcp.errors import UnknownName
from ice_mcp.nodes.base import NodeCall, NodeFailure, NodeResult, NodeType
from ice_mcp.tools.context import CURRENT_CALL, CURRENT_SERVICES, ToolCall
from ice_mcp.tools.registry import as_object


async def execute_tool(call: NodeCall) -> NodeResult:
    spec = call.spec
    try:
        entry = call.services.registry.tool(spec.tool_name)  # type: ignore[union-attr]
    except UnknownName as exc:
        raise NodeFailure(exc.message, code="unknown_tool", retryable=False) from None
    template = call.node.templates.get("tool_args")
    arguments = template.render(call.scope) if template is not None else {}
    CURRENT_SERVICES.set(call.services)  # the node's own task: the values stay with this call
    CURRENT_CALL.set(ToolCall(call.ctx.run_id, call.ctx.path + call.node.id, call.attempt))
    result = await entry.call(arguments)
    # Metered tools (paid APIs) may report their own cost and usage.
    return result if isinstance(result, NodeResult) else NodeResult(as_object(result))


TOOL_NODE = NodeType(name="tool", execute=execute_tool)
