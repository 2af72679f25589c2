"""Evaluating a node's expression: in-process by default, in the WebAssembly sandbox when the operator asks."""

from __future__ import annotations

from typing import Any

from ice_mcp.core.executor import NodeCall
from ice_mcp.core.templates import Expression


async def evaluate(call: NodeCall, field: str, **extra: Any) -> Any:
    """The value of the node's expression `field`, with `extra` names bound."""
    if not call.services.settings.sandbox_expressions:
        return call.evaluate(field, **extra)
    expression = call.node.templates[field]
    assert isinstance(expression, Expression)
    scope = call.scope.child(extra) if extra else call.scope
    return await call.services.expression_sandbox.evaluate(expression.source, scope.select(expression.names))
