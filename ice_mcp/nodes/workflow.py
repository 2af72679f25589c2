"""`workflow` nodes: run a registered workflow inside this run (nesting depth is bounded)."""

from __future__ import annotations

from ice_mcp.blueprint.models import WorkflowNode
from ice_mcp.errors import UnknownName
from ice_mcp.nodes.base import NodeCall, NodeFailure, NodeResult, NodeType


async def execute_workflow(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, WorkflowNode)
    inputs = call.render("inputs") if "inputs" in call.node.templates else {}
    try:
        run = await call.ctx.run_workflow(spec.workflow_ref, inputs, label=spec.id)
    except UnknownName as exc:
        raise NodeFailure(exc.message, code="unknown_workflow", retryable=False) from None
    return NodeResult(run.output, run.cost_usd, run.usage)


WORKFLOW_NODE = NodeType(name="workflow", execute=execute_workflow)
