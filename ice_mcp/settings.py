"""Server-wide settings, each with an embedded default and an environment variable. Imports nothing of ours."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "ice_mcp"


@dataclass(slots=True)
class Settings:
    """Server-wide settings; every field has an embedded default and an environment variable."""

    data_dir: Path = field(default_factory=_default_data_dir)
    workspace: Path = field(default_factory=Path.cwd)
    # Errors and the MCP instructions may name the workspace's absolute path: not where callers are remote (HTTP).
    name_workspace: bool = True
    max_workflow_depth: int = 8
    http_max_bytes: int = 10 * 1024 * 1024
    http_timeout_seconds: float = 30.0
    memory_backend: str = "memory"
    persist_runs: bool = True
    state_url: str | None = None  # a shared run store (redis://HOST:PORT/DB) instead of SQLite in data_dir
    max_concurrent_runs: int | None = None  # runs this process executes at once; more wait for a slot
    sandbox_expressions: bool = False  # evaluate conditions and convergence in the WASM sandbox
    caller_budget_usd: float | None = None  # what one caller (an MCP client's token) may spend in all
    # The largest blueprint or manifest accepted (the server validates off the event loop).
    max_blueprint_nodes: int = 10_000
    max_blueprint_depth: int = 64
    max_blueprint_bytes: int = 4 * 1024 * 1024
    max_blueprint_templates: int = 20_000
    allow_net: tuple[str, ...] = ()  # CIDRs and host names outbound fetches may reach beyond public addresses
    egress_proxy: str | None = None  # an HTTP proxy every outbound fetch goes through (after the guard's checks)
    lease_seconds: float = 15.0  # a server that stops heartbeating this long loses its runs to another
    idempotency_key_seconds: float = 24 * 3600.0  # a call retried with the same key attaches to its run this long
    engine: str = "embedded"  # what runs the runs: "embedded" (this process) or "temporal" (a fleet of workers)
    temporal_address: str | None = None  # HOST:PORT of the Temporal frontend (engine "temporal")
    temporal_namespace: str = "default"
    temporal_task_queue: str = "ice-mcp"
    temporal_heartbeat_seconds: float = 3.0  # a node's activity silent this long lost its worker: it runs again
    webhook_max_bytes: int = 1024 * 1024  # the largest webhook delivery read (413 past it)
    public_url: str | None = None  # where callers reach `serve --http` (webhook URLs); default: its address
    smtp_url: str | None = None  # email_send's server: smtp://user:pass@host:port (STARTTLS if offered) or smtps://
    smtp_from: str | None = None  # email_send's From address
    # Seconds before each retry of a notification (±20 % jitter); one attempt more than there are delays.
    notify_backoff: tuple[float, ...] = (5.0, 25.0, 120.0, 600.0, 3600.0)
    retention_days: float | None = None  # servers delete runs that ended longer ago (None: runs are kept)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        env = os.environ
        values: dict[str, Any] = {}
        if env.get("ICE_MCP_DATA_DIR"):
            values["data_dir"] = Path(env["ICE_MCP_DATA_DIR"])
        if env.get("ICE_MCP_WORKSPACE"):
            values["workspace"] = Path(env["ICE_MCP_WORKSPACE"])
        if env.get("ICE_MCP_MAX_WORKFLOW_DEPTH"):
            values["max_workflow_depth"] = int(env["ICE_MCP_MAX_WORKFLOW_DEPTH"])
        if env.get("ICE_MCP_SANDBOX_EXPRESSIONS"):
            values["sandbox_expressions"] = env["ICE_MCP_SANDBOX_EXPRESSIONS"].lower() in ("1", "true", "yes")
        if env.get("ICE_MCP_CALLER_BUDGET_USD"):
            values["caller_budget_usd"] = float(env["ICE_MCP_CALLER_BUDGET_USD"])
        if env.get("ICE_MCP_ALLOW_NET"):
            values["allow_net"] = tuple(e.strip() for e in env["ICE_MCP_ALLOW_NET"].split(",") if e.strip())
        if env.get("ICE_MCP_EGRESS_PROXY"):
            values["egress_proxy"] = env["ICE_MCP_EGRESS_PROXY"]
        if env.get("ICE_MCP_LEASE_SECONDS"):
            values["lease_seconds"] = float(env["ICE_MCP_LEASE_SECONDS"])
        if env.get("ICE_MCP_IDEMPOTENCY_KEY_SECONDS"):
            values["idempotency_key_seconds"] = float(env["ICE_MCP_IDEMPOTENCY_KEY_SECONDS"])
        if env.get("ICE_MCP_WEBHOOK_MAX_BYTES"):
            values["webhook_max_bytes"] = int(env["ICE_MCP_WEBHOOK_MAX_BYTES"])
        if env.get("ICE_MCP_PUBLIC_URL"):
            values["public_url"] = env["ICE_MCP_PUBLIC_URL"].rstrip("/")
        if env.get("ICE_MCP_SMTP_URL"):
            values["smtp_url"] = env["ICE_MCP_SMTP_URL"]
        if env.get("ICE_MCP_SMTP_FROM"):
            values["smtp_from"] = env["ICE_MCP_SMTP_FROM"]
        if env.get("ICE_MCP_NOTIFY_BACKOFF"):
            values["notify_backoff"] = tuple(float(d) for d in env["ICE_MCP_NOTIFY_BACKOFF"].split(",") if d.strip())
        if env.get("ICE_MCP_RETENTION_DAYS"):
            values["retention_days"] = float(env["ICE_MCP_RETENTION_DAYS"])
        if env.get("ICE_MCP_MAX_RUNS"):
            values["max_concurrent_runs"] = int(env["ICE_MCP_MAX_RUNS"])
        if env.get("ICE_MCP_STATE"):
            values["state_url"] = env["ICE_MCP_STATE"]
        if env.get("ICE_MCP_MEMORY_BACKEND"):
            values["memory_backend"] = env["ICE_MCP_MEMORY_BACKEND"]
        if env.get("ICE_MCP_TEMPORAL_HEARTBEAT_SECONDS"):
            values["temporal_heartbeat_seconds"] = float(env["ICE_MCP_TEMPORAL_HEARTBEAT_SECONDS"])
        for key, name in (("engine", "ICE_MCP_ENGINE"), ("temporal_address", "ICE_MCP_TEMPORAL"),
                          ("temporal_namespace", "ICE_MCP_TEMPORAL_NAMESPACE"),
                          ("temporal_task_queue", "ICE_MCP_TEMPORAL_TASK_QUEUE")):
            if env.get(name):
                values[key] = env[name]
        values.update({k: v for k, v in overrides.items() if v is not None})
        for key in ("data_dir", "workspace"):
            values[key] = Path(values[key]).expanduser().resolve() if key in values else None
        return cls(**{k: v for k, v in values.items() if v is not None})
