"""`ice-mcp sandbox warmup`: verify the runtime and compile it ahead of time."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ice_mcp.sandbox.artifacts import RuntimeMissing
from ice_mcp.sandbox.cache import CacheLayout, ensure_cache


def warmup(cache_dir: Path | None = None, *, quiet: bool = False) -> CacheLayout:
    """Verify the carrier, compile and cache the module, marshal the driver. Idempotent."""
    return ensure_cache(cache_dir, quiet=quiet)


def warmup_cli(argv: list[str] | None = None) -> int:
    """`ice-mcp sandbox warmup [CACHE_DIR]`: returns the exit status.

    `argv` holds the arguments after `warmup` (none by default: the cache in
    $ICE_MCP_SANDBOX_CACHE, else the virtual environment's var/cache/ice_mcp/sandbox, else ~/.cache/ice_mcp/sandbox).
    """
    args = list(argv or [])
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: ice-mcp sandbox warmup [CACHE_DIR]", file=sys.stderr)
        return 2
    cache_dir = Path(args[0]) if args else None
    started = time.perf_counter()
    try:
        layout = warmup(cache_dir)
    except RuntimeMissing as e:
        print(f"sandbox warmup failed: {e}", file=sys.stderr)
        return 1
    print(f"sandbox runtime ready in {layout.root} ({time.perf_counter() - started:.1f} s)")
    return 0
