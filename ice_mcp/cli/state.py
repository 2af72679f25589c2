"""`ice-mcp state copy FROM TO`: every record of one run store copied into another, e.g. a data folder's runs into
PostgreSQL before its servers move there (the work is `ice_mcp.store.copy`'s)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ice_mcp.errors import IceError

COPY_HELP = "copy every record of one run store into another (a data folder into PostgreSQL, or back)"
COPY_DESCRIPTION = (
    "Copy runs, journals, blueprints, schedules and their firings, webhooks and their deliveries, notification "
    "targets and the outbox, admissions, owners, caller spend, payloads and secrets from FROM into TO, table by "
    "table. FROM and TO are store URLs (sqlite:///FILE, postgresql://USER@HOST:PORT/DB) or data folders; TO is "
    "made and migrated if new. Rows TO holds already are kept, so the copy can run again. Stop the servers on "
    "FROM first. Prints the rows copied, by table, as JSON.")


def add_state_commands(commands: Any) -> None:
    """`state copy`, on the `ice-mcp` parser's subcommands."""
    state = commands.add_parser("state", help="the run store itself")
    leaves = state.add_subparsers(dest="state_command", required=True, metavar="COMMAND")
    copy = leaves.add_parser("copy", help=COPY_HELP, description=COPY_DESCRIPTION)
    copy.add_argument("source", metavar="FROM", help="the store to copy: a URL or a data folder")
    copy.add_argument("target", metavar="TO", help="the store to copy into: a URL or a data folder")
    copy.set_defaults(handler=copy_command)


def copy_command(args: argparse.Namespace) -> int:
    from ice_mcp.store.copy import copy_state

    try:
        copied = copy_state(args.source, args.target, Path.cwd())
    except IceError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(copied, indent=2))
    return 0
