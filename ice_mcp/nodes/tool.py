"""`tool` nodes: call a registered tool with the rendered `tool_args`."""

from __future__ import annotations

from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue
from ice_mcp.blueprint.models import NodeSpec, ToolNode
from ice_mcp.engine.executor import CheckContext, NodeCall, NodeType
from ice_mcp.engine.templates import Constant, MappingValue
from ice_mcp.errors import NodeFailure, UnknownName
from ice_mcp.tools.context import CURRENT_CALL
from ice_mcp.tools.registry import ToolEntry, as_object
from ice_mcp.types import NodeResult


async def execute_tool(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, ToolNode)
    try:
        entry = call.services.registry.tool(spec.tool_name)
    except UnknownName as exc:
        raise NodeFailure(exc.message, code="unknown_tool", retryable=False) from None
    template = call.node.templates.get("tool_args")
    arguments = template.render(call.scope) if template is not None else {}
    return await run_tool(call, entry, entry.parse_arguments(arguments))


async def run_tool(call: NodeCall, entry: ToolEntry, kwargs: dict[str, Any]) -> NodeResult:
    """Call a tool with checked arguments on behalf of a node attempt."""
    # The node's own task: the tool sees its call (idempotency key, services, budget) and nothing leaks out.
    CURRENT_CALL.set(call)
    result = await entry.call_parsed(kwargs)
    # Metered tools (paid APIs) may report their own cost and usage.
    return result if isinstance(result, NodeResult) else NodeResult(as_object(result))


def check_tool(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    """The tool exists, every argument is one it takes, none it needs is missing, and constant
    arguments have the type it expects."""
    assert isinstance(spec, ToolNode)
    registry = ctx.services.registry
    entry = registry.tools.get(spec.tool_name)
    if entry is None:
        return [ValidationIssue(code="unknown_tool", message=f"no tool named {spec.tool_name!r}", node_id=spec.id,
                                field="tool_name", suggestion=ctx.suggest(spec.tool_name, registry.tools))]
    issues: list[ValidationIssue] = []
    properties, arguments = entry.properties, spec.tool_args
    for key in arguments:
        if key not in properties:
            issues.append(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r} has no argument "
                                          f"{key!r}", node_id=spec.id, field=f"tool_args.{key}",
                                          suggestion=ctx.suggest(key, properties)))
    for key in entry.required:
        if key not in arguments:
            issues.append(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r} needs argument "
                                          f"{key!r}", node_id=spec.id, field="tool_args"))
    checked = entry.constrained.intersection(arguments)
    if not checked:
        return issues
    compiled = ctx.templates.get("tool_args")
    items = compiled.items if isinstance(compiled, MappingValue) else {}  # all constant: a Constant
    constants = {key: arguments[key] for key in checked if isinstance(items.get(key, compiled), Constant)}
    issues.extend(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r}: {problem}",
                                  node_id=spec.id, field=f"tool_args.{key}")
                  for key, problem in _argument_problems(entry, constants))
    return issues


def _argument_problems(entry: ToolEntry, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """(argument, problem) for each constant argument the tool would refuse (missing ones aside)."""
    if not arguments:
        return []
    try:
        entry.parse_arguments(arguments)
    except NodeFailure as exc:
        return [(str(e["loc"][0]), f"argument {e['loc'][0]!r}: {e['msg']}") for e in exc.details.get("errors", ())
                if e.get("type") != "missing" and e.get("loc")]
    return []


TOOL_NODE = NodeType(name="tool", execute=execute_tool, check=check_tool)
