"""`workflow` nodes: run a registered workflow inside this run (nesting depth is bounded)."""

from __future__ import annotations

from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue
from ice_mcp.blueprint.models import NodeSpec, RecursiveNode, WorkflowNode
from ice_mcp.core.effects import EffectsContext
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.errors import NodeFailure, UnknownName
from ice_mcp.types import Effects, NodeResult


async def execute_workflow(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, WorkflowNode)
    inputs = call.render("inputs") if "inputs" in call.node.templates else {}
    try:
        run = await call.run_workflow(spec.workflow_ref, inputs, label=spec.id)
    except UnknownName as exc:
        raise NodeFailure(exc.message, code="unknown_workflow", retryable=False) from None
    return NodeResult(run.output, run.cost_usd, run.usage)


def check_workflow_ref(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    """A `workflow_ref` names a registered workflow."""
    assert isinstance(spec, WorkflowNode | RecursiveNode)
    workflows = ctx.services.registry.workflows
    if not spec.workflow_ref or spec.workflow_ref in workflows:
        return []
    return [ValidationIssue(code="unknown_workflow", message=f"no workflow named {spec.workflow_ref!r}",
                            node_id=spec.id, field="workflow_ref", suggestion=ctx.suggest(spec.workflow_ref, workflows))]


def workflow_estimate(name: str, ctx: CheckContext) -> CostEstimate:
    """A registered workflow's estimate (free when it is unknown or not compiled yet)."""
    entry = ctx.services.registry.workflows.get(name)
    plan = entry.plan if entry is not None else None
    return plan.estimate if plan is not None else CostEstimate()


def estimate_workflow(spec: NodeSpec, ctx: CheckContext, sub: CostEstimate) -> CostEstimate:
    assert isinstance(spec, WorkflowNode)
    return workflow_estimate(spec.workflow_ref, ctx)


def effects_workflow(spec: NodeSpec, ctx: EffectsContext) -> Effects:
    assert isinstance(spec, WorkflowNode)
    return ctx.workflow_effects(spec.workflow_ref)


# On Temporal a nested workflow is a child workflow, started from the workflow's own code.
WORKFLOW_NODE = NodeType(name="workflow", execute=execute_workflow, check=check_workflow_ref,
                         estimate=estimate_workflow, effects=effects_workflow, model=WorkflowNode, placement="workflow")
