"""MCP tool annotations: what a tool or workflow declares it may do, in MCP's four hints."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ice_mcp.tools.registry import ToolAnnotations
from ice_mcp.types import Effects


def tool_annotations(entry: Any, title: str | None = None) -> types.ToolAnnotations:
    """A tool's declared annotations (none: all false) as MCP hints."""
    return workflow_annotations((getattr(entry, "annotations", None) or ToolAnnotations()).effects(), title)


def workflow_annotations(effects: Effects, title: str | None = None) -> types.ToolAnnotations:
    """What a workflow (the orchestrator folds it from its node types' declarations) or a tool may do, as MCP
    hints: destructive only when not read-only."""
    return types.ToolAnnotations(
        title=title,
        read_only_hint=effects.read_only,
        destructive_hint=effects.destructive and not effects.read_only,
        idempotent_hint=effects.idempotent,
        open_world_hint=effects.open_world,
    )
