"""MCP tool annotations derived from what a workflow's nodes can do."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import mcp_types as types


def iter_nodes(nodes: Iterable[Any]) -> Iterator[Any]:
    """Every node of a graph, sub-graphs (loop bodies, parallel branches, recursive bodies) included."""
    for node in nodes:
        yield node
        body = getattr(node, "body", None)
        if isinstance(body, list):
            yield from iter_nodes(body)
        for branch in getattr(node, "branches", None) or []:
            if isinstance(branch, list):
                yield from iter_nodes(branch)


def _tool_flags(entry: Any) -> tuple[bool, bool, bool, bool]:
    ann = getattr(entry, "annotations", None)
    return (
        bool(getattr(ann, "read_only", False)),
        bool(getattr(ann, "destructive", False)),
        bool(getattr(ann, "idempotent", False)),
        bool(getattr(ann, "open_world", False)),
    )


def tool_annotations(entry: Any, title: str | None = None) -> types.ToolAnnotations:
    read_only, destructive, idempotent, open_world = _tool_flags(entry)
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive and not read_only,
        idempotent_hint=idempotent or read_only,
        open_world_hint=open_world,
    )


def workflow_annotations(
    blueprint: Any, registry: Any, title: str | None = None, depth: int = 0
) -> types.ToolAnnotations:
    """Read-only only if every node is; destructive if any node may be; open-world if any node reaches out."""
    read_only = idempotent = True
    destructive = open_world = False
    for node in iter_nodes(getattr(blueprint, "nodes", []) or []):
        kind = getattr(node, "type", "")
        if kind == "tool":
            entry = getattr(registry, "tools", {}).get(getattr(node, "tool_name", ""))
            r, d, i, o = _tool_flags(entry) if entry is not None else (False, True, False, True)
            read_only &= r
            destructive |= d and not r
            idempotent &= i or r
            open_world |= o
        elif kind in ("llm",):
            idempotent = False
            open_world = True
        elif kind == "agent":
            read_only = idempotent = False
            open_world = destructive = True
        elif kind == "human":  # a person answers: not the same answer twice, and from outside
            idempotent = False
            open_world = True
        elif kind in ("workflow", "recursive") and getattr(node, "workflow_ref", None):
            child = getattr(registry, "workflows", {}).get(node.workflow_ref)
            if child is None or depth > 8:
                read_only = idempotent = False
                open_world = destructive = True
            else:
                sub = workflow_annotations(child.blueprint, registry, depth=depth + 1)
                read_only &= bool(sub.read_only_hint)
                destructive |= bool(sub.destructive_hint)
                idempotent &= bool(sub.idempotent_hint)
                open_world |= bool(sub.open_world_hint)
        elif kind == "recursive" and getattr(node, "agent", None):
            read_only = idempotent = False
            open_world = destructive = True
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive and not read_only,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )
