"""A small MCP server (the SDK's MCPServer over stdio) whose tool list changes when asked: `add_tool`
registers another tool and announces it, as a server that loads plugins at run time would."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

server = MCPServer("changing")


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a tool `name` that greets, and tell subscribed clients the list changed."""

    def greet(who: str) -> str:
        return f"hello {who} from {name}"

    server.add_tool(greet, name=name, description=f"Greets (added at run time as {name}).")
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    server.run("stdio")
