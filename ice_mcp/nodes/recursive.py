"""`recursive` nodes: repeat a body, workflow or agent until the convergence condition holds."""

from __future__ import annotations

import json
from typing import Any

from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue
from ice_mcp.blueprint.models import AgentNode, NodeSpec, RecursiveNode
from ice_mcp.core.effects import EffectsContext
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.core.plan import PlanNode
from ice_mcp.core.templates import Constant
from ice_mcp.errors import NodeFailure
from ice_mcp.nodes.expressions import evaluate
from ice_mcp.nodes.workflow import check_workflow_ref, workflow_estimate
from ice_mcp.types import EFFECTFUL, PURE, Effects, NodeResult, Usage


def recursive_node_type(agent: NodeType | None) -> NodeType:
    """The `recursive` node type; `agent` runs its agent steps (None: agent steps are unavailable here)."""

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
                run = await call.run_workflow(spec.workflow_ref, inputs, label=label)
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

    async def _agent_step(call: NodeCall, spec: RecursiveNode, variables: dict[str, Any]
                          ) -> tuple[Any, float, Usage]:
        """One turn of a registered agent, given the iteration, the previous output and the inputs."""
        if agent is None:
            raise NodeFailure("agent nodes are not available in this installation", code="unavailable_node_type",
                              retryable=False)
        scope = call.scope.child(variables)
        inputs = call.node.templates["inputs"].render(scope) if spec.inputs else {}
        message = json.dumps({**variables, "inputs": inputs}, default=str)
        agent_spec = AgentNode(id=spec.id, agent=spec.agent or "", input=message)
        node = PlanNode(spec.id, agent_spec, agent.execute, (), {"input": Constant(message)})
        result = await agent.execute(NodeCall(node, scope, call.ctx, call.attempt))
        # The agent is a leaf inside this container: charge its spend to the run here.
        call.spend.charge(result.cost_usd, result.usage)
        return result.output, result.cost_usd, result.usage

    def check_recursive(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
        assert isinstance(spec, RecursiveNode)
        issues = check_workflow_ref(spec, ctx)
        if spec.agent and agent is None:
            issues.append(ValidationIssue(code="unavailable_node_type", node_id=spec.id, field="agent",
                                          message="agent nodes are not available in this installation"))
        elif spec.agent and spec.agent not in ctx.services.registry.agents:
            issues.append(ValidationIssue(code="unknown_agent", message=f"no agent named {spec.agent!r}",
                                          node_id=spec.id, field="agent",
                                          suggestion=ctx.suggest(spec.agent, ctx.services.registry.agents)))
        return issues

    def estimate_recursive(spec: NodeSpec, ctx: CheckContext, body: CostEstimate) -> CostEstimate:
        assert isinstance(spec, RecursiveNode)
        if spec.agent:
            return CostEstimate(llm_calls_min=1, llm_calls_max=None, usd_max=None).times(1, spec.max_iterations)
        step = workflow_estimate(spec.workflow_ref, ctx) if spec.workflow_ref else body
        return step.times(1, spec.max_iterations)

    def effects_recursive(spec: NodeSpec, ctx: EffectsContext) -> Effects:
        assert isinstance(spec, RecursiveNode)
        if spec.workflow_ref:
            return ctx.workflow_effects(spec.workflow_ref)
        return EFFECTFUL if spec.agent else PURE  # a body's nodes count as the graph's own

    return NodeType(name="recursive", execute=execute_recursive, check=check_recursive,
                    estimate=estimate_recursive, effects=effects_recursive, model=RecursiveNode, placement="workflow")
