"""The MCP server: every workflow, tool and agent as an MCP tool, over stdio and HTTP.

Names are imported on first use, so the command line can add `serve` without loading the SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ServerOptions": "ice_mcp.server.options",
    "add_serve_commands": "ice_mcp.server.cli",
    "build_server": "ice_mcp.server.protocol.server",
    "create_http_app": "ice_mcp.server.web.app",
    "serve_main": "ice_mcp.server.cli",
    "serve_stdio": "ice_mcp.server.stdio",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ice_mcp.server' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
