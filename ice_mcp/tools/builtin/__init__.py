"""The tools every installation has."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import Field

from ice_mcp.tools.builtin.data import json_query, render_template
from ice_mcp.tools.builtin.files import csv_reader, file_list, file_read, file_write
from ice_mcp.tools.builtin.llm_tools import register_llm_tools
from ice_mcp.tools.builtin.mail import email_send
from ice_mcp.tools.builtin.net import http_request
from ice_mcp.tools.registry import Registry, ToolAnnotations

MAX_SLEEP_SECONDS = 300.0


async def sleep(seconds: Annotated[float, Field(ge=0, le=MAX_SLEEP_SECONDS)]) -> dict[str, Any]:
    """Wait this many seconds (at most 300); cancellable."""
    await asyncio.sleep(seconds)
    return {"slept": seconds}


READ_ONLY = ToolAnnotations(read_only=True, idempotent=True)
BUILTIN_TOOLS = (
    (csv_reader, READ_ONLY, True),
    (file_read, READ_ONLY, True),
    (file_write, ToolAnnotations(destructive=True), True),
    (file_list, READ_ONLY, True),
    (json_query, READ_ONLY, False),
    (render_template, READ_ONLY, False),
    (http_request, ToolAnnotations(open_world=True), False),
    (sleep, READ_ONLY, False),
    (email_send, ToolAnnotations(open_world=True), False),
)


def register_builtin_tools(registry: Registry) -> None:
    for function, hints, blocking in BUILTIN_TOOLS:
        if function.__name__ not in registry.tools:
            registry.add_tool(function, annotations=hints, blocking=blocking)
    register_llm_tools(registry)
