"""Tools for server subprocesses started by the tests (`--tools mcp_fixture_tools`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ice_mcp.errors import NodeFailure
from ice_mcp.tools.registry import ToolAnnotations, tool


@tool(annotations=ToolAnnotations(read_only=True, idempotent=True))
def echo(value: Any = None) -> dict[str, Any]:
    """Return the value given."""
    return {"value": value}


@tool(annotations=ToolAnnotations(read_only=True))
def boom(why: Any = None) -> dict[str, Any]:
    """Always fails."""
    raise NodeFailure(f"boom: {why}", code="boom", retryable=False)


class Measured(TypedDict):
    words: int
    upper: str


@tool(annotations=ToolAnnotations(read_only=True, idempotent=True))
def measure(text: str) -> Measured:
    """Count the words of a text and shout it (a typed result: its tool's outputSchema says so)."""
    return {"words": len(text.split()), "upper": text.upper()}
