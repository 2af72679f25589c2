"""What a tool can know of the call it serves: the run's services, and the call's identity for idempotency."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ice_mcp.services import Services, Settings

CURRENT_SERVICES: ContextVar[Services | None] = ContextVar("ice_mcp_services", default=None)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The node attempt a tool is called from.

    `idempotency_key` (`run_id/node_path/attempt`) is the same when a run resumed after a crash
    calls the tool again for the attempt that was in flight: a tool with side effects (a payment,
    an email, a write) can use it to do its work once.
    """

    run_id: str
    node_path: str
    attempt: int

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}/{self.node_path}/{self.attempt}"


CURRENT_CALL: ContextVar[ToolCall | None] = ContextVar("ice_mcp_tool_call", default=None)


def current_call() -> ToolCall | None:
    """The node attempt calling this tool, or None when the tool is called directly (an MCP tool call)."""
    return CURRENT_CALL.get()


def current_settings() -> Settings:
    """Settings of the calling run, or from the environment when a tool is called directly."""
    services = CURRENT_SERVICES.get()
    return services.settings if services is not None else Settings.from_env()
