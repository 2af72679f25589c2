"""ice_mcp: workflow orchestration exposed as MCP tools.

    from ice_mcp import tool, WorkflowBuilder, run

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    bp = WorkflowBuilder("sum").add_tool("s", "add", {"a": 1, "b": 2}).build()
    record = await run(bp)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.lazy import lazy_exports

if TYPE_CHECKING:
    from ice_mcp.agents.definition import agent, register_agent
    from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue, ValidationReport
    from ice_mcp.blueprint.loading import load_blueprint, load_network
    from ice_mcp.blueprint.models import Blueprint, NetworkManifest
    from ice_mcp.builder import WorkflowBuilder
    from ice_mcp.core.executor import NodeCall, NodeType
    from ice_mcp.errors import BlueprintInvalid, IceError, InputsInvalid, NodeFailure, UnknownName
    from ice_mcp.orchestrator import Orchestrator, RunHandle
    from ice_mcp.settings import Settings
    from ice_mcp.store.records import RunRecord
    from ice_mcp.tools.context import ToolCall, current_call
    from ice_mcp.tools.modules import import_tool_modules
    from ice_mcp.tools.registry import DEFAULT_REGISTRY, Registry, Tool, ToolAnnotations, tool
    from ice_mcp.types import NodeResult, Usage

__all__ = [
    "DEFAULT_REGISTRY",
    "Blueprint",
    "BlueprintInvalid",
    "CostEstimate",
    "IceError",
    "InputsInvalid",
    "NetworkManifest",
    "NodeCall",
    "NodeFailure",
    "NodeResult",
    "NodeType",
    "Orchestrator",
    "Registry",
    "RunHandle",
    "RunRecord",
    "Settings",
    "Tool",
    "ToolAnnotations",
    "ToolCall",
    "UnknownName",
    "Usage",
    "ValidationIssue",
    "ValidationReport",
    "WorkflowBuilder",
    "agent",
    "current_call",
    "default_orchestrator",
    "import_tool_modules",
    "load_blueprint",
    "load_network",
    "register_agent",
    "register_workflow",
    "run",
    "run_network",
    "tool",
    "validate",
]

# Where each exported name lives. They load on first use (PEP 562), so that a process which needs only a
# part of the package (`ice-mcp serve` over stdio, say) does not pay for agents, LLM config and the rest.
_LAZY: dict[str, str] = {
    "agent": "ice_mcp.agents.definition",
    "register_agent": "ice_mcp.agents.definition",
    "CostEstimate": "ice_mcp.blueprint.issues",
    "ValidationIssue": "ice_mcp.blueprint.issues",
    "ValidationReport": "ice_mcp.blueprint.issues",
    "load_blueprint": "ice_mcp.blueprint.loading",
    "load_network": "ice_mcp.blueprint.loading",
    "Blueprint": "ice_mcp.blueprint.models",
    "NetworkManifest": "ice_mcp.blueprint.models",
    "WorkflowBuilder": "ice_mcp.builder",
    "NodeCall": "ice_mcp.core.executor",
    "NodeType": "ice_mcp.core.executor",
    "BlueprintInvalid": "ice_mcp.errors",
    "IceError": "ice_mcp.errors",
    "InputsInvalid": "ice_mcp.errors",
    "NodeFailure": "ice_mcp.errors",
    "UnknownName": "ice_mcp.errors",
    "Orchestrator": "ice_mcp.orchestrator",
    "RunHandle": "ice_mcp.orchestrator",
    "Settings": "ice_mcp.settings",
    "RunRecord": "ice_mcp.store.records",
    "ToolCall": "ice_mcp.tools.context",
    "current_call": "ice_mcp.tools.context",
    "import_tool_modules": "ice_mcp.tools.modules",
    "DEFAULT_REGISTRY": "ice_mcp.tools.registry",
    "Registry": "ice_mcp.tools.registry",
    "Tool": "ice_mcp.tools.registry",
    "ToolAnnotations": "ice_mcp.tools.registry",
    "tool": "ice_mcp.tools.registry",
    "NodeResult": "ice_mcp.types",
    "Usage": "ice_mcp.types",
}


# An exported name, imported from its module on first use (and kept here).
__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


_default: Orchestrator | None = None


def default_orchestrator() -> Orchestrator:
    """The process-wide orchestrator behind the module-level functions (created on first use). It alone
    reads DEFAULT_REGISTRY, where `@tool` and `@agent` collect: live, beneath its own registry."""
    from ice_mcp.orchestrator import Orchestrator
    from ice_mcp.tools.registry import DEFAULT_REGISTRY, Registry

    global _default
    if _default is None:
        _default = Orchestrator(registry=Registry(parent=DEFAULT_REGISTRY))
    return _default


def validate(blueprint: Blueprint | Mapping[str, Any] | str | Path) -> ValidationReport:
    """Every problem at once, with a cost estimate. Never raises."""
    return default_orchestrator().validate(blueprint)


async def run(target: Blueprint | Mapping[str, Any] | str | Path, inputs: Mapping[str, Any] | None = None,
              **options: Any) -> RunRecord:
    """Run a blueprint (or a registered workflow by name) to the end; returns the run record."""
    return await default_orchestrator().run(target, inputs, **options)


async def run_network(manifest: NetworkManifest | Mapping[str, Any] | str | Path, **options: Any) -> dict[str, Any]:
    """Run a network manifest; returns `{"network", "status", "workflows": {...}}`."""
    options.setdefault("from_client", False)
    return await default_orchestrator().run_network(manifest, **options)


def register_workflow(blueprint: Blueprint | Mapping[str, Any] | str | Path) -> Blueprint:
    """Validate and register a workflow by its name; raises BlueprintInvalid."""
    return default_orchestrator().register_blueprint(blueprint)
