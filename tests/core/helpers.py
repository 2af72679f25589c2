"""Small builders shared by the core tests (plain functions, no fixtures)."""

from __future__ import annotations

from typing import Any


def blueprint(*nodes: dict[str, Any], name: str = "t", **top: Any) -> dict[str, Any]:
    """A blueprint dict with these nodes."""
    return {"name": name, **top, "nodes": list(nodes)}


def tool(node_id: str, tool_name: str, args: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A tool node spec."""
    return {"id": node_id, "type": "tool", "tool_name": tool_name, "tool_args": args or {}, **fields}


def root_error(error: dict[str, Any]) -> dict[str, Any]:
    """The innermost error of a chain of `node_failed` errors (GraphFailed nests the cause in details)."""
    while error.get("code") == "node_failed" and isinstance(error.get("details", {}).get("error"), dict):
        error = error["details"]["error"]
    return error


def statuses(record: Any) -> dict[str, str]:
    return {node_id: node.status for node_id, node in record.nodes.items()}
