"""The extension point's former module name, kept so that `from ice_mcp.server.additions import ServerAdditions`
(README) goes on working: it lives in `ice_mcp.server.extensions`."""

from ice_mcp.server.extensions import (
    NativePrompt,
    NativeTemplate,
    NativeTool,
    ServerAdditions,
    load_extension,
)

__all__ = ["NativePrompt", "NativeTemplate", "NativeTool", "ServerAdditions", "load_extension"]
