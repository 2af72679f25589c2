"""Settings of the MCP layer (what is listed, how long a call waits, who may change the catalogue)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ice_mcp.bundled import bundled_dir
from ice_mcp.server.auth.resource_server import OAuthConfig
from ice_mcp.server.extensions import ServerAdditions


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass(slots=True)
class ServerOptions:
    """How the catalogue is advertised and how calls behave."""

    name: str = "ice-mcp"
    version: str = "0.1.0"
    # Seconds a tool call waits for its run before answering `running` (Claude Desktop gives up at ~60 s).
    wait_seconds: float = field(default_factory=lambda: _env_float("ICE_MCP_WAIT_SECONDS", 25.0))
    # Upper bound for a caller-chosen `wait_seconds`.
    max_wait_seconds: float = 55.0
    # Advertise `workflow:<name>` instead of `workflow_<name>`.
    canonical_names: bool = False
    # Advertised names stay within this length: hosts prefix a server's tools (`ice_mcp__…`, Cursor's 60-character
    # cap) and 64 is every client's limit, so 40 leaves them room; a longer name ends in a hash of the whole, and
    # `workflow_<full name>` and the canonical id still reach it.
    max_name_length: int = 40
    # fnmatch patterns on advertised names or canonical ids; empty include = everything.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Only tools whose readOnlyHint is true are listed and callable (see README, "Read-only servers").
    read_only: bool = False
    # Streamable HTTP sessions: idle ones expire; each client (token caller, else peer address) and the
    # whole server have a cap, and at a cap the oldest idle session makes room for the new one.
    session_idle_seconds: float = field(
        default_factory=lambda: _env_float("ICE_MCP_SESSION_IDLE_SECONDS", 600.0)
    )
    max_sessions_per_client: int = field(
        default_factory=lambda: int(_env_float("ICE_MCP_MAX_SESSIONS_PER_CLIENT", 16))
    )
    max_sessions: int = field(default_factory=lambda: int(_env_float("ICE_MCP_MAX_SESSIONS", 1000)))
    # `--auth oauth`: access tokens from this issuer for this resource, instead of the static tokens.
    oauth: OAuthConfig | None = None
    # Over HTTP, catalogue changes need this bearer token; None = nobody over HTTP may change it.
    admin_token: str | None = field(
        default_factory=lambda: os.environ.get("ICE_MCP_ADMIN_TOKEN") or None
    )
    # Folders the resources and prompts come from: the package's bundled data (ICE_MCP_*_DIR override them).
    blueprints_dir: Path = field(default_factory=lambda: bundled_dir("blueprints"))
    docs_dir: Path = field(default_factory=lambda: bundled_dir("docs"))
    prompts_dir: Path = field(default_factory=lambda: bundled_dir("prompts"))
    # A tools/call from a client that negotiated the tasks extension waits this long for its run, then
    # answers with a task (a blueprint with `execution: task` answers with one at once).
    task_after_seconds: float = field(default_factory=lambda: _env_float("ICE_MCP_TASK_AFTER_SECONDS", 0.5))
    # How often a task's client should poll (`pollIntervalMs`).
    task_poll_seconds: float = 0.5
    # Tools, resources and prompts that extension modules add (`serve --extend MODULE`).
    additions: ServerAdditions = field(default_factory=ServerAdditions)
    # List the tools of upstream MCP servers (`--mcp-config`) on this catalogue too (`--expose-upstream`).
    expose_upstream: bool = False
    # Above this many workflows tools/list shows pinned ones only, plus workflow_search and workflow_start.
    catalogue_max: int = field(default_factory=lambda: int(_env_float("ICE_MCP_CATALOGUE_MAX", 40)))
    # Workflows listed however large the catalogue (`--pin NAME`), besides those whose blueprint says `pinned`.
    pinned: tuple[str, ...] = ()
