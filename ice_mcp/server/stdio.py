"""stdio transport: what Claude Desktop starts. Only MCP goes to stdout."""

from __future__ import annotations

from typing import Any

from mcp.server.stdio import stdio_server

from ice_mcp.server.app import build_server
from ice_mcp.server.options import ServerOptions


async def serve_stdio(orc: Any, options: ServerOptions | None = None) -> None:
    server = build_server(orc, options)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
