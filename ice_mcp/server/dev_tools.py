"""The `ice-mcp` commands that live in a source checkout, not in the wheel: `dev-cluster` and
`serve --conformance-fixtures` (both in `ice_mcp_dev/`, beside the `ice_mcp` package of a clone)."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ice_mcp.errors import IceError

CHECKOUT = Path(__file__).resolve().parents[2]  # the folder holding `ice_mcp/` (and, in a clone, `ice_mcp_dev/`)
CONFORMANCE_MODULE = "ice_mcp_dev.conformance"


def dev_module(name: str) -> ModuleType:
    """`ice_mcp_dev.<name>`, found beside this package in a checkout; a clear error from an installed wheel."""
    if not (CHECKOUT / "ice_mcp_dev" / "__init__.py").is_file():
        raise IceError(f"{name.replace('_', ' ')} comes with a source checkout of ice_mcp (git clone, then "
                       "`make test-setup`), not with the installed package", code="needs_checkout")
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))  # an editable install maps `ice_mcp` only
    return importlib.import_module(f"ice_mcp_dev.{name}")


def add_dev_cluster_command(subparsers: Any) -> None:
    cluster = subparsers.add_parser(
        "dev-cluster", help="start a store (redis-server), Temporal's dev server, two workers and an MCP server "
                            "on this machine, offline, to try a cluster (from a source checkout)")
    cluster.add_argument("--folder", type=Path, help="where their data and logs go (default: DATA_DIR/dev-cluster)")
    cluster.add_argument("--engine", choices=["temporal", "embedded"], default="temporal",
                         help="temporal (default): workers run the runs; embedded: each MCP server runs what it "
                              "receives")
    cluster.add_argument("--replicas", type=int, help="MCP servers (default 1 with Temporal, 2 embedded)")
    cluster.add_argument("--workers", type=int, default=2, help="Temporal workers (default 2)")
    cluster.add_argument("--port", type=int, default=8000, help="the first MCP server's port (0: any free one)")
    cluster.add_argument("--redis-port", type=int, default=0, help="redis-server's port (default: a free one)")
    cluster.add_argument("--temporal-port", type=int, default=0, help="the Temporal frontend's port (default: free)")
    cluster.add_argument("--tools", action="append", default=[], metavar="MODULE", help="import a tool module")
    cluster.add_argument("--blueprints", action="append", default=[], metavar="DIR", help="register blueprints")
    cluster.add_argument("--templates", action="store_true", help="register the bundled blueprint templates too")
    cluster.set_defaults(handler=run_dev_cluster)


def run_dev_cluster(args: argparse.Namespace) -> int:
    try:
        cluster = dev_module("cluster")
    except IceError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    return int(cluster.run_dev_cluster(args))
