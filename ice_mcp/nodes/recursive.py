"""`recursive` nodes: repeat a body, workflow or agent until the convergence condition holds."""

from __future__ import annotations

import json
from typing import Any

from ice_mcp.blueprint.models import AgentNode, RecursiveNode
from ice_mcp.engine.plan import PlanNode
from ice_mcp.engine.templates import Constant
from ice_mcp.nodes.base import NodeCall, NodeFailure, NodeResult, NodeType, Usage
from ice_mcp.nodes.expressions import evaluate


async def execute_recursive(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, RecursiveNode)
    previous: Any = None
    cost, usage = 0.0, Usage()
    for iteration in range(1, spec.max_iterations + 1):
        variables = {"iteration": iteration, "previous": previous}
        label = f"{spec.id}[{iteration}]"
        if spec.body:
            run = await call.run_subgraph("body", variables, label=label)
            output, step_cost, step_usage = run.output, run.cost_usd, run.usage
        elif spec.workflow_ref:
            inputs = call.node.templates["inputs"].render(call.scope.child(variables)) if spec.inputs else {}
            run = await call.ctx.run_workflow(spec.workflow_ref, inputs, label=label)
            output, step_cost, step_usage = run.output, run.cost_usd, run.usage
        else:
            output, step_cost, step_usage = await _agent_step(call, spec, variables)
        cost += step_cost
        usage.add(step_usage)
        if await evaluate(call, "convergence_condition", iteration=iteration, previous=output):
            return NodeResult({"converged": True, "iterations": iteration, "output": output,
                               "reason": "condition_met"}, cost, usage)
        previous = output
    return NodeResult({"converged": False, "iterations": spec.max_iterations, "output": previous,
                       "reason": "max_iterations_reached"}, cost, usage)


async def _agent_step(call: NodeCall, spec: RecursiveNode, variables: dict[str, Any]) -> tuple[Any, float, Usage]:
    """One turn of a registered agent, given the iteration, the previous output and the inputs."""
    from ice_mcp.nodes import node_types

    agent_type = node_types().get("agent")
    if agent_type is None:
        raise NodeFailure("agent nodes are not available in this installation", code="unavailable_node_type",
                          retryable=False)
    scope = call.scope.child(variables)
    inputs = call.node.templates["inputs"].render(scope) if spec.inputs else {}
    message = json.dumps({**variables, "inputs": inputs}, default=str)
    agent_spec = AgentNode(id=spec.id, agent=spec.agent or "", input=message)
    node = PlanNode(spec.id, agent_spec, agent_type.execute, (), {"input": Constant(message)})
    result = await agent_type.execute(NodeCall(node, scope, call.ctx, call.attempt))
    # The agent is a leaf inside this container: charge its spend to the run here.
    call.ctx.spend.charge(result.cost_usd, result.usage)
    return result.output, result.cost_usd, result.usage


RECURSIVE_NODE = NodeType(name="recursive", execute=execute_recursive)
