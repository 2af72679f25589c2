"""`python -m ice_mcp.sandbox warmup [CACHE_DIR]`."""

import sys

from ice_mcp.sandbox.cli import warmup_cli

args = sys.argv[1:]
if not args or args[0] != "warmup":
    print("usage: python -m ice_mcp.sandbox warmup [CACHE_DIR]", file=sys.stderr)
    sys.exit(2)
sys.exit(warmup_cli(args[1:]))
