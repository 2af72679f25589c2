"""`tool` nodes: call a registered tool with the rendered `tool_args`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue
from ice_mcp.blueprint.models import NodeSpec, ToolNode
from ice_mcp.core.effects import EffectsContext
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.core.templates import (
    Compiled,
    Constant,
    MappingValue,
    PathExpression,
    PathText,
    SequenceValue,
    Text,
)
from ice_mcp.errors import NodeFailure, UnknownName
from ice_mcp.services import Services
from ice_mcp.tools.context import CURRENT_CALL
from ice_mcp.tools.registry import SchemaToolEntry, ToolEntry, as_object
from ice_mcp.types import EFFECTFUL, Effects, NodeResult


async def execute_tool(call: NodeCall) -> NodeResult:
    spec = call.node.spec
    assert isinstance(spec, ToolNode)
    services = call.ctx.services
    try:
        entry = services.registry.tool(spec.tool_name)
    except UnknownName as exc:
        why = _unavailable(spec.tool_name, services)
        raise NodeFailure(exc.message + (f" ({why})" if why else ""), code="unknown_tool", retryable=False) from None
    template = call.node.templates.get("tool_args")
    arguments = template.render(call.scope) if template is not None else {}
    kwargs = entry.parse_arguments(arguments)
    CURRENT_CALL.set(call)  # as run_tool does, without one more coroutine per node
    return _node_result(await entry.call_parsed(kwargs))


async def run_tool(call: NodeCall, entry: ToolEntry, kwargs: dict[str, Any]) -> NodeResult:
    """Call a tool with checked arguments on behalf of a node attempt."""
    # The node's own task: the tool sees its call (idempotency key, services, budget) and nothing leaks out.
    CURRENT_CALL.set(call)
    return _node_result(await entry.call_parsed(kwargs))


def _node_result(result: Any) -> NodeResult:
    # Metered tools (paid APIs) may report their own cost and usage.
    return result if isinstance(result, NodeResult) else NodeResult(as_object(result))


def check_tool(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    """The tool exists, every argument is one it takes, none it needs is missing, and constant
    arguments have the type it expects."""
    assert isinstance(spec, ToolNode)
    registry = ctx.services.registry
    entry = registry.tools.get(spec.tool_name)
    if entry is None:
        why = _unavailable(spec.tool_name, ctx.services)
        return [ValidationIssue(code="unknown_tool", message=f"no tool named {spec.tool_name!r}"
                                + (f" ({why})" if why else ""), node_id=spec.id, field="tool_name",
                                suggestion=ctx.suggest(spec.tool_name, registry.tools))]
    issues: list[ValidationIssue] = []
    arguments = spec.tool_args
    if arguments:
        properties = entry.properties
        for key in arguments:
            if key not in properties:
                issues.append(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r} has no "
                                              f"argument {key!r}", node_id=spec.id, field=f"tool_args.{key}",
                                              suggestion=ctx.suggest(key, properties)))
    for key in entry.required:
        if key not in arguments:
            issues.append(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r} needs argument "
                                          f"{key!r}", node_id=spec.id, field="tool_args"))
    checked = entry.constrained.intersection(arguments) if arguments else None
    if not checked:
        return issues
    compiled = ctx.templates.get("tool_args")
    items = compiled.items if isinstance(compiled, MappingValue) else {}  # all constant: a Constant
    constants = {key: arguments[key] for key in checked if isinstance(items.get(key, compiled), Constant)}
    problems = _argument_problems(entry, constants)
    if isinstance(entry, SchemaToolEntry):  # a schema says what each argument's type must be
        for key in sorted(checked - constants.keys()):
            kinds = rendered_types(items[key], ctx.declared_inputs) if key in items else None
            problem = entry.type_problem(key, kinds) if kinds else None
            if problem:
                problems.append((key, problem))
    issues.extend(ValidationIssue(code="invalid_tool_args", message=f"tool {spec.tool_name!r}: {problem}",
                                  node_id=spec.id, field=f"tool_args.{key}")
                  for key, problem in problems)
    return issues


def _unavailable(tool_name: str, services: Services) -> str | None:
    """Why a tool of a configured MCP server is unknown (the server could not be reached)."""
    return services.upstream.unavailable(tool_name) if services.upstream is not None else None


def rendered_types(value: Compiled, declared_inputs: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The JSON types a templated value renders to, when compiling tells: text is a string, a mapping an
    object, a list an array, and `{{ inputs.x }}` the type the blueprint declares for x; else None."""
    if isinstance(value, Text | PathText):
        return frozenset({"string"})
    if isinstance(value, MappingValue):
        return frozenset({"object"})
    if isinstance(value, SequenceValue):
        return frozenset({"array"})
    if (isinstance(value, PathExpression) and value.root == "inputs" and len(value.keys) == 1
            and declared_inputs is not None):
        schema = declared_inputs.get(str(value.keys[0]))
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        if isinstance(kind, str):
            return frozenset({kind})
        if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
            return frozenset(kind)
    return None


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


def tool_effects(spec: NodeSpec, ctx: EffectsContext) -> Effects:
    """What the named tool declares; a tool unknown here may do anything."""
    assert isinstance(spec, ToolNode)
    return ctx.tool_effects(spec.tool_name) or EFFECTFUL


TOOL_NODE = NodeType(name="tool", execute=execute_tool, check=check_tool, effects=tool_effects, model=ToolNode,
                     placement="activity")
