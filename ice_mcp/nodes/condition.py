"""`condition` nodes: evaluate an expression; the scheduler gates `true_path`/`false_path` on it."""

from __future__ import annotations

from ice_mcp.blueprint.models import ConditionNode
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.nodes.expressions import evaluate
from ice_mcp.types import PURE, NodeResult


async def execute_condition(call: NodeCall) -> NodeResult:
    return NodeResult({"result": bool(await evaluate(call, "expression"))})


CONDITION_NODE = NodeType(name="condition", execute=execute_condition, effects=PURE, model=ConditionNode,
                          placement="workflow")
