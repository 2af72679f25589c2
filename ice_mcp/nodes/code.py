"""The `code` node: a Python snippet run as the body of `def main(inputs)` in the WebAssembly sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.models import CodeNode
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.errors import NodeFailure
from ice_mcp.sandbox import require_runtime
from ice_mcp.types import PURE, NodeResult

if TYPE_CHECKING:
    from ice_mcp.sandbox import Sandbox

# The sandbox (wasmtime) loads when a code node first runs (`services.sandbox`), not with the node types. Where it
# cannot run there is no code node, as when this module imported it: `builtin_node_types` reports the ImportError.
require_runtime()


async def execute_code(call: NodeCall) -> NodeResult:
    spec = call.spec
    if not isinstance(spec, CodeNode):
        raise NodeFailure(f"node {spec.id!r} is not a code node", code="internal", retryable=False)
    inputs: Any = call.render("inputs")
    if not isinstance(inputs, dict):
        raise NodeFailure("a code node's inputs must render to an object", code="invalid_input", retryable=False)
    sandbox: Sandbox = call.services.sandbox  # one per orchestrator
    # Without its own limit the snippet gets the node's attempt timeout; run_code clamps both
    # to the server's ceilings.
    outcome = await sandbox.run_code(
        spec.code,
        inputs,
        timeout_seconds=spec.limits.timeout_seconds or spec.timeout_seconds,
        memory_mb=spec.limits.memory_mb,
    )
    return NodeResult(output=outcome.as_output())


CODE_NODE = NodeType(name="code", execute=execute_code, effects=PURE, model=CodeNode, placement="activity")  # the sandbox has no files, network or clock to touch
