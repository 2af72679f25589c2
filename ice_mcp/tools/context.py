"""What a tool can know of the call it serves: the node attempt calling it (its idempotency key),
its orchestrator's services, and what is left of the budget.

This is the one ContextVar that crosses layers: a tool's signature belongs to its author (it is
the tool's input schema), so the tool node passes the call beside the arguments, not in them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.settings import Settings

if TYPE_CHECKING:
    from ice_mcp.core.context import Spend
    from ice_mcp.services import Services


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
    services: Services | None = field(default=None, compare=False, repr=False)
    spend: Spend | None = field(default=None, compare=False, repr=False)
    events: Callable[..., None] | None = field(default=None, compare=False, repr=False)  # the node's `emit`

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}/{self.node_path}/{self.attempt}"

    def budget_left(self) -> float | None:
        """What the run (and its network and caller) may still spend; None when unlimited."""
        return self.spend.remaining() if self.spend is not None else None

    def emit(self, event: str, **data: Any) -> None:
        """An event of the calling node (progress, say), in its run's event stream."""
        if self.events is not None:
            self.events(event, **data)


class CallSource(Protocol):
    """What a ToolCall is read from: a ToolCall, or the engine's NodeCall (no ToolCall made unless asked)."""

    @property
    def run_id(self) -> str: ...
    @property
    def node_path(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def services(self) -> Services | None: ...
    @property
    def spend(self) -> Spend | None: ...
    def emit(self, event: str, **data: Any) -> None: ...


CURRENT_CALL: ContextVar[CallSource | None] = ContextVar("ice_mcp_tool_call", default=None)


def current_call() -> ToolCall | None:
    """The node attempt calling this tool, or None when the tool is called outside any run."""
    source = CURRENT_CALL.get()
    if source is None or isinstance(source, ToolCall):
        return source
    return ToolCall(source.run_id, source.node_path, source.attempt, source.services, source.spend, source.emit)


def current_services() -> Services | None:
    """The calling orchestrator's services, or None outside any run."""
    source = CURRENT_CALL.get()
    return source.services if source is not None else None


def current_settings() -> Settings:
    """Settings of the calling run, or from the environment when a tool is called outside any run."""
    services = current_services()
    return services.settings if services is not None else Settings.from_env()
