"""Server-wide settings, each with an embedded default and an environment variable. Imports nothing of ours."""

from __future__ import annotations

import os
from collections.abc import Callable
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
    state_url: str | None = None  # a shared run store (redis://HOST:PORT/DB, postgresql://...) instead of SQLite in data_dir
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
        for name, (key, read) in _FROM_ENV.items():
            if env.get(name):
                values[key] = read(env[name])
        values.update({k: v for k, v in overrides.items() if v is not None})
        for key in ("data_dir", "workspace"):
            values[key] = Path(values[key]).expanduser().resolve() if key in values else None
        return cls(**{k: v for k, v in values.items() if v is not None})


def _flag(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def _hosts(text: str) -> tuple[str, ...]:
    return tuple(e.strip() for e in text.split(",") if e.strip())


def _delays(text: str) -> tuple[float, ...]:
    return tuple(float(d) for d in text.split(",") if d.strip())


def _same(text: str) -> str:
    return text


# The environment variables `Settings.from_env` reads (when set and not empty): the field each sets, read how.
_FROM_ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "ICE_MCP_DATA_DIR": ("data_dir", Path), "ICE_MCP_WORKSPACE": ("workspace", Path),
    "ICE_MCP_MAX_WORKFLOW_DEPTH": ("max_workflow_depth", int), "ICE_MCP_SANDBOX_EXPRESSIONS": ("sandbox_expressions", _flag),
    "ICE_MCP_CALLER_BUDGET_USD": ("caller_budget_usd", float), "ICE_MCP_ALLOW_NET": ("allow_net", _hosts),
    "ICE_MCP_EGRESS_PROXY": ("egress_proxy", _same), "ICE_MCP_LEASE_SECONDS": ("lease_seconds", float),
    "ICE_MCP_IDEMPOTENCY_KEY_SECONDS": ("idempotency_key_seconds", float),
    "ICE_MCP_WEBHOOK_MAX_BYTES": ("webhook_max_bytes", int),
    "ICE_MCP_PUBLIC_URL": ("public_url", lambda text: text.rstrip("/")),
    "ICE_MCP_SMTP_URL": ("smtp_url", _same), "ICE_MCP_SMTP_FROM": ("smtp_from", _same),
    "ICE_MCP_NOTIFY_BACKOFF": ("notify_backoff", _delays), "ICE_MCP_RETENTION_DAYS": ("retention_days", float),
    "ICE_MCP_MAX_RUNS": ("max_concurrent_runs", int), "ICE_MCP_STATE": ("state_url", _same),
    "ICE_MCP_MEMORY_BACKEND": ("memory_backend", _same),
    "ICE_MCP_TEMPORAL_HEARTBEAT_SECONDS": ("temporal_heartbeat_seconds", float),
    "ICE_MCP_ENGINE": ("engine", _same), "ICE_MCP_TEMPORAL": ("temporal_address", _same),
    "ICE_MCP_TEMPORAL_NAMESPACE": ("temporal_namespace", _same),
    "ICE_MCP_TEMPORAL_TASK_QUEUE": ("temporal_task_queue", _same),
}
