"""The peer of bench/stdio_start.py: the official SDK's low-level `Server` with one tool over stdio, importing
nothing else (so that the bench's own modules are not counted in its start)."""

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

tool = types.Tool(name="noop", input_schema={"type": "object", "properties": {"value": {}}})


async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="{}")])


server = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
