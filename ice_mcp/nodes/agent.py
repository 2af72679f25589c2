"""`agent` nodes: a registered or inline agent runs its tool-calling loop over registry tools,
registered workflows and (when enabled) its memory."""

from __future__ import annotations

import json

from ice_mcp.agents.definition import AgentDefinition, load_agents, resolve_agent
from ice_mcp.agents.loop import AgentResult, run_agent
from ice_mcp.agents.memory import AgentMemoryBridge
from ice_mcp.agents.tools import AgentTool, registry_tool, valid_tool_name, workflow_tool
from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue
from ice_mcp.blueprint.models import AgentNode, NodeSpec
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.errors import NodeFailure, RunStopped, UnknownName
from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.pricing import call_cost_range, estimate_tokens
from ice_mcp.memory.types import MemoryUnavailable
from ice_mcp.nodes.llm import as_text, llm_failure, model_issues
from ice_mcp.services import Services
from ice_mcp.tools.context import ToolCall
from ice_mcp.types import EFFECTFUL, NodeResult

# Tokens a tool result is assumed to add to the conversation per turn, for the estimate.
TOOL_RESULT_ALLOWANCE_TOKENS = 500


def config_agents(services: Services) -> None:
    """Register the agents of the LLM config file's `agents` block (once, without replacing)."""
    block = services.llm.config.agents
    missing = {name: config for name, config in block.items() if name not in services.registry.agents}
    if missing:
        load_agents(missing, services.registry)


def _definition(spec: AgentNode, services: Services) -> AgentDefinition:
    config_agents(services)
    try:
        return resolve_agent(spec.agent, services.registry, spec.id)
    except UnknownName as exc:
        raise NodeFailure(exc.message, code="unknown_agent", retryable=False) from None
    except ValueError as exc:
        raise NodeFailure(str(exc), code="invalid_agent", retryable=False) from None


def _tools(call: NodeCall, definition: AgentDefinition) -> list[AgentTool]:
    registry = call.services.registry
    caller = ToolCall(call.ctx.run_id, call.node_path, call.attempt, call.services, call.spend, call.emit)
    tools: list[AgentTool] = []
    try:
        tools.extend(registry_tool(registry.tool(name), caller) for name in definition.tools)
        for name in definition.workflows:
            blueprint = registry.workflow(name).blueprint
            tools.append(workflow_tool(
                name,
                blueprint.description or "",
                blueprint.inputs,
                lambda workflow, inputs: call.run_workflow(workflow, inputs, label=f"{call.spec.id}.{workflow}"),
            ))
    except UnknownName as exc:
        raise NodeFailure(exc.message, code=exc.code, retryable=False) from None
    return tools


async def execute_agent(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, AgentNode)
    definition = _definition(spec, call.services)
    tools = _tools(call, definition)
    task = as_text(call.render("input"))
    system = definition.system
    bridge: AgentMemoryBridge | None = None
    if definition.memory.any_persistent:
        backend = call.ctx.globals.get("memory_backend") if isinstance(call.ctx.globals, dict) else None
        store = call.services.memory(backend if isinstance(backend, str) else None)
        bridge = AgentMemoryBridge(store, definition.name, f"{call.ctx.run_id}:{spec.id}", definition.memory)
        tools.extend(bridge.tools())
    try:
        if bridge is not None:
            context = await bridge.context(task)
            if context:
                system = f"{system}\n\nRelevant memory:\n{context}" if system else f"Relevant memory:\n{context}"
        result: AgentResult | None = None
        try:
            result = await run_agent(
                call.services.llm,
                definition,
                task,
                tools,
                system=system,
                emit=lambda event, **data: call.emit(event, agent=definition.name, **data),
                budget_left=call.spend.remaining,
                fatal=(RunStopped,),
            )
        except LLMError as exc:
            if bridge is not None:
                await bridge.record(task, None, error=exc.message)
            raise llm_failure(exc) from None
        if bridge is not None:
            await bridge.record(task, result)
    except MemoryUnavailable as exc:
        raise NodeFailure(exc.message, code=exc.code) from None
    return NodeResult(result.as_output(), result.cost_usd, result.usage)


def check_agent(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    assert isinstance(spec, AgentNode)
    services = ctx.services
    try:
        config_agents(services)
        definition = resolve_agent(spec.agent, services.registry, spec.id)
    except UnknownName as exc:
        return [ValidationIssue(code="unknown_agent", message=exc.message, node_id=spec.id, field="agent",
                                suggestion=exc.details.get("suggestion"))]
    except ValueError as exc:
        return [ValidationIssue(code="schema", message=str(exc), node_id=spec.id, field="agent")]
    issues = model_issues(definition.model, definition.provider, spec.id, services.llm, field="agent.model")
    registry = services.registry
    for name in definition.tools:
        if name not in registry.tools:
            issues.append(ValidationIssue(code="unknown_tool", message=f"agent tool {name!r} is not registered",
                                          node_id=spec.id, field="agent.tools", suggestion=ctx.suggest(name, registry.tools)))
    for name in definition.workflows:
        if name not in registry.workflows:
            issues.append(ValidationIssue(code="unknown_workflow", message=f"agent workflow {name!r} is not registered",
                                          node_id=spec.id, field="agent.workflows",
                                          suggestion=ctx.suggest(name, registry.workflows)))
    offered = [registry.tools[name].model_name if name in registry.tools else name for name in definition.tools]
    for name in (*offered, *definition.workflows):
        if not valid_tool_name(name):
            issues.append(ValidationIssue(code="schema", node_id=spec.id, field="agent.tools",
                                          message=f"{name!r} cannot be offered to a model: tool names are letters, "
                                                  "digits, '_' and '-', at most 64"))
    return issues


def estimate_agent(spec: NodeSpec, ctx: CheckContext, sub: CostEstimate) -> CostEstimate:
    """One to `max_iterations` calls; each turn resends the conversation, which grows by the
    previous answer and a tool result."""
    assert isinstance(spec, AgentNode)
    services = ctx.services
    try:
        config_agents(services)
        definition = resolve_agent(spec.agent, services.registry, spec.id)
    except (UnknownName, ValueError):
        return CostEstimate(llm_calls_min=1, llm_calls_max=1)
    service = services.llm
    resolution = service.resolve(definition.model, definition.provider)
    if not resolution.ok or resolution.provider is None:
        return CostEstimate(llm_calls_min=1, llm_calls_max=definition.max_iterations)
    price = service.price(resolution.model, resolution.provider)
    schemas = ""
    for name in definition.tools:
        entry = services.registry.tools.get(name)
        if entry is not None:
            schemas += name + entry.description + json.dumps(entry.input_schema)
    base = estimate_tokens((definition.system or "") + spec.input + schemas) + 200 * len(definition.workflows)
    low, _ = call_cost_range(price, base, definition.max_tokens)
    high = 0.0
    for turn in range(definition.max_iterations):
        grown = base + turn * (definition.max_tokens + TOOL_RESULT_ALLOWANCE_TOKENS)
        high += call_cost_range(price, grown, definition.max_tokens)[1]
    return CostEstimate(llm_calls_min=1, llm_calls_max=definition.max_iterations, usd_min=low, usd_max=high)


# An agent picks its own tools at run time: whatever they may do, it may.
AGENT_NODE = NodeType(name="agent", execute=execute_agent, check=check_agent, estimate=estimate_agent,
                      effects=EFFECTFUL, model=AgentNode, placement="activity")
