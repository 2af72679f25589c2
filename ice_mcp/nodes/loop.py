"""`loop` nodes: run the body once per item, `concurrency` at a time, results in item order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ice_mcp.blueprint.issues import CostEstimate
from ice_mcp.blueprint.models import LoopNode, NodeSpec
from ice_mcp.core.context import SubgraphResult
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.errors import NodeFailure
from ice_mcp.nodes.concurrency import run_bounded
from ice_mcp.types import PURE, NodeResult, Usage


async def execute_loop(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, LoopNode)
    items = call.render("items")
    if isinstance(items, Mapping):
        items = [{"key": k, "value": v} for k, v in items.items()]
    if not isinstance(items, list | tuple):
        raise NodeFailure(f"loop items must be a list, got {type(items).__name__}", code="invalid_items",
                          retryable=False)
    truncated = spec.max_iterations is not None and len(items) > spec.max_iterations
    items = list(items[: spec.max_iterations] if spec.max_iterations is not None else items)

    def job(index: int, item: Any) -> Any:
        return lambda: call.run_subgraph("body", {spec.item_var: item, "index": index}, label=f"{spec.id}[{index}]")

    runs: list[SubgraphResult] = await run_bounded([job(i, item) for i, item in enumerate(items)], spec.concurrency)
    output: dict[str, Any] = {"results": [run.output for run in runs], "count": len(runs)}
    if truncated:
        output["truncated"] = True
    usage = Usage()
    for run in runs:
        usage.add(run.usage)
    return NodeResult(output, sum(run.cost_usd for run in runs), usage)


def estimate_loop(spec: NodeSpec, ctx: CheckContext, body: CostEstimate) -> CostEstimate:
    assert isinstance(spec, LoopNode)
    return body.times(0, spec.max_iterations)


LOOP_NODE = NodeType(name="loop", execute=execute_loop, estimate=estimate_loop, effects=PURE,  # its body: its own nodes
                     model=LoopNode, placement="workflow")
