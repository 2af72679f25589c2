"""A workflow's graph as the browser draws it: the protocol's own (`run_graph`), which the MCP App sends too."""

from __future__ import annotations

from ice_mcp.operations.run_graph import (
    MAX_DEPTH,
    MAX_NODES,
    PlanLookup,
    blueprint_graph,
    plan_graph,
)

__all__ = ["MAX_DEPTH", "MAX_NODES", "PlanLookup", "blueprint_graph", "plan_graph"]
