"""Evaluating a node's expression: in-process by default, in the WebAssembly sandbox when the operator asks."""

from __future__ import annotations

from typing import Any

from ice_mcp.engine.templates import Expression
from ice_mcp.nodes.base import NodeCall
from ice_mcp.services import Services


def _expression_sandbox(services: Services) -> Any:
    from ice_mcp.sandbox.expressions import ExpressionSandbox  # wasmtime only when asked for

    return ExpressionSandbox()


async def evaluate(call: NodeCall, field: str, **extra: Any) -> Any:
    """The value of the node's expression `field`, with `extra` names bound."""
    if not call.services.settings.sandbox_expressions:
        return call.evaluate(field, **extra)
    expression = call.node.templates[field]
    assert isinstance(expression, Expression)
    scope = call.scope.child(extra) if extra else call.scope
    sandbox = call.services.resource("expression_sandbox", _expression_sandbox)
    return await sandbox.evaluate(expression.source, scope.select(expression.names))
