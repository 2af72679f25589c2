"""MCP tool annotations: what a tool or workflow declares it may do, in MCP's four hints."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ice_mcp.types import Effects


def tool_annotations(entry: Any, title: str | None = None) -> types.ToolAnnotations:
    ann = getattr(entry, "annotations", None)
    read_only = bool(getattr(ann, "read_only", False))
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=bool(getattr(ann, "destructive", False)) and not read_only,
        idempotent_hint=bool(getattr(ann, "idempotent", False)) or read_only,
        open_world_hint=bool(getattr(ann, "open_world", False)),
    )


def workflow_annotations(effects: Effects, title: str | None = None) -> types.ToolAnnotations:
    """A workflow's effects (the orchestrator folds them from its node types' declarations) as MCP hints."""
    return types.ToolAnnotations(
        title=title,
        read_only_hint=effects.read_only,
        destructive_hint=effects.destructive and not effects.read_only,
        idempotent_hint=effects.idempotent,
        open_world_hint=effects.open_world,
    )
